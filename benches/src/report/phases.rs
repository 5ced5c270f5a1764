//! The phase table of a plugin run (issue 29, step 1) and its target.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::num;
use crate::cni_ops::phases::{OPS, PhaseTable};

/// STATUS p50 at most this many times a static hello world's exec.
pub const STATUS_TO_HELLO_TARGET: f64 = 2.0;

/// The table's target: (what, target, measured, met).
pub(super) fn targets(t: &PhaseTable) -> Vec<(String, String, String, Option<bool>)> {
    let r = t.ratio_to_hello("STATUS");
    vec![(
        "STATUS p50 vs exec of a static hello world, same harness".into(),
        format!("≤ {STATUS_TO_HELLO_TARGET}×"),
        format!(
            "{}× ({} ms vs {} ms)",
            num(r, 2),
            num(t.op("STATUS").map(|o| o.total_p50_ms), 2),
            num(t.hello_p50_ms, 2)
        ),
        r.map(|r| r <= STATUS_TO_HELLO_TARGET),
    )]
}

/// The section: one row per phase, one column per operation.
pub(super) fn section(md: &mut String, t: &PhaseTable) {
    let _ = writeln!(md, "## Where a plugin run spends its time\n");
    let _ = writeln!(
        md,
        "{} runs of each operation of `sarena-cni` on an eBPF node (the latency section's \
         harness), interleaved with the baselines. Each run is timed by the harness from \
         just before the spawn to the reap, and by the plugin itself phase by phase \
         (`SARENA_CNI_PHASES`), on the same monotonic clock: *{}* is the spawn to the \
         plugin's `main`, *{}* the end of `main` to the reap. Each cell is the median \
         duration of that phase, ms; phases nest (a command holds its daemon calls and \
         netlink calls) and may overlap (ADD runs two pairs of steps concurrently), so a \
         column does not add up to its total.\n",
        t.runs,
        crate::cni_ops::phases::EXEC_PHASE,
        crate::cni_ops::phases::EXIT_PHASE,
    );
    let _ = writeln!(
        md,
        "Baselines, same harness: a statically linked hello world {} ms; `sarena-cni` \
         VERSION {} ms.\n",
        num(t.hello_p50_ms, 2),
        num(t.version_p50_ms, 2)
    );
    // Rows in the order phases start, the earliest operation's order first.
    let mut order: BTreeMap<&str, f64> = BTreeMap::new();
    for op in &t.ops {
        for p in &op.phases {
            order.entry(p.name.as_str()).or_insert(p.start_p50_ms);
        }
    }
    let mut names: Vec<(&str, f64)> = order.into_iter().collect();
    names.sort_by(|a, b| a.1.total_cmp(&b.1));
    let ops: Vec<&str> = OPS
        .iter()
        .copied()
        .filter(|op| t.op(op).is_some())
        .collect();
    let _ = writeln!(md, "| phase | {} |", ops.join(" | "));
    let _ = writeln!(md, "|---|{}", "---:|".repeat(ops.len()));
    for (name, _) in names {
        let cells: Vec<String> = ops
            .iter()
            .map(|op| {
                let p = t
                    .op(op)
                    .and_then(|o| o.phases.iter().find(|p| p.name == name));
                num(p.map(|p| p.p50_ms), 3)
            })
            .collect();
        let _ = writeln!(md, "| {name} | {} |", cells.join(" | "));
    }
    let totals: Vec<String> = ops
        .iter()
        .map(|op| format!("**{}**", num(t.op(op).map(|o| o.total_p50_ms), 3)))
        .collect();
    let _ = writeln!(
        md,
        "| **total, spawn to reap** | {} |\n",
        totals.join(" | ")
    );
}
