//! Issue 27, point 4: pods on two nodes. Each path is two node netns joined
//! by an underlay veth pair (the nodes' uplinks), a client pod on the first
//! node and a server pod on the second: Sarena's eBPF dataplane with native
//! routing and with VXLAN (Sarena embedded, joined to a two-node cluster
//! view exactly as Kubernetes mode joins it: the daemon's own peer routing
//! and overlay code, then the cluster's networks handed to the dataplane,
//! which hooks the uplinks), Sarena's kernel dataplane and flannel-style
//! host-gw routing (ptp + host-local, a route per peer pod subnet), against
//! the two node netns talking over the underlay directly. TCP throughput,
//! 1-byte request/response, connection rate and machine CPU per request, in
//! interleaved rounds; then the same with a host firewall of N filter
//! FORWARD rules loaded on every node. The eBPF paths' host-routing
//! counters and every node's forwarding counter show which way the packets
//! went.

mod paths;
mod report;
mod results;
#[cfg(test)]
mod tests;
mod topology;

pub use paths::CrossKind;
pub use results::{
    CrossNodeResults, CrossPathResult, CrossPhase, CrossPrograms, CrossSample, CrossSummary,
    FastPath,
};

use std::time::Duration;

use super::cpu::{self, Pinning};
use super::results::round_order;
use super::{QUIET_PERCENT, crr, default_pinning, iperf, prog_stats, rr};
use crate::BenchError;
use crate::node::Bins;
use paths::CrossPath;

/// What to measure and for how long.
#[derive(Debug, Clone)]
pub struct CrossNodeOptions {
    /// Interleaved rounds per phase.
    pub rounds: u32,
    /// iperf3 seconds per run.
    pub iperf_seconds: u64,
    /// Request/response and connection-rate seconds per run.
    pub rr_seconds: u64,
    /// Filter FORWARD rules loaded on every node for the second phase (0:
    /// no second phase).
    pub firewall_rules: usize,
    /// The paths (the underlay must be among them for the ratios).
    pub paths: Vec<CrossKind>,
    /// Client and server placement (the dataplane section's default: both
    /// on one CPU).
    pub pinning: Option<Pinning>,
    /// Wait at most this long for a quiet machine before each phase.
    pub settle_max: Duration,
}

impl CrossNodeOptions {
    /// The published run: 5 rounds of 5 s iperf3, 3 s request/response and
    /// 3 s connection rate per path and phase, 20,000 host rules (about 12
    /// minutes).
    pub fn full() -> CrossNodeOptions {
        CrossNodeOptions {
            rounds: 5,
            iperf_seconds: 5,
            rr_seconds: 3,
            firewall_rules: 20_000,
            paths: CrossKind::ALL.to_vec(),
            pinning: default_pinning(),
            settle_max: Duration::from_secs(60),
        }
    }

    /// A smoke run: one round of 1 s each, 2,000 host rules.
    pub fn quick() -> CrossNodeOptions {
        CrossNodeOptions {
            rounds: 1,
            iperf_seconds: 1,
            rr_seconds: 1,
            firewall_rules: 2_000,
            settle_max: Duration::from_secs(5),
            ..CrossNodeOptions::full()
        }
    }
}

/// Sets up every path, measures the phases and checks the counters. A path
/// that cannot be set up is reported in [`CrossNodeResults::skipped`]; the
/// run fails only when nothing could be set up.
pub fn run(opts: &CrossNodeOptions, bins: &Bins) -> Result<CrossNodeResults, BenchError> {
    if opts.rounds == 0 || opts.iperf_seconds == 0 || opts.rr_seconds == 0 {
        return Err(BenchError::Input {
            what: "cross-node: rounds and durations must be at least 1".into(),
        });
    }
    let mut prepared = Vec::new();
    let mut skipped = Vec::new();
    for &kind in &opts.paths {
        match paths::prepare(kind, bins) {
            Ok(p) => prepared.push(p),
            Err(e) => {
                let why = sarena_core::error_chain(&e);
                eprintln!(
                    "sarena-bench: cross-node: {} not set up: {why}",
                    kind.label()
                );
                skipped.push((kind, why));
            }
        }
    }
    if prepared.is_empty() {
        return Err(BenchError::Verify {
            what: format!("cross-node: no path could be set up: {skipped:?}"),
        });
    }
    let mut check_errors = Vec::new();
    let mut phases = vec![measure_phase(&prepared, opts, 0, &mut check_errors)];
    if opts.firewall_rules > 0 {
        let rules = topology::firewall_rules(opts.firewall_rules);
        let loaded = prepared.iter().try_for_each(|p| {
            paths::node_paths(p).into_iter().try_for_each(|ns| {
                topology::load_firewall(ns, &rules)?;
                let seen = topology::forward_rules(ns)?;
                if seen < opts.firewall_rules {
                    return Err(BenchError::Verify {
                        what: format!(
                            "{}: {seen} FORWARD rules after loading {}",
                            ns.display(),
                            opts.firewall_rules
                        ),
                    });
                }
                Ok(())
            })
        });
        match loaded {
            Ok(()) => phases.push(measure_phase(
                &prepared,
                opts,
                opts.firewall_rules,
                &mut check_errors,
            )),
            Err(e) => check_errors.push(format!(
                "cross-node host firewall: {}",
                sarena_core::error_chain(&e)
            )),
        }
    }
    Ok(CrossNodeResults {
        rounds: opts.rounds,
        iperf_seconds: opts.iperf_seconds,
        rr_seconds: opts.rr_seconds,
        pinning: opts.pinning,
        phases,
        skipped,
        check_errors,
    })
}

/// Both nodes' forwarding counters.
fn forwarded(p: &CrossPath) -> Result<[u64; 2], BenchError> {
    let [a, b] = paths::node_paths(p);
    Ok([topology::host_forwarded(a)?, topology::host_forwarded(b)?])
}

fn measure_once(p: &CrossPath, opts: &CrossNodeOptions) -> Result<CrossSample, BenchError> {
    let e = &p.endpoints;
    let secs = Duration::from_secs(opts.rr_seconds);
    let iperf = iperf::measure(e, Duration::from_secs(opts.iperf_seconds), opts.pinning)?;
    let rr = rr::measure(e, secs, opts.pinning)?;
    let crr = crr::measure(e, secs, opts.pinning)?;
    let programs = match &p.programs {
        Some([a, b]) => {
            let (mut runs, rr) =
                prog_stats::measure_nodes(&[a, b], || rr::measure(e, secs, opts.pinning))?;
            let server_node = runs.pop().unwrap_or_default();
            let client_node = runs.pop().unwrap_or_default();
            Some(CrossPrograms {
                client_node,
                server_node,
                transactions: rr.transactions,
            })
        }
        None => None,
    };
    Ok(CrossSample {
        round: 0,
        position: 0,
        iperf,
        rr,
        crr,
        programs,
    })
}

/// Every path once per round, in [`round_order`]; a failed path is left
/// out of the later rounds.
fn measure_phase(
    prepared: &[CrossPath],
    opts: &CrossNodeOptions,
    firewall_rules: usize,
    check_errors: &mut Vec<String>,
) -> CrossPhase {
    let settle = cpu::settle(opts.settle_max, QUIET_PERCENT);
    eprintln!(
        "sarena-bench: cross-node ({firewall_rules} host rules): waited {:.0} s for a quiet machine",
        settle.waited_seconds
    );
    let mut note = |what: &str, e: BenchError| {
        check_errors.push(format!(
            "cross-node, {firewall_rules} host rules, {what}: {}",
            sarena_core::error_chain(&e)
        ));
    };
    let counters_before: Vec<_> = prepared.iter().map(CrossPath::counters).collect();
    let forwarded_before: Vec<_> = prepared.iter().map(forwarded).collect();
    let mut samples: Vec<Vec<CrossSample>> = vec![Vec::new(); prepared.len()];
    let mut failed: Vec<Option<String>> = vec![None; prepared.len()];
    for round in 1..=opts.rounds {
        for (position, i) in round_order(prepared.len(), round).into_iter().enumerate() {
            if failed[i].is_some() {
                continue;
            }
            let label = prepared[i].kind.label();
            match measure_once(&prepared[i], opts) {
                Ok(mut s) => {
                    (s.round, s.position) = (round, position as u32);
                    eprintln!(
                        "sarena-bench: cross-node round {round}/{} ({firewall_rules} host rules): \
                         {label}: {:.2} Gbit/s, {:.0} req/s, {:.0} conn/s",
                        opts.rounds,
                        s.iperf.gbits_per_second(),
                        s.rr.per_second,
                        s.crr.per_second
                    );
                    samples[i].push(s);
                }
                Err(e) => {
                    let why = sarena_core::error_chain(&e);
                    eprintln!("sarena-bench: cross-node: {label} failed: {why}");
                    failed[i] = Some(format!("failed in round {round}: {why}"));
                }
            }
        }
    }
    let mut paths = Vec::new();
    for (((p, samples), before), fw_before) in prepared
        .iter()
        .zip(samples)
        .zip(counters_before)
        .zip(forwarded_before)
    {
        let fast_path = match (before, p.counters()) {
            (Some(Ok(b)), Some(Ok(a))) => Some(FastPath::between(&b, &a)),
            (Some(Err(e)), _) | (_, Some(Err(e))) => {
                note(&format!("{} counters", p.kind.label()), e);
                None
            }
            _ => None,
        };
        let host_forwarded = match (fw_before, forwarded(p)) {
            (Ok(b), Ok(a)) => Some([a[0].saturating_sub(b[0]), a[1].saturating_sub(b[1])]),
            (Err(e), _) | (_, Err(e)) => {
                note(&format!("{} forwarding counters", p.kind.label()), e);
                None
            }
        };
        paths.push(CrossPathResult {
            path: p.kind,
            mtu: p.mtu,
            summary: CrossSummary::of(&samples),
            samples,
            host_forwarded,
            fast_path,
        });
    }
    let mut phase = CrossPhase {
        firewall_rules,
        paths,
        failed: prepared
            .iter()
            .zip(failed)
            .filter_map(|(p, why)| Some((p.kind, why?)))
            .collect(),
    };
    phase.fill_ratios();
    phase
}
