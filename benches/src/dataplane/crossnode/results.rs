//! What the cross-node benchmark measured: per phase (without, then with
//! the host firewall) each path's samples, medians and ratios to the
//! underlay, what the nodes' host stacks forwarded, the eBPF paths'
//! host-routing counters, and the checks over them.

use std::collections::BTreeMap;

use sarena_common::peers::NodeCounters;
use serde::{Deserialize, Serialize};

use super::paths::CrossKind;
use crate::dataplane::{IperfRun, Pinning, RrRun, RunDelta};
use crate::stats::{median, ratio_of};

/// One round's measurement of one path.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CrossSample {
    /// 1-based round.
    pub round: u32,
    /// Position within the round.
    pub position: u32,
    /// TCP throughput (iperf3, one stream).
    pub iperf: IperfRun,
    /// 1-byte request/response over one connection.
    pub rr: RrRun,
    /// Connection rate (connect, 1-byte request and response, close).
    pub crr: RrRun,
    /// The eBPF paths: their programs' runs over one more request/response
    /// run with the kernel's run-time statistics on.
    pub programs: Option<CrossPrograms>,
}

/// The eBPF programs' runs on both nodes over one request/response run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CrossPrograms {
    /// The client's node, by program name.
    pub client_node: BTreeMap<String, RunDelta>,
    /// The server's node.
    pub server_node: BTreeMap<String, RunDelta>,
    /// Round trips of that run's timed window.
    pub transactions: u64,
}

impl CrossPrograms {
    /// Nanoseconds all programs on both nodes spent per round trip.
    pub fn ns_per_transaction(&self) -> Option<f64> {
        let total: u64 = self
            .client_node
            .values()
            .chain(self.server_node.values())
            .map(|d| d.run_time_ns)
            .sum();
        (self.transactions > 0).then(|| total as f64 / self.transactions as f64)
    }

    /// A program's nanoseconds per run, both nodes together.
    pub fn ns_per_run(&self, name: &str) -> Option<f64> {
        let (a, b) = (self.client_node.get(name), self.server_node.get(name));
        let sum = RunDelta {
            run_time_ns: a.map_or(0, |d| d.run_time_ns) + b.map_or(0, |d| d.run_time_ns),
            runs: a.map_or(0, |d| d.runs) + b.map_or(0, |d| d.runs),
        };
        sum.ns_per_run()
    }

    /// A program's runs per round trip, both nodes together.
    pub fn runs_per_transaction(&self, name: &str) -> Option<f64> {
        let runs = self.client_node.get(name).map_or(0, |d| d.runs)
            + self.server_node.get(name).map_or(0, |d| d.runs);
        (self.transactions > 0).then(|| runs as f64 / self.transactions as f64)
    }
}

/// Medians over a path's samples, and their ratios to the underlay's in the
/// same phase.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CrossSummary {
    /// TCP throughput, Gbit/s.
    pub gbits: Option<f64>,
    /// Request/response round trips per second.
    pub rr: Option<f64>,
    /// Connections per second.
    pub crr: Option<f64>,
    /// Machine CPU microseconds per round trip.
    pub rr_cpu_us: Option<f64>,
    /// Machine CPU microseconds per connection.
    pub crr_cpu_us: Option<f64>,
    /// The eBPF programs' microseconds per round trip (both nodes, all
    /// programs; from the extra statistics run).
    pub programs_us: Option<f64>,
    /// Ratios to the underlay: throughput, round trips, connections, CPU
    /// per round trip, CPU per connection.
    pub gbits_ratio: Option<f64>,
    /// See `gbits_ratio`.
    pub rr_ratio: Option<f64>,
    /// See `gbits_ratio`.
    pub crr_ratio: Option<f64>,
    /// See `gbits_ratio`.
    pub rr_cpu_ratio: Option<f64>,
    /// See `gbits_ratio`.
    pub crr_cpu_ratio: Option<f64>,
}

impl CrossSummary {
    /// The medians of `samples` (ratios unset).
    pub fn of(samples: &[CrossSample]) -> CrossSummary {
        let pick = |f: &dyn Fn(&CrossSample) -> Option<f64>| {
            median(&samples.iter().filter_map(f).collect::<Vec<_>>())
        };
        CrossSummary {
            gbits: pick(&|s| Some(s.iperf.gbits_per_second())),
            rr: pick(&|s| Some(s.rr.per_second)),
            crr: pick(&|s| Some(s.crr.per_second)),
            rr_cpu_us: pick(&|s| s.rr.cpu_us_per_transaction()),
            crr_cpu_us: pick(&|s| s.crr.cpu_us_per_transaction()),
            programs_us: pick(&|s| {
                s.programs
                    .as_ref()?
                    .ns_per_transaction()
                    .map(|ns| ns / 1000.0)
            }),
            ..CrossSummary::default()
        }
    }

    fn set_ratios(&mut self, base: &CrossSummary) {
        self.gbits_ratio = ratio_of(self.gbits, base.gbits);
        self.rr_ratio = ratio_of(self.rr, base.rr);
        self.crr_ratio = ratio_of(self.crr, base.crr);
        self.rr_cpu_ratio = ratio_of(self.rr_cpu_us, base.rr_cpu_us);
        self.crr_cpu_ratio = ratio_of(self.crr_cpu_us, base.crr_cpu_us);
    }
}

/// The eBPF host-routing counters' growth over a phase, by name, on the
/// client's node and on the server's.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FastPath {
    /// Client's node.
    pub client_node: BTreeMap<String, u64>,
    /// Server's node.
    pub server_node: BTreeMap<String, u64>,
}

impl FastPath {
    /// The growth from `before` to `after` of both nodes' counters.
    pub fn between(before: &[NodeCounters; 2], after: &[NodeCounters; 2]) -> FastPath {
        let delta = |b: &NodeCounters, a: &NodeCounters| {
            b.named()
                .iter()
                .zip(a.named())
                .map(|((name, b), (_, a))| ((*name).to_owned(), a.saturating_sub(*b)))
                .collect()
        };
        FastPath {
            client_node: delta(&before[0], &after[0]),
            server_node: delta(&before[1], &after[1]),
        }
    }

    /// Packets a node sent straight to the other node's pods.
    pub fn sent_direct(node: &BTreeMap<String, u64>) -> u64 {
        ["to_peer_redirected", "to_peer_neigh"]
            .iter()
            .map(|k| node.get(*k).copied().unwrap_or(0))
            .sum()
    }

    /// Packets a node delivered straight from the other node's pods.
    pub fn received_direct(node: &BTreeMap<String, u64>) -> u64 {
        node.get("from_peer_redirected").copied().unwrap_or(0)
    }
}

/// One path in one phase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CrossPathResult {
    /// Which path.
    pub path: CrossKind,
    /// The server pod's (or node's) MTU.
    pub mtu: Option<u32>,
    /// One per round.
    pub samples: Vec<CrossSample>,
    /// Medians and ratios.
    pub summary: CrossSummary,
    /// Packets the host stacks of the client's and the server's node
    /// forwarded over the phase (`Ip: ForwDatagrams`).
    pub host_forwarded: Option<[u64; 2]>,
    /// The eBPF paths' counters over the phase.
    pub fast_path: Option<FastPath>,
}

impl CrossPathResult {
    /// Round trips and connections made over the phase: each is at least
    /// one packet each way.
    pub fn exchanges(&self) -> u64 {
        self.samples
            .iter()
            .map(|s| s.rr.transactions + s.crr.transactions)
            .sum()
    }
}

/// One phase: every path measured in interleaved rounds under one host
/// firewall.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CrossPhase {
    /// Filter FORWARD rules loaded on every node (0: none).
    pub firewall_rules: usize,
    /// The paths, in report order.
    pub paths: Vec<CrossPathResult>,
    /// Paths that failed in this phase, and why.
    pub failed: Vec<(CrossKind, String)>,
}

impl CrossPhase {
    /// Fills in every path's ratios to the underlay's medians.
    pub fn fill_ratios(&mut self) {
        let Some(base) = self
            .paths
            .iter()
            .find(|p| p.path == CrossKind::Underlay)
            .map(|p| p.summary.clone())
        else {
            return;
        };
        for p in &mut self.paths {
            p.summary.set_ratios(&base);
        }
    }

    /// The result of `kind`, if it was measured.
    pub fn path(&self, kind: CrossKind) -> Option<&CrossPathResult> {
        self.paths
            .iter()
            .find(|p| p.path == kind && !p.samples.is_empty())
    }
}

/// The whole cross-node run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CrossNodeResults {
    /// Rounds per phase.
    pub rounds: u32,
    /// iperf3 seconds per run.
    pub iperf_seconds: u64,
    /// Request/response and connection-rate seconds per run.
    pub rr_seconds: u64,
    /// Where client and server ran.
    pub pinning: Option<Pinning>,
    /// Without the host firewall, then with it.
    pub phases: Vec<CrossPhase>,
    /// Paths that could not be set up, and why.
    pub skipped: Vec<(CrossKind, String)>,
    /// Errors of the checks themselves (a counter that could not be read).
    pub check_errors: Vec<String>,
}

/// Host-stack forwarding an eBPF path may show over a phase: the odd
/// packet the programs leave to it (a neighbour probe's trigger, a
/// stray retransmission of a flow's first packet), never the traffic.
fn forwarding_allowance(exchanges: u64) -> u64 {
    (exchanges / 100).max(20)
}

impl CrossNodeResults {
    /// Every check that failed: paths not set up or failed, eBPF paths whose
    /// counters do not show the direct path on both nodes or whose nodes'
    /// host stacks forwarded the traffic, host-stack paths whose nodes did
    /// not (the path is not what it claims).
    pub fn problems(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .skipped
            .iter()
            .map(|(k, why)| format!("cross-node {}: not set up: {why}", k.label()))
            .collect();
        out.extend(self.check_errors.iter().cloned());
        for phase in &self.phases {
            let tag = format!("cross-node, {} host rules", phase.firewall_rules);
            for (k, why) in &phase.failed {
                out.push(format!("{tag}, {}: {why}", k.label()));
            }
            for p in phase.paths.iter().filter(|p| !p.samples.is_empty()) {
                out.extend(path_problems(&tag, p));
            }
        }
        out
    }
}

fn path_problems(tag: &str, p: &CrossPathResult) -> Vec<String> {
    let mut out = Vec::new();
    let label = format!("{tag}, {}", p.path.label());
    let exchanges = p.exchanges();
    let forwarded = p.host_forwarded;
    if p.path.is_direct() {
        match &p.fast_path {
            None => out.push(format!("{label}: host-routing counters not read")),
            Some(f) => {
                for (node, counters) in [("client", &f.client_node), ("server", &f.server_node)] {
                    let (sent, got) = (
                        FastPath::sent_direct(counters),
                        FastPath::received_direct(counters),
                    );
                    if sent < exchanges || got < exchanges {
                        out.push(format!(
                            "{label}: the {node}'s node sent {sent} and delivered {got} packets \
                             directly, fewer than the {exchanges} exchanges measured"
                        ));
                    }
                }
            }
        }
        if let Some(fw) = forwarded
            && fw.iter().any(|&n| n > forwarding_allowance(exchanges))
        {
            out.push(format!(
                "{label}: the nodes' host stacks forwarded {} and {} packets (the direct path \
                 leaves them none of the traffic)",
                fw[0], fw[1]
            ));
        }
    } else if p.path != CrossKind::Underlay
        && let Some(fw) = forwarded
        && fw.iter().any(|&n| n < exchanges)
    {
        out.push(format!(
            "{label}: the nodes' host stacks forwarded only {} and {} packets for {exchanges} \
             exchanges",
            fw[0], fw[1]
        ));
    }
    if !p.path.is_direct()
        && let Some(f) = &p.fast_path
    {
        let direct: u64 = [&f.client_node, &f.server_node]
            .into_iter()
            .map(|n| FastPath::sent_direct(n) + FastPath::received_direct(n))
            .sum();
        if direct > 0 {
            out.push(format!(
                "{label}: the programs routed {direct} packets directly on a path meant to \
                 leave them to the host stack"
            ));
        }
    }
    if forwarded.is_none() {
        out.push(format!("{label}: host-stack forwarding not read"));
    }
    out
}
