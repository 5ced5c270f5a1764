//! The embedded paths' part of the dataplane section: Sarena embedded in
//! the harness, without and with NetworkPolicies (issue 26, point 7), with
//! their ratios to the raw veth pair, what the engine compiled, and the
//! checks.

use std::fmt::Write as _;

use super::num;
use crate::dataplane::netpol::{self, POLICIES};
use crate::dataplane::{DataplaneResults, PathKind, PathSummary};

/// Target (issue 26): throughput at least this fraction of the raw veth pair's.
pub const GBITS_TARGET: f64 = 0.95;
/// Target (issue 26): request/response rate at least this fraction.
pub const RR_TARGET: f64 = 0.9;
/// Target (issue 26): CPU per request (threads) at most this multiple.
pub const CPU_TARGET: f64 = 1.15;

/// The embedded paths, in table order.
const PATHS: [PathKind; 2] = [
    PathKind::SarenaEbpfEmbedded,
    PathKind::SarenaEbpfEmbeddedPolicies,
];

/// One target of an embedded path.
#[derive(Debug, Clone, PartialEq)]
pub struct EmbeddedTarget {
    /// What is compared, with the path's label.
    pub what: String,
    /// The target, in words.
    pub target: String,
    /// The ratio to the raw veth pair.
    pub ratio: Option<f64>,
    /// Whether it was met (`None`: not measured).
    pub met: Option<bool>,
}

type Pick = fn(&PathSummary) -> Option<f64>;

/// The three targets of each measured embedded path.
pub fn targets(dp: &DataplaneResults) -> Vec<EmbeddedTarget> {
    let mut out = Vec::new();
    for p in dp.paths.iter().filter(|p| p.path.is_embedded()) {
        let rows: [(&str, Pick, f64, bool); 3] = [
            (
                "TCP throughput",
                |s| s.gbits_ratio_to_raw,
                GBITS_TARGET,
                true,
            ),
            (
                "request/response rate",
                |s| s.rr_ratio_to_raw,
                RR_TARGET,
                true,
            ),
            (
                "CPU per request (threads)",
                |s| s.process_cpu_per_rr_ratio_to_raw,
                CPU_TARGET,
                false,
            ),
        ];
        for (what, pick, limit, at_least) in rows {
            let ratio = pick(&p.summary);
            out.push(EmbeddedTarget {
                what: format!("{what}, {}", p.path.label()),
                target: format!(
                    "{} {limit}× raw veth pair",
                    if at_least { "≥" } else { "≤" }
                ),
                ratio,
                met: ratio.map(|r| if at_least { r >= limit } else { r <= limit }),
            });
        }
    }
    out
}

fn marked(t: Option<&EmbeddedTarget>) -> String {
    match t {
        Some(EmbeddedTarget {
            ratio: Some(r),
            met: Some(met),
            ..
        }) => format!("{r:.2} {}", if *met { "✓" } else { "✗" }),
        _ => "–".into(),
    }
}

impl DataplaneResults {
    /// The embedded paths' subsection (nothing when none was measured).
    pub(super) fn embedded_markdown(&self, md: &mut String) {
        if !self.paths.iter().any(|p| p.path.is_embedded()) {
            return;
        }
        let _ = writeln!(
            md,
            "### Sarena embedded, with and without NetworkPolicies (issue 26)\n\n\
             Two more pods per path, made by Sarena embedded in the harness as a Rust \
             runtime embeds it (`Registry`, `AyaDataplane`, `WithDataplane` and the \
             plugin's own ADD/DEL sequence in process, host veths in a throwaway node \
             netns; no `sarena-cni`, no `sarena-daemon`), measured in the same interleaved \
             rounds as the paths above. \"{POLICIES} policies\": {POLICIES} NetworkPolicies \
             in the pods' namespace, each selecting both pods (`podSelector` \
             `app={}`), isolating ingress and egress, and allowing the other pod by \
             `podSelector` on its own TCP port ({}–{}) and on the measurement ports \
             ({} for iperf3, {} for request/response); compiled by the real engine \
             (`PolicyEngine`, fed pods, namespace, policies and every list complete, as \
             the daemon does) and written by `AyaDataplane::apply_policy`. Targets \
             (reported, not asserted): throughput ≥ {GBITS_TARGET}×, request/response \
             ≥ {RR_TARGET}× and CPU per request ≤ {CPU_TARGET}× the raw veth pair.\n",
            netpol::APP,
            netpol::own_port(0),
            netpol::own_port(POLICIES - 1),
            netpol::MEASUREMENT_PORTS[0],
            netpol::MEASUREMENT_PORTS[1],
        );
        let _ = writeln!(
            md,
            "| path | TCP Gbit/s | × raw veth | request/response per s | × raw veth | \
             CPU µs per request (threads) | × raw veth | policies | identities | ipcache \
             entries | policy-map entries | map writes |"
        );
        let _ = writeln!(
            md,
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
        );
        let targets = targets(self);
        for kind in PATHS {
            let Some(p) = self.paths.iter().find(|p| p.path == kind) else {
                continue;
            };
            let t = |what: &str| {
                let what = format!("{what}, {}", kind.label());
                targets.iter().find(|t| t.what == what)
            };
            let stats = self
                .embedded
                .iter()
                .find(|c| c.path == kind)
                .and_then(|c| c.stats);
            let count = |f: fn(&netpol::PolicyStats) -> usize| {
                stats.map_or("0".into(), |s| f(&s).to_string())
            };
            let s = &p.summary;
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                kind.label(),
                num(s.gbits_median, 2),
                marked(t("TCP throughput")),
                num(s.rr_median, 0),
                marked(t("request/response rate")),
                num(s.process_cpu_us_per_rr_median, 1),
                marked(t("CPU per request (threads)")),
                count(|s| s.policies),
                count(|s| s.identities),
                count(|s| s.ipcache_entries),
                count(|s| s.policy_entries),
                count(|s| s.writes),
            );
        }
        let _ = writeln!(
            md,
            "\nPolicy-map entries: the allow entries of the two pods (direction, peer \
             identity, protocol, port); map writes: every ipcache entry, allow entry and \
             isolation bit `apply_policy` wrote.\n"
        );
        for c in &self.embedded {
            if let Some(e) = &c.ebpf {
                let _ = writeln!(
                    md,
                    "eBPF path check, {}: {}.\n",
                    c.path.label(),
                    e.describe()
                );
            }
            if let Some(p) = &c.policy {
                let _ = writeln!(md, "Policy check, {}: {}.\n", c.path.label(), p.describe());
            }
            for e in &c.errors {
                let _ = writeln!(md, "**Check not made**, {}: {e}\n", c.path.label());
            }
        }
    }
}
