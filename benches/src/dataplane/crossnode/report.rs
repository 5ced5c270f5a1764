//! The cross-node section of docs/benchmarks.md: one table per phase, the
//! issue's targets met or not, and how the numbers were made.

use std::fmt::Write as _;

use super::paths::{CrossKind, PROGRAMS};
use super::results::{CrossNodeResults, CrossPathResult, CrossPhase, CrossPrograms, FastPath};
use crate::report::num;
use crate::stats::median;

/// Targets (issue 27): native routing against the underlay, without host
/// rules: throughput at least this fraction.
pub const GBITS_TARGET: f64 = 1.0;
/// Request/response and connection rate at least this fraction.
pub const RATE_TARGET: f64 = 0.95;
/// CPU per request at most this multiple.
pub const CPU_TARGET: f64 = 1.05;
/// With the host firewall on both nodes: throughput, request/response and
/// connection rate at least this fraction.
pub const FIREWALL_TARGET: f64 = 0.9;
/// VXLAN: throughput at least this fraction of the underlay's less the
/// headers' share ([`header_share`]).
pub const VXLAN_TARGET: f64 = 0.9;

/// TCP/IPv4 headers with timestamps: the per-packet bytes that are not payload.
const TCP_IP_HEADERS: u32 = 52;

/// The fraction of the underlay's TCP payload per packet a path of MTU
/// `mtu` keeps: VXLAN's pods carry 50 bytes less per packet.
pub fn header_share(mtu: u32, underlay_mtu: u32) -> Option<f64> {
    let (path, base) = (
        mtu.checked_sub(TCP_IP_HEADERS)?,
        underlay_mtu.checked_sub(TCP_IP_HEADERS)?,
    );
    (base > 0).then(|| f64::from(path) / f64::from(base))
}

/// One target, evaluated.
#[derive(Debug, Clone, PartialEq)]
pub struct CrossTarget {
    /// What is compared.
    pub what: String,
    /// The target in words.
    pub target: String,
    /// The measured ratio.
    pub ratio: Option<f64>,
    /// Met (`None`: not measured).
    pub met: Option<bool>,
}

fn target(
    what: String,
    wanted: String,
    ratio: Option<f64>,
    at_least: Option<f64>,
    at_most: Option<f64>,
) -> CrossTarget {
    let met = ratio.map(|r| at_least.is_none_or(|t| r >= t) && at_most.is_none_or(|t| r <= t));
    CrossTarget {
        what,
        target: wanted,
        ratio,
        met,
    }
}

impl CrossNodeResults {
    /// The targets, in the order it states them.
    pub fn targets(&self) -> Vec<CrossTarget> {
        let mut out = Vec::new();
        for phase in &self.phases {
            let rules = phase.firewall_rules;
            let when = if rules == 0 {
                String::new()
            } else {
                format!(", {rules} host rules")
            };
            if let Some(p) = phase.path(CrossKind::SarenaEbpfNative) {
                let s = &p.summary;
                let (rate, gbits) = if rules == 0 {
                    (RATE_TARGET, GBITS_TARGET)
                } else {
                    (FIREWALL_TARGET, FIREWALL_TARGET)
                };
                let name = |m: &str| format!("eBPF native{when}: {m}");
                out.push(target(
                    name("TCP throughput"),
                    format!("≥ {gbits:.2}× underlay"),
                    s.gbits_ratio,
                    Some(gbits),
                    None,
                ));
                out.push(target(
                    name("request/response"),
                    format!("≥ {rate:.2}× underlay"),
                    s.rr_ratio,
                    Some(rate),
                    None,
                ));
                out.push(target(
                    name("connection rate"),
                    format!("≥ {rate:.2}× underlay"),
                    s.crr_ratio,
                    Some(rate),
                    None,
                ));
                if rules == 0 {
                    out.push(target(
                        name("CPU per request"),
                        format!("≤ {CPU_TARGET:.2}× underlay"),
                        s.rr_cpu_ratio,
                        None,
                        Some(CPU_TARGET),
                    ));
                }
            }
            if let (Some(p), Some(base)) = (
                phase.path(CrossKind::SarenaEbpfVxlan),
                phase.path(CrossKind::Underlay),
            ) {
                let share = p.mtu.zip(base.mtu).and_then(|(m, b)| header_share(m, b));
                let wanted = share.map(|s| VXLAN_TARGET * s);
                let mut t = target(
                    format!("eBPF VXLAN{when}: TCP throughput"),
                    format!(
                        "≥ {VXLAN_TARGET:.2}× underlay × {} (headers)",
                        num(share, 3)
                    ),
                    p.summary.gbits_ratio,
                    wanted,
                    None,
                );
                if wanted.is_none() {
                    t.met = None;
                }
                out.push(t);
            }
        }
        out
    }

    /// The section (markdown).
    pub fn markdown(&self) -> String {
        let mut md = String::new();
        let _ = writeln!(md, "## Pods across nodes (issue 27)\n");
        let _ = writeln!(
            md,
            "A client pod on one node, a server pod on another. Each path has two node netns of \
             its own joined by a veth pair (the nodes' uplinks, MTU 1500): Sarena's eBPF \
             dataplane with `routing = \"native\"` and with `routing = \"vxlan\"` (Sarena \
             embedded in the harness and joined to a two-node cluster view exactly as \
             Kubernetes mode joins one: the daemon's own peer-routing and overlay code, then \
             the cluster's networks handed to the dataplane, which hooks the uplinks), the same \
             VXLAN nodes with eBPF host routing off (the host stack forwards into and out of \
             the VXLAN device, as before issue 27), Sarena's \
             kernel dataplane and flannel-style host-gw routing (ptp + host-local, a route per \
             peer pod subnet), against the two node netns talking over the underlay directly. \
             {} interleaved rounds per phase: iperf3 {} s (one stream), 1-byte \
             request/response {} s, connection rate {} s (connect, 1-byte request and \
             response, the server closes); client and server {}. CPU is the machine's busy \
             time per round trip or connection. *Host fwd* is what each node's host stack \
             forwarded over the phase (`Ip: ForwDatagrams`, client's node / server's); *direct* \
             what the eBPF programs sent to and delivered from the other node's pods without \
             it (client's node / server's, `sarena status` → host routing).\n",
            self.rounds,
            self.iperf_seconds,
            self.rr_seconds,
            self.rr_seconds,
            self.pinning.map_or("placed by the scheduler".into(), |p| {
                if p.client == p.server {
                    format!("pinned to CPU {}", p.client)
                } else {
                    format!("pinned to CPUs {} and {}", p.client, p.server)
                }
            })
        );
        for phase in &self.phases {
            phase_table(&mut md, phase);
            vxlan_comparison(&mut md, phase);
        }
        let _ = writeln!(
            md,
            "The issue's targets for these paths are in the table of targets at the top.\n"
        );
        let problems = self.problems();
        if problems.is_empty() {
            let _ = writeln!(
                md,
                "Checks passed: on both nodes of each eBPF path the programs sent and delivered \
                 at least one packet per exchange directly and the host stacks forwarded none of \
                 the traffic; on the other paths the host stacks forwarded it (and the \
                 programs of the host-stack VXLAN path routed none of it directly).\n"
            );
        } else {
            let _ = writeln!(md, "Checks that failed:\n");
            for p in problems {
                let _ = writeln!(md, "- {p}");
            }
            let _ = writeln!(md);
        }
        md
    }
}

/// The direct VXLAN path over the host-stack one (issue 27's point 2:
/// keep the faster).
fn vxlan_comparison(md: &mut String, phase: &CrossPhase) {
    let (Some(direct), Some(host)) = (
        phase.path(CrossKind::SarenaEbpfVxlan),
        phase.path(CrossKind::SarenaEbpfVxlanHostStack),
    ) else {
        return;
    };
    let over = |a: Option<f64>, b: Option<f64>| a.zip(b).map(|(a, b)| a / b);
    let (d, h) = (&direct.summary, &host.summary);
    let _ = writeln!(
        md,
        "VXLAN, eBPF host routing over the host stack: TCP throughput {}×, request/response \
         {}×, connection rate {}×, CPU per request {}×.\n",
        num(over(d.gbits, h.gbits), 2),
        num(over(d.rr, h.rr), 2),
        num(over(d.crr, h.crr), 2),
        num(over(d.rr_cpu_us, h.rr_cpu_us), 2),
    );
}

fn direct(p: &CrossPathResult) -> String {
    p.fast_path.as_ref().map_or("–".into(), |f| {
        let pair = |n| {
            format!(
                "{}↑{}↓",
                FastPath::sent_direct(n),
                FastPath::received_direct(n)
            )
        };
        format!("{} / {}", pair(&f.client_node), pair(&f.server_node))
    })
}

fn phase_table(md: &mut String, phase: &CrossPhase) {
    let title = if phase.firewall_rules == 0 {
        "No host firewall".to_owned()
    } else {
        format!(
            "{} filter FORWARD rules on every node",
            phase.firewall_rules
        )
    };
    let _ = writeln!(md, "### {title}\n");
    let _ = writeln!(
        md,
        "| path | pod MTU | TCP Gbit/s | × | req/s | × | conn/s | × | CPU µs/req | × | CPU µs/conn | × | host fwd | direct |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    );
    for p in &phase.paths {
        let s = &p.summary;
        let fwd = p
            .host_forwarded
            .map_or("–".into(), |f| format!("{} / {}", f[0], f[1]));
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {fwd} | {} |",
            p.path.label(),
            p.mtu.map_or("–".into(), |m| m.to_string()),
            num(s.gbits, 2),
            num(s.gbits_ratio, 2),
            num(s.rr, 0),
            num(s.rr_ratio, 2),
            num(s.crr, 0),
            num(s.crr_ratio, 2),
            num(s.rr_cpu_us, 1),
            num(s.rr_cpu_ratio, 2),
            num(s.crr_cpu_us, 1),
            num(s.crr_cpu_ratio, 2),
            direct(p)
        );
    }
    for (k, why) in &phase.failed {
        let _ = writeln!(md, "\n{}: {why}", k.label());
    }
    let _ = writeln!(md);
    programs_table(md, phase);
}

/// Where an eBPF path's extra CPU goes: each program's cost per run and
/// runs per round trip (both nodes), all programs per round trip, and the
/// path's CPU per round trip over the underlay's.
fn programs_table(md: &mut String, phase: &CrossPhase) {
    let ebpf: Vec<&CrossPathResult> = phase
        .paths
        .iter()
        .filter(|p| p.samples.iter().any(|s| s.programs.is_some()))
        .collect();
    if ebpf.is_empty() {
        return;
    }
    let base = phase
        .path(CrossKind::Underlay)
        .and_then(|p| p.summary.rr_cpu_us);
    let mut header = String::from("| path |");
    let mut rule = String::from("|---|");
    for name in PROGRAMS {
        header.push_str(&format!(" `{name}` ns/run (runs/req) |"));
        rule.push_str("---|");
    }
    let _ = writeln!(
        md,
        "{header} programs µs/req | CPU µs/req over the underlay |\n{rule}---|---|"
    );
    for p in ebpf {
        let median_of = |f: &dyn Fn(&CrossPrograms) -> Option<f64>| {
            median(
                &p.samples
                    .iter()
                    .filter_map(|s| f(s.programs.as_ref()?))
                    .collect::<Vec<_>>(),
            )
        };
        let mut row = format!("| {} |", p.path.label());
        for name in PROGRAMS {
            let ns = median_of(&|c| c.ns_per_run(name));
            let runs = median_of(&|c| c.runs_per_transaction(name));
            row.push_str(&format!(" {} ({}) |", num(ns, 0), num(runs, 2)));
        }
        let over = p.summary.rr_cpu_us.zip(base).map(|(c, b)| c - b);
        let _ = writeln!(
            md,
            "{row} {} | {} |",
            num(p.summary.programs_us, 2),
            num(over, 1)
        );
    }
    let _ = writeln!(md);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vxlan_keeps_its_payload_share() {
        let share = header_share(1450, 1500).unwrap();
        assert!((share - 1398.0 / 1448.0).abs() < 1e-12);
        assert_eq!(header_share(40, 1500), None);
    }

    #[test]
    fn targets_are_met_by_ratio() {
        let t = target("x".into(), "y".into(), Some(0.96), Some(0.95), None);
        assert_eq!(t.met, Some(true));
        let t = target("x".into(), "y".into(), Some(1.06), None, Some(1.05));
        assert_eq!(t.met, Some(false));
        let t = target("x".into(), "y".into(), None, Some(0.95), None);
        assert_eq!(t.met, None);
    }
}
