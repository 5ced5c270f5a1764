//! The bandwidth part of the dataplane section (issue 18 item 4): what an
//! unlimited pod pays for the pacing machinery being in use on its node.

use std::fmt::Write as _;

use super::num;
use super::services::Metric;
use crate::dataplane::{DataplaneResults, PathKind};
use crate::stats::ratio_of;

/// The target: an unlimited pod beside a limited one at least this fraction
/// of an unlimited pod on a node without limits (within the noise).
pub const BANDWIDTH_TARGET: f64 = 0.95;

/// The compared rows: (what, higher is better, metric, decimals).
/// `to_container` is left out: pod → pod frames are redirected past it, so
/// it barely runs on either path.
const ROWS: [(&str, bool, Metric, usize); 5] = [
    ("TCP Gbit/s", true, |s| s.gbits_median, 2),
    ("request/response per s", true, |s| s.rr_median, 0),
    (
        "CPU-s per Gbit (processes)",
        false,
        |s| s.process_cpu_seconds_per_gbit_median,
        3,
    ),
    (
        "CPU µs per request (threads)",
        false,
        |s| s.process_cpu_us_per_rr_median,
        1,
    ),
    (
        "`from_container` ns per run",
        false,
        |s| s.from_container_ns_per_run_median,
        0,
    ),
];

/// Whether ratio `r` (beside a limited pod ÷ without) meets the target.
pub fn met(r: f64, higher_is_better: bool) -> bool {
    if higher_is_better {
        r >= BANDWIDTH_TARGET
    } else {
        r <= 1.0 / BANDWIDTH_TARGET
    }
}

impl DataplaneResults {
    /// `metric` of the unlimited pods beside a limited one ÷ the same on a
    /// node without limits.
    pub fn beside_limited_ratio(&self, metric: Metric) -> Option<f64> {
        let of = |k: PathKind| self.path(k).and_then(|p| metric(&p.summary));
        ratio_of(
            of(PathKind::SarenaEbpfBesideLimited),
            of(PathKind::SarenaEbpf),
        )
    }

    /// The bandwidth subsection (nothing unless both paths were measured).
    pub(super) fn bandwidth_markdown(&self, md: &mut String) {
        let (Some(before), Some(after)) = (
            self.path(PathKind::SarenaEbpf),
            self.path(PathKind::SarenaEbpfBesideLimited),
        ) else {
            return;
        };
        let _ = writeln!(
            md,
            "### Bandwidth limits: the cost on an unlimited pod\n\n\
             The same two unlimited pods on Sarena's eBPF dataplane, on a node without \
             limits (\"{}\") and on a node where a third pod is limited to 10 Mbit/s each way \
             and its CHECK passed (\"{}\": the pacing map holds an entry, that pod's host \
             veth runs `to_container_bw` over `fq`, its `eth0` `pod_egress` over `fq`), \
             measured in the same interleaved rounds. Unlimited pods have no pacing entry \
             and run the plain programs; `from_container` tests one flag bit it has \
             already loaded. Target: ≥ {BANDWIDTH_TARGET}× (lower-is-better rows: ≤ 1/{BANDWIDTH_TARGET}).\n",
            before.path.label(),
            after.path.label()
        );
        let _ = writeln!(
            md,
            "| measure | no limits on the node | beside a limited pod | ratio |"
        );
        let _ = writeln!(md, "|---|---:|---:|---:|");
        for (what, higher_better, metric, decimals) in ROWS {
            let r = self.beside_limited_ratio(metric);
            let mark = match r.map(|r| met(r, higher_better)) {
                Some(true) => " ✓",
                Some(false) => " ✗",
                None => "",
            };
            let _ = writeln!(
                md,
                "| {what} | {} | {} | {}{mark} |",
                num(metric(&before.summary), decimals),
                num(metric(&after.summary), decimals),
                num(r, 3)
            );
        }
        md.push('\n');
    }
}
