//! Issue item 4, the dataplane: pod ↔ pod TCP throughput (iperf3, one
//! stream) and a 1-byte request/response rate over one TCP connection, for
//! Sarena eBPF mode, Sarena kernel mode and reference ptp + host-local (two
//! pods each, made by the real plugin on a throwaway [`NodeNetns`]), and a raw
//! veth pair between two netns; and over IPv6, Sarena eBPF mode (two
//! dual-stack pods) against a raw veth pair over IPv6 (issue 19).
//! Interleaved rounds, medians, ratios to the raw veth pair of the same
//! family, and the machine's CPU cost from `/proc/stat`. The Service paths
//! (issue 11) do the same pod → ClusterIP → pod through kube-proxy's
//! iptables-mode rules on their own nodes ([`service`]), checked by the
//! rules' and the eBPF programs' counters ([`service_check`]); the eBPF
//! paths also report their programs' own cost per run ([`prog_stats`]).
//! Sarena eBPF mode is measured twice, the second time with a third,
//! bandwidth-limited pod on the node (issue 18: unlimited pods must not pay
//! for the pacing path). Issue 26 (point 7) adds two paths with Sarena
//! embedded in the harness, as a Rust runtime embeds it ([`embedded_check`]):
//! without policies, and with [`netpol::POLICIES`] NetworkPolicies selecting
//! both pods, compiled by the real engine; a probe before and after the
//! rounds proves the policies were in force ([`policy_check`]).
//!
//! [`NodeNetns`]: crate::node::NodeNetns

pub(crate) mod cpu;
pub mod crossnode;
mod crr;
mod ebpf_check;
mod embedded;
pub mod embedded_check;
#[cfg(test)]
mod embedded_tests;
pub mod event_cost;
mod iperf;
mod netns;
pub mod netpol;
mod paths;
pub mod policy_check;
pub mod prog_stats;
mod raw_veth;
mod results;
mod rounds;
mod rr;
pub mod service;
pub mod service_check;
#[cfg(test)]
mod service_tests;
#[cfg(test)]
mod tests;

pub use cpu::{CpuUsage, Pinning, Settle};
pub use ebpf_check::EbpfCheck;
pub use embedded_check::EmbeddedCheck;
pub use event_cost::EventCost;
pub use iperf::{IperfReport, IperfRun};
pub use policy_check::{PolicyCheck, Probe};
pub use prog_stats::{ProgramRuns, RunDelta};
pub use results::{
    DataplaneResults, LIMITED_NEIGHBOUR, PathKind, PathResult, PathSample, PathSummary,
};
pub use rr::RrRun;
pub use service_check::{ServiceCheck, ServiceResults};

use std::time::Duration;

use crate::BenchError;
use crate::node::Bins;

/// What to measure and for how long.
#[derive(Debug, Clone)]
pub struct DataplaneOptions {
    /// Interleaved rounds (each measures every path once).
    pub rounds: u32,
    /// iperf3 duration per run, whole seconds.
    pub iperf_seconds: u64,
    /// Request/response duration per run, seconds.
    pub rr_seconds: u64,
    /// The paths, in report order ([`PathKind::ALL`] by default; the
    /// raw veth pair of a path's family must be among them for its ratios).
    pub paths: Vec<PathKind>,
    /// Node index of the first plugin path (the next ones count up); node
    /// indexes pick the pod subnets, so keep them apart from other nodes
    /// alive at the same time.
    pub first_node_index: u8,
    /// The binaries; `None`: [`Bins::locate`].
    pub bins: Option<Bins>,
    /// Pin client and server to these CPUs (`None`: let the scheduler
    /// place them). The default: both on the same CPU (see
    /// [`DataplaneOptions::full`]).
    pub pinning: Option<Pinning>,
    /// Before the first round, wait at most this long for the machine to
    /// quieten (below [`QUIET_PERCENT`] busy).
    pub settle_max: Duration,
    /// A smoke run: the event cost's floods are small.
    pub quick: bool,
}

/// Busy share of all CPUs under which the machine counts as quiet.
pub const QUIET_PERCENT: f64 = 20.0;

impl DataplaneOptions {
    /// The published run: 5 rounds of 5 s iperf3 and 3 s request/response
    /// per path (about 10 minutes for the twelve paths, with the eBPF paths'
    /// extra request/response run for their programs' cost), client and server
    /// pinned to one CPU, the highest this process may use: there the
    /// throughput and the request/response rate are the inverse of the whole
    /// path's cost (sender, forwarding, receiver), which is what the paths
    /// differ in, and background load on a small shared machine lands mostly
    /// on the other CPU(s). On the 2-vCPU machine of the published runs, with
    /// other work running, client and server on different CPUs varied 3–5×
    /// between rounds, unpinned about 2×, on one CPU ±10 %.
    pub fn full() -> DataplaneOptions {
        DataplaneOptions {
            rounds: 5,
            iperf_seconds: 5,
            rr_seconds: 3,
            paths: PathKind::ALL.to_vec(),
            first_node_index: 80,
            bins: None,
            pinning: default_pinning(),
            settle_max: Duration::from_secs(60),
            quick: false,
        }
    }

    /// A smoke run: one round of 1 s each.
    pub fn quick() -> DataplaneOptions {
        DataplaneOptions {
            rounds: 1,
            iperf_seconds: 1,
            rr_seconds: 1,
            settle_max: Duration::from_secs(5),
            quick: true,
            ..DataplaneOptions::full()
        }
    }

    fn validate(&self) -> Result<(), BenchError> {
        if self.rounds == 0 || self.iperf_seconds == 0 || self.rr_seconds == 0 {
            return Err(BenchError::Input {
                what: "rounds, iperf_seconds and rr_seconds must be at least 1".into(),
            });
        }
        if self.paths.is_empty() {
            return Err(BenchError::Input {
                what: "no path to measure".into(),
            });
        }
        if usize::from(self.first_node_index) + self.paths.len() > 100 {
            return Err(BenchError::Input {
                what: format!(
                    "first_node_index {} leaves no room for {} nodes below 100",
                    self.first_node_index,
                    self.paths.len()
                ),
            });
        }
        Ok(())
    }
}

/// Client and server on the same CPU, the highest this process may use.
fn default_pinning() -> Option<Pinning> {
    let cpu = cpu::allowed_cpus().into_iter().max()?;
    Some(Pinning {
        client: cpu,
        server: cpu,
    })
}

impl Default for DataplaneOptions {
    fn default() -> Self {
        DataplaneOptions::full()
    }
}

impl DataplaneResults {
    /// Checks that failed: paths not measured, the eBPF counters not
    /// matching. Empty when everything asked for was measured and verified.
    pub fn problems(&self) -> Vec<String> {
        let mut problems: Vec<String> = self
            .skipped
            .iter()
            .map(|(path, why)| format!("{}: {why}", path.label()))
            .collect();
        for (kind, check) in [
            (PathKind::SarenaEbpf, &self.ebpf_check),
            (PathKind::SarenaEbpf6, &self.ebpf6_check),
        ] {
            let measured = self
                .paths
                .iter()
                .any(|p| p.path == kind && !p.samples.is_empty());
            match check {
                Some(c) if !c.passed => {
                    problems.push(format!("eBPF check of {}: {}", kind.label(), c.describe()))
                }
                None if measured && self.check_errors.is_empty() => {
                    problems.push(format!("eBPF check of {}: counters not read", kind.label()))
                }
                _ => {}
            }
        }
        problems.extend(self.check_errors.iter().cloned());
        problems.extend(self.service_problems());
        problems.extend(self.embedded.iter().flat_map(EmbeddedCheck::problems));
        if self.check_errors.is_empty() {
            for p in &self.paths {
                let checked = self.embedded.iter().any(|c| c.path == p.path);
                if p.path.is_embedded() && !p.samples.is_empty() && !checked {
                    problems.push(format!("checks of {}: not made", p.path.label()));
                }
            }
        }
        problems
    }

    /// Failed Service checks, and measured Service paths without one.
    fn service_problems(&self) -> Vec<String> {
        let checks = self.services.as_ref().map_or(&[][..], |s| &s.checks[..]);
        let mut problems: Vec<String> = checks
            .iter()
            .filter(|c| !c.passed)
            .map(|c| format!("Service check: {}", c.describe()))
            .collect();
        if self.check_errors.is_empty() {
            for p in &self.paths {
                let checked = checks.iter().any(|c| c.path == p.path);
                if p.path.is_service() && !p.samples.is_empty() && !checked {
                    problems.push(format!("Service check of {}: not made", p.path.label()));
                }
            }
        }
        problems
    }
}

/// 1-minute load average.
fn load_average() -> Option<f64> {
    use procfs::Current;
    procfs::LoadAverage::current()
        .ok()
        // The kernel prints two decimals; f32 would add float noise.
        .map(|l| (f64::from(l.one) * 100.0).round() / 100.0)
}

/// Sets up every path, measures them in interleaved rounds and summarises.
/// A path that cannot be set up (or fails mid-run) is reported in
/// [`DataplaneResults::skipped`]; the run fails only when nothing could be
/// measured or the binaries are missing.
pub fn run(opts: &DataplaneOptions) -> Result<DataplaneResults, BenchError> {
    opts.validate()?;
    let needs_bins = opts.paths.iter().any(|p| p.contender().is_some());
    let bins = match (&opts.bins, needs_bins) {
        (Some(b), _) => Some(b.clone()),
        (None, true) => Some(Bins::locate()?),
        (None, false) => None,
    };
    let (prepared, mut skipped) = rounds::prepare_all(opts, bins.as_ref());
    if prepared.is_empty() {
        return Err(BenchError::Verify {
            what: format!("dataplane: no path could be set up: {skipped:?}"),
        });
    }
    let settle = cpu::settle(opts.settle_max, QUIET_PERCENT);
    eprintln!(
        "sarena-bench: dataplane: waited {:.0} s for a quiet machine ({} % busy)",
        settle.waited_seconds,
        settle
            .busy_percent
            .map_or("?".into(), |b| format!("{b:.0}"))
    );
    let load_before = load_average();
    let stats_sysctl = prog_stats::sysctl_enabled();
    let (programs, mut check_errors) = rounds::ebpf_programs(&prepared);
    let services_before = service_check::snapshots(&prepared);
    let ebpf_paths = [PathKind::SarenaEbpf, PathKind::SarenaEbpf6]
        .map(|kind| prepared.iter().position(|p| p.kind == kind));
    let counters_before = ebpf_paths.map(|i| i.and_then(|i| rounds::ebpf_counters(&prepared[i])));
    let embedded_before = embedded_check::before(&prepared);
    let measured = rounds::measure(&prepared, opts, &programs);
    let embedded = embedded_check::finish(&prepared, embedded_before, &measured.samples);
    let event_cost = match event_cost::measure(&prepared, opts) {
        Some(Ok(cost)) => Some(cost),
        Some(Err(e)) => {
            check_errors.push(format!("event cost: {}", sarena_core::error_chain(&e)));
            None
        }
        None => None,
    };
    let ([p4, p6], [b4, b6]) = (ebpf_paths, counters_before);
    let [ebpf_check, ebpf6_check] = [(p4, b4), (p6, b6)].map(|(i, before)| {
        let (i, before) = (i?, before?);
        let after = rounds::ebpf_counters(&prepared[i]);
        let iperf_bytes = measured.samples[i]
            .iter()
            .map(|s| s.iperf.report.bytes)
            .sum();
        let ipv6 = prepared[i].kind.ipv6();
        match (before, after) {
            (Ok(before), Some(Ok(after))) => {
                Some(EbpfCheck::new(&before, &after, iperf_bytes, ipv6))
            }
            (Err(e), _) | (_, Some(Err(e))) => {
                check_errors.push(format!("eBPF counters: {}", sarena_core::error_chain(&e)));
                None
            }
            (Ok(_), None) => None,
        }
    });
    let (services, service_errors) =
        service_check::finish(&prepared, services_before, &measured.samples, stats_sysctl);
    check_errors.extend(service_errors);
    check_errors.extend(measured.stats_failed.iter().flatten().cloned());
    let load_after = load_average();

    let mut paths: Vec<PathResult> = prepared
        .iter()
        .zip(measured.samples)
        .map(|(p, samples)| PathResult {
            path: p.kind,
            mtu: p.mtu,
            summary: PathSummary::of(&samples),
            samples,
        })
        .collect();
    results::fill_ratios(&mut paths);
    for (p, why) in prepared.iter().zip(measured.failed) {
        if let Some(why) = why {
            skipped.push((p.kind, why));
        }
    }
    let cpus = cpu::cpu_count();
    Ok(DataplaneResults {
        rounds: opts.rounds,
        iperf_seconds: opts.iperf_seconds,
        rr_seconds: opts.rr_seconds,
        cpus,
        pinning: opts.pinning,
        settle: Some(settle),
        load_average: (load_before, load_after),
        paths,
        ebpf_check,
        ebpf6_check,
        check_errors,
        skipped,
        services: Some(services),
        embedded,
        event_cost,
    })
}
