//! The measurements of every path, their medians and their ratios to the raw
//! veth pair (serde: written to the results JSON the report reads).

use serde::{Deserialize, Serialize};

use super::cpu::{Pinning, Settle};
use super::ebpf_check::EbpfCheck;
use super::embedded_check::EmbeddedCheck;
use super::event_cost::EventCost;
use super::iperf::IperfRun;
use super::prog_stats::ProgramRuns;
use super::rr::RrRun;
use super::service_check::ServiceResults;
use crate::node::Contender;
use crate::stats::{median, range, ratio_of as ratio};

/// A pod ↔ pod path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PathKind {
    /// One veth pair straight between two netns (the floor).
    RawVeth,
    /// Two pods made by sarena-cni, daemon in eBPF mode.
    SarenaEbpf,
    /// As [`PathKind::SarenaEbpf`] (both pods unlimited), on a node where a
    /// third pod has bandwidth limits in place: the pacing machinery is in
    /// use on the node, and the measured pods must not pay for it.
    SarenaEbpfBesideLimited,
    /// Two pods made by sarena-cni, daemon in kernel mode.
    SarenaKernel,
    /// Two pods made by the reference ptp + host-local plugins.
    PtpHostLocal,
    /// Sarena eBPF mode, the client dialling a ClusterIP whose endpoint is
    /// the server pod (kube-proxy's iptables-mode rules in the node netns).
    SarenaEbpfService,
    /// Sarena kernel mode, through a ClusterIP.
    SarenaKernelService,
    /// ptp + host-local, through a ClusterIP.
    PtpHostLocalService,
    /// [`PathKind::RawVeth`] over IPv6 (the floor of the IPv6 rows).
    RawVeth6,
    /// Two dual-stack pods made by sarena-cni, daemon in eBPF mode, over IPv6.
    SarenaEbpf6,
    /// Two pods made by Sarena embedded in the harness (registry, eBPF
    /// dataplane and the plugin's ADD/DEL sequence in process), no policy.
    SarenaEbpfEmbedded,
    /// As [`PathKind::SarenaEbpfEmbedded`], with 100 NetworkPolicies
    /// selecting both pods (ingress and egress isolated) compiled by the
    /// real engine and applied to the dataplane.
    SarenaEbpfEmbeddedPolicies,
}

impl PathKind {
    /// Every path, in report order.
    pub const ALL: [PathKind; 12] = [
        PathKind::RawVeth,
        PathKind::SarenaEbpf,
        PathKind::SarenaEbpfBesideLimited,
        PathKind::SarenaKernel,
        PathKind::PtpHostLocal,
        PathKind::SarenaEbpfService,
        PathKind::SarenaKernelService,
        PathKind::PtpHostLocalService,
        PathKind::RawVeth6,
        PathKind::SarenaEbpf6,
        PathKind::SarenaEbpfEmbedded,
        PathKind::SarenaEbpfEmbeddedPolicies,
    ];

    /// The name used in tables.
    pub fn label(self) -> &'static str {
        match self {
            PathKind::RawVeth => "raw veth pair",
            PathKind::SarenaEbpf => "Sarena eBPF mode",
            PathKind::SarenaEbpfBesideLimited => "Sarena eBPF mode, beside a limited pod",
            PathKind::SarenaKernel => "Sarena kernel mode",
            PathKind::PtpHostLocal => "ptp + host-local",
            PathKind::SarenaEbpfService => "Sarena eBPF mode → ClusterIP",
            PathKind::SarenaKernelService => "Sarena kernel mode → ClusterIP",
            PathKind::PtpHostLocalService => "ptp + host-local → ClusterIP",
            PathKind::RawVeth6 => "raw veth pair, IPv6",
            PathKind::SarenaEbpf6 => "Sarena eBPF mode, IPv6",
            PathKind::SarenaEbpfEmbedded => "Sarena eBPF, embedded, 0 policies",
            PathKind::SarenaEbpfEmbeddedPolicies => "Sarena eBPF, embedded, 100 policies",
        }
    }

    /// Who makes the pods with a plugin binary (`None`: the raw veth pair,
    /// and the embedded paths, whose pods the harness makes in process).
    pub fn contender(self) -> Option<Contender> {
        match self {
            PathKind::RawVeth
            | PathKind::RawVeth6
            | PathKind::SarenaEbpfEmbedded
            | PathKind::SarenaEbpfEmbeddedPolicies => None,
            PathKind::SarenaEbpf
            | PathKind::SarenaEbpfBesideLimited
            | PathKind::SarenaEbpfService
            | PathKind::SarenaEbpf6 => Some(Contender::SarenaEbpf),
            PathKind::SarenaKernel | PathKind::SarenaKernelService => Some(Contender::SarenaKernel),
            PathKind::PtpHostLocal | PathKind::PtpHostLocalService => Some(Contender::PtpHostLocal),
        }
    }

    /// Whether a third pod with [`LIMITED_NEIGHBOUR`]'s limits sits on the
    /// node beside the measured (unlimited) pods.
    pub fn has_limited_neighbour(self) -> bool {
        self == PathKind::SarenaEbpfBesideLimited
    }

    /// Whether the client reaches the server through a ClusterIP.
    pub fn is_service(self) -> bool {
        matches!(
            self,
            PathKind::SarenaEbpfService
                | PathKind::SarenaKernelService
                | PathKind::PtpHostLocalService
        )
    }

    /// The direct pod ↔ pod path of a Service path's contender (itself for
    /// the others).
    pub fn direct(self) -> PathKind {
        match self {
            PathKind::SarenaEbpfService => PathKind::SarenaEbpf,
            PathKind::SarenaKernelService => PathKind::SarenaKernel,
            PathKind::PtpHostLocalService => PathKind::PtpHostLocal,
            other => other,
        }
    }

    /// Whether the path carries IPv6 (else IPv4).
    pub fn ipv6(self) -> bool {
        matches!(self, PathKind::RawVeth6 | PathKind::SarenaEbpf6)
    }

    /// The raw veth pair of the path's family, its ratios' denominator.
    pub fn baseline(self) -> PathKind {
        if self.ipv6() {
            PathKind::RawVeth6
        } else {
            PathKind::RawVeth
        }
    }

    /// Whether Sarena is embedded in the harness on this path (no plugin
    /// binary, no daemon process).
    pub fn is_embedded(self) -> bool {
        matches!(
            self,
            PathKind::SarenaEbpfEmbedded | PathKind::SarenaEbpfEmbeddedPolicies
        )
    }

    /// Whether the path runs Sarena's eBPF programs (a pin dir to read).
    pub fn is_ebpf(self) -> bool {
        self.contender() == Some(Contender::SarenaEbpf) || self.is_embedded()
    }

    /// The path named `name` as the results JSON names it (`raw-veth`,
    /// `sarena-ebpf-embedded-policies`, ...).
    pub fn from_name(name: &str) -> Option<PathKind> {
        serde_json::from_value(serde_json::Value::String(name.trim().into())).ok()
    }

    /// The name [`PathKind::from_name`] takes.
    pub fn name(self) -> String {
        match serde_json::to_value(self) {
            Ok(serde_json::Value::String(s)) => s,
            _ => format!("{self:?}"),
        }
    }

    /// Whether the path is a raw veth pair (no plugin, no node).
    pub fn is_raw(self) -> bool {
        matches!(self, PathKind::RawVeth | PathKind::RawVeth6)
    }
}

/// The `runtimeConfig.bandwidth` of the limited pod beside the measured
/// ones on [`PathKind::SarenaEbpfBesideLimited`]: 10 Mbit/s each way, both
/// directions paced (an `fq` root on its host veth, `to_container_bw`, and
/// `pod_egress` on `fq` in its netns).
pub const LIMITED_NEIGHBOUR: &str = r#"{"ingressRate": 10000000, "ingressBurst": 1000000,
    "egressRate": 10000000, "egressBurst": 1000000}"#;

/// One round's measurements of one path.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PathSample {
    /// Round number, from 1.
    pub round: u32,
    /// Position of this path within the round (0 = measured first).
    pub position: u32,
    /// TCP throughput.
    pub iperf: IperfRun,
    /// Request/response rate.
    pub rr: RrRun,
    /// The eBPF programs' own run time over an extra request/response run
    /// with BPF run-time statistics on (eBPF paths only).
    #[serde(default)]
    pub programs: Option<ProgramRuns>,
}

/// Medians over a path's rounds and ratios to the raw veth pair's medians.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct PathSummary {
    /// Median TCP throughput, Gbit/s.
    pub gbits_median: Option<f64>,
    /// Smallest and largest round, Gbit/s.
    pub gbits_range: Option<(f64, f64)>,
    /// Median round trips per second.
    pub rr_median: Option<f64>,
    /// Smallest and largest round, round trips per second.
    pub rr_range: Option<(f64, f64)>,
    /// Median machine CPU-seconds per Gbit moved by iperf3.
    pub cpu_seconds_per_gbit_median: Option<f64>,
    /// Median busy % of all CPUs during iperf3.
    pub iperf_busy_percent_median: Option<f64>,
    /// Median machine CPU microseconds per round trip.
    pub cpu_us_per_rr_median: Option<f64>,
    /// Median busy % of all CPUs during request/response.
    pub rr_busy_percent_median: Option<f64>,
    /// Median CPU-seconds of the iperf3 processes per Gbit.
    pub process_cpu_seconds_per_gbit_median: Option<f64>,
    /// Median CPU microseconds of the client and server threads per round trip.
    pub process_cpu_us_per_rr_median: Option<f64>,
    /// TCP retransmissions over all rounds.
    pub retransmits: u64,
    /// Median ns per run of `from_container` during request/response (eBPF).
    pub from_container_ns_per_run_median: Option<f64>,
    /// Median ns per run of `to_container` during request/response (eBPF).
    pub to_container_ns_per_run_median: Option<f64>,
    /// Throughput median ÷ the raw veth pair's.
    pub gbits_ratio_to_raw: Option<f64>,
    /// Request/response median ÷ the raw veth pair's.
    pub rr_ratio_to_raw: Option<f64>,
    /// CPU per Gbit median ÷ the raw veth pair's (lower is better).
    pub cpu_per_gbit_ratio_to_raw: Option<f64>,
    /// Process CPU per Gbit median ÷ the raw veth pair's (lower is better).
    pub process_cpu_per_gbit_ratio_to_raw: Option<f64>,
    /// Process CPU per round trip median ÷ the raw veth pair's (lower is better).
    pub process_cpu_per_rr_ratio_to_raw: Option<f64>,
}

/// Everything measured on one path.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PathResult {
    /// Which path.
    pub path: PathKind,
    /// The server pod's `eth0` MTU (it bounds the segment size).
    pub mtu: Option<u32>,
    /// Every round.
    pub samples: Vec<PathSample>,
    /// Medians and ratios.
    pub summary: PathSummary,
}

/// The dataplane section's results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DataplaneResults {
    /// Interleaved rounds run.
    pub rounds: u32,
    /// iperf3 duration per run, seconds.
    pub iperf_seconds: u64,
    /// Request/response duration per run, seconds.
    pub rr_seconds: u64,
    /// CPUs of the machine.
    pub cpus: usize,
    /// Where client and server ran (`None`: wherever the scheduler put them).
    pub pinning: Option<Pinning>,
    /// The wait for a quiet machine before the first round.
    #[serde(default)]
    pub settle: Option<Settle>,
    /// 1-minute load average before and after the measurements.
    pub load_average: (Option<f64>, Option<f64>),
    /// Every path measured.
    pub paths: Vec<PathResult>,
    /// The eBPF counters check, when the eBPF path was measured.
    pub ebpf_check: Option<EbpfCheck>,
    /// The same check of the IPv6 eBPF path (IPv6 redirects required).
    #[serde(default)]
    pub ebpf6_check: Option<EbpfCheck>,
    /// Checks that could not be made, with why.
    #[serde(default)]
    pub check_errors: Vec<String>,
    /// Paths that could not be set up, with why.
    pub skipped: Vec<(PathKind, String)>,
    /// The Service paths' checks (rule counters, eBPF counters) and the
    /// programs' run-time statistics.
    #[serde(default)]
    pub services: Option<ServiceResults>,
    /// The embedded paths' checks (redirects, policies in force) and what
    /// the engine compiled.
    #[serde(default)]
    pub embedded: Vec<EmbeddedCheck>,
    /// What drop and flow events cost the programs (issue 28), measured on
    /// the embedded path after its rounds.
    #[serde(default)]
    pub event_cost: Option<EventCost>,
}

impl PathSummary {
    /// Medians of `samples`; ratios stay `None` (see `fill_ratios`).
    pub fn of(samples: &[PathSample]) -> PathSummary {
        let pick = |f: &dyn Fn(&PathSample) -> Option<f64>| -> Vec<f64> {
            samples.iter().filter_map(f).collect()
        };
        let gbits = pick(&|s| Some(s.iperf.gbits_per_second()));
        let rr = pick(&|s| Some(s.rr.per_second));
        PathSummary {
            gbits_median: median(&gbits),
            gbits_range: range(&gbits),
            rr_median: median(&rr),
            rr_range: range(&rr),
            cpu_seconds_per_gbit_median: median(&pick(&|s| s.iperf.cpu_seconds_per_gbit())),
            iperf_busy_percent_median: median(&pick(&|s| s.iperf.cpu.map(|c| c.busy_percent))),
            cpu_us_per_rr_median: median(&pick(&|s| s.rr.cpu_us_per_transaction())),
            rr_busy_percent_median: median(&pick(&|s| s.rr.cpu.map(|c| c.busy_percent))),
            process_cpu_seconds_per_gbit_median: median(&pick(&|s| {
                s.iperf.process_cpu_seconds_per_gbit()
            })),
            process_cpu_us_per_rr_median: median(&pick(&|s| s.rr.process_cpu_us_per_transaction())),
            retransmits: samples
                .iter()
                .filter_map(|s| s.iperf.report.retransmits)
                .sum(),
            from_container_ns_per_run_median: median(&pick(&|s| {
                s.programs?.from_container.ns_per_run()
            })),
            to_container_ns_per_run_median: median(&pick(&|s| {
                s.programs?.to_container.ns_per_run()
            })),
            ..PathSummary::default()
        }
    }
}

/// Sets every path's ratios to the medians of the raw veth pair of its
/// family (none without that raw veth path).
pub fn fill_ratios(paths: &mut [PathResult]) {
    let raws: Vec<(PathKind, PathSummary)> = paths
        .iter()
        .filter(|p| p.path.is_raw())
        .map(|p| (p.path, p.summary.clone()))
        .collect();
    for p in paths.iter_mut() {
        let Some((_, raw)) = raws.iter().find(|(k, _)| *k == p.path.baseline()) else {
            continue;
        };
        let s = &mut p.summary;
        s.gbits_ratio_to_raw = ratio(s.gbits_median, raw.gbits_median);
        s.rr_ratio_to_raw = ratio(s.rr_median, raw.rr_median);
        s.cpu_per_gbit_ratio_to_raw = ratio(
            s.cpu_seconds_per_gbit_median,
            raw.cpu_seconds_per_gbit_median,
        );
        s.process_cpu_per_gbit_ratio_to_raw = ratio(
            s.process_cpu_seconds_per_gbit_median,
            raw.process_cpu_seconds_per_gbit_median,
        );
        s.process_cpu_per_rr_ratio_to_raw = ratio(
            s.process_cpu_us_per_rr_median,
            raw.process_cpu_us_per_rr_median,
        );
    }
}

/// The order paths are measured in during `round` (from 1): the list
/// rotated by one more place each round, so no path is always first (right
/// after the previous round's last) or always last.
pub fn round_order(paths: usize, round: u32) -> Vec<usize> {
    if paths == 0 {
        return Vec::new();
    }
    let shift = (round.saturating_sub(1) as usize) % paths;
    (0..paths).map(|i| (i + shift) % paths).collect()
}
