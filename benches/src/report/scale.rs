//! The scale section: ADD latency and memory with existing endpoints, and
//! what grows with them (Sarena's ADD phases at the lowest and highest level).

use std::fmt::Write as _;

use super::num;
use super::sections::kib;
use crate::cni_ops::CniResults;
use crate::cni_ops::phases::OpPhases;

pub(super) fn scale(md: &mut String, cni: &CniResults) {
    if cni.scale.is_empty() {
        return;
    }
    let _ = writeln!(md, "## Scale: ADD with existing endpoints\n");
    let _ = writeln!(
        md,
        "Each contender has the machine to itself: its node is filled with real pods (ADDed \
         by the plugin, untimed) up to each level, then {} measured ADDs are timed and deleted \
         again, and the node is torn down before the next contender's starts. Daemon memory is `VmRSS` of `sarena-daemon` at that level; plugin \
         memory is the plugin's peak RSS over 3 more ADDs at that level run through GNU \
         time (untimed; see above).\n",
        cni.options.scale_samples
    );
    let _ = writeln!(
        md,
        "| existing endpoints | contender | ADD p50 ms | p90 ms | p99 ms | p50 ÷ p50 at lowest level | errors | daemon RSS | plugin peak RSS (median / max) |"
    );
    let _ = writeln!(md, "|---:|---|---:|---:|---:|---:|---:|---:|---:|");
    for r in &cni.scale {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} / {} |",
            r.existing,
            r.contender.label(),
            num(r.add.map(|s| s.p50), 2),
            num(r.add.map(|s| s.p90), 2),
            num(r.add.map(|s| s.p99), 2),
            num(r.p50_ratio_to_first_level, 2),
            r.errors,
            kib(r.daemon_rss_kib),
            kib(r.plugin_median_rss_kib),
            kib(r.plugin_peak_rss_kib),
        );
    }
    let _ = writeln!(md);
    what_grows(md, cni);
}

/// Per Sarena contender, the ADD phases at the lowest and the highest
/// level, the ones that grew most first.
fn what_grows(md: &mut String, cni: &CniResults) {
    let (Some(low), Some(top)) = (
        cni.scale.iter().map(|s| s.existing).min(),
        cni.scale.iter().map(|s| s.existing).max(),
    ) else {
        return;
    };
    if low == top {
        return;
    }
    for c in cni
        .options
        .scale_contenders
        .iter()
        .filter(|c| c.is_sarena())
    {
        let phases = |level: usize| {
            cni.scale
                .iter()
                .find(|r| r.contender == *c && r.existing == level)
                .and_then(|r| r.add_phases.as_ref())
        };
        let (Some(at_low), Some(at_top)) = (phases(low), phases(top)) else {
            continue;
        };
        let intro = format!(
            "What grows, {}: the ADD's phases (`SARENA_CNI_PHASES`, medians) at {low} and at \
             {top} existing endpoints, those that grew most first.",
            c.label()
        );
        let (low, top) = (format!("at {low}"), format!("at {top}"));
        growth_table(md, &intro, (&low, at_low), (&top, at_top));
    }
}

/// Per Sarena contender, the ADD phases alone (the scale stage's lowest
/// level: one ADD at a time on a fresh node) against the churn stage's
/// highest concurrency, those that grew most first: what a concurrent ADD
/// waits for.
pub(super) fn what_concurrency_adds(md: &mut String, cni: &CniResults) {
    let (Some(low), Some(top)) = (
        cni.scale.iter().map(|s| s.existing).min(),
        cni.churn.iter().map(|c| c.concurrency).max(),
    ) else {
        return;
    };
    for r in cni
        .churn
        .iter()
        .filter(|r| r.concurrency == top && r.contender.is_sarena())
    {
        let alone = cni
            .scale
            .iter()
            .find(|s| s.contender == r.contender && s.existing == low)
            .and_then(|s| s.add_phases.as_ref());
        let (Some(alone), Some(loaded)) = (alone, r.add_phases.as_ref()) else {
            continue;
        };
        let intro = format!(
            "What {top} concurrent ADDs wait for, {}: the ADD's phases (`SARENA_CNI_PHASES`, \
             medians) one at a time ({low} existing endpoints, the scale stage) and {top} at \
             once (the churn stage, every round), those that grew most first.",
            r.contender.label()
        );
        let loaded_label = format!("{top} at once");
        growth_table(md, &intro, ("alone", alone), (&loaded_label, loaded));
    }
}

/// The phases of `b` against those of `a` (medians, ms): the whole run,
/// then the [`WHAT_GROWS_ROWS`] phases that grew most.
fn growth_table(md: &mut String, intro: &str, a: (&str, &OpPhases), b: (&str, &OpPhases)) {
    let ((a_label, a), (b_label, b)) = (a, b);
    let _ = writeln!(md, "{intro}\n");
    let _ = writeln!(
        md,
        "| phase | p50 ms {a_label} | p50 ms {b_label} | growth ms |\n|---|---:|---:|---:|"
    );
    let _ = writeln!(
        md,
        "| whole ADD (spawn to reap) | {:.3} | {:.3} | {:+.3} |",
        a.total_p50_ms,
        b.total_p50_ms,
        b.total_p50_ms - a.total_p50_ms
    );
    let mut rows: Vec<(&str, f64, f64)> = b
        .phases
        .iter()
        .filter_map(|p| {
            let before = a.phases.iter().find(|q| q.name == p.name)?;
            Some((p.name.as_str(), before.p50_ms, p.p50_ms))
        })
        .collect();
    rows.sort_by(|x, y| (y.2 - y.1).total_cmp(&(x.2 - x.1)));
    for (name, before, after) in rows.into_iter().take(WHAT_GROWS_ROWS) {
        let _ = writeln!(
            md,
            "| {name} | {before:.3} | {after:.3} | {:+.3} |",
            after - before
        );
    }
    let _ = writeln!(md);
}

/// Phases shown per contender in "what grows".
const WHAT_GROWS_ROWS: usize = 10;
