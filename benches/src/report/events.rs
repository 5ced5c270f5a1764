//! The event cost's subsection of the dataplane section (issue 28): the
//! programs' run time per round trip, per connection and per dropped
//! frame under each events setting, against events off, from the same run.

use std::fmt::Write as _;

use crate::dataplane::event_cost::{FLOOD_FRAMES, SettingCost};
use crate::dataplane::{DataplaneResults, ProgramRuns, RunDelta};

/// Nanoseconds of `parts` per one of `per` (`None`: nothing to divide by).
fn ns_per(parts: &[RunDelta], per: u64) -> Option<f64> {
    let ns: u64 = parts.iter().map(|d| d.run_time_ns).sum();
    (per > 0).then(|| ns as f64 / per as f64)
}

/// Both programs' nanoseconds per round trip (or connection) of `r`.
fn both_per(r: &ProgramRuns) -> Option<f64> {
    ns_per(&[r.from_container, r.to_container], r.transactions)
}

/// A setting's three costs: per round trip, per connection, per dropped
/// frame (`from_container` alone drops them).
pub fn costs(s: &SettingCost) -> [Option<f64>; 3] {
    [
        both_per(&s.rr),
        both_per(&s.crr),
        ns_per(&[s.flood.from_container], s.flood.transactions),
    ]
}

fn cell(v: Option<f64>, off: Option<f64>) -> String {
    match (v, off) {
        (Some(v), Some(off)) if off > 0.0 => format!("{v:.0} ({:.2}×)", v / off),
        (Some(v), _) => format!("{v:.0}"),
        _ => "–".into(),
    }
}

impl DataplaneResults {
    /// The event cost's subsection (nothing when it was not measured).
    pub(super) fn event_cost_markdown(&self, md: &mut String) {
        let Some(cost) = &self.event_cost else {
            return;
        };
        let Some(off) = cost.settings.first() else {
            return;
        };
        let _ = writeln!(
            md,
            "### What drop and flow events cost (issue 28)\n\n\
             On the path \"Sarena eBPF, embedded, 0 policies\", after its rounds: the \
             events switched at run time as `sarena monitor config` switches them, \
             and under each setting, in {} interleaved rounds, with BPF run-time \
             statistics on: request/response over one connection ({} s; no drop, one \
             flow), new connections ({} s; a flow event each when flow events are on) \
             and {} UDP frames from the client with a source not its own (each \
             dropped by anti-spoofing: a drop event each when drop events are on). \
             The ring buffer is drained meanwhile, as the daemon drains it. Cells: \
             nanoseconds the pods' programs (`from_container` and `to_container`) \
             ran per round trip, per connection and per dropped frame, and the ratio \
             to events off. The limit holds back what exceeds it per endpoint; \
             \"no limit\" writes every event.\n",
            cost.rounds,
            cost.seconds,
            cost.seconds,
            off.flood.transactions / u64::from(cost.rounds.max(1)).max(1),
        );
        let _ = writeln!(
            md,
            "| setting | ns per round trip | ns per connection | ns per dropped frame | \
             drop events | flow events | held back by the limit | lost to a full ring |"
        );
        let _ = writeln!(md, "|---|---:|---:|---:|---:|---:|---:|---:|");
        let base = costs(off);
        for s in &cost.settings {
            let c = costs(s);
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} | {} | {} | {} |",
                s.label,
                cell(c[0], base[0]),
                cell(c[1], base[1]),
                cell(c[2], base[2]),
                s.drop_events,
                s.flow_events,
                s.lost_rate_limited,
                s.lost_buffer_full,
            );
        }
        let read: u64 = cost.settings.iter().map(|s| s.read).sum();
        let written: u64 = cost
            .settings
            .iter()
            .map(|s| s.drop_events + s.flow_events)
            .sum();
        let _ = writeln!(
            md,
            "\nThe drain read {read} of the {written} events written (full run: \
             {FLOOD_FRAMES} frames per flood).\n"
        );
    }
}
