//! Item 3: scale. ADD latency and the daemon's resident memory with 0, 100 and
//! 1,000 existing endpoints on the node, and the plugin's peak RSS. Each
//! contender has the machine to itself: its node grows level by level and is
//! torn down before the next contender's starts. At each level the measured
//! ADDs are timed (Sarena's phase by phase), then deleted again (untimed) so
//! the level stays exact.

use serde::{Deserialize, Serialize};

use super::phases::{OpPhases, Samples};
use super::{Check, CniOptions, make_pods, on_workers, progress, push_check, usage_is};
use crate::BenchError;
use crate::node::{Bins, Contender, NodeNetns, Pod};
use crate::stats::{Summary, median_u64, ms, ratio};

/// One contender at one level.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScaleResult {
    /// Who.
    pub contender: Contender,
    /// Endpoints already on the node.
    pub existing: usize,
    /// ADD latency of the measured pods, ms.
    pub add: Option<Summary>,
    /// Failed measured ADDs.
    pub errors: usize,
    /// The daemon's VmRSS at this level, KiB (Sarena only).
    pub daemon_rss_kib: Option<u64>,
    /// The plugin's peak RSS over RSS_PODS extra ADDs through GNU time: largest, KiB.
    pub plugin_peak_rss_kib: Option<u64>,
    /// The plugin's peak RSS: median, KiB.
    pub plugin_median_rss_kib: Option<u64>,
    /// p50 at this level / p50 at the lowest level.
    pub p50_ratio_to_first_level: Option<f64>,
    /// The measured ADDs' phases (Sarena only): what grows with the level.
    #[serde(default)]
    pub add_phases: Option<OpPhases>,
}

/// Runs the scale part: each contender alone on the machine (its node
/// started, filled level by level, measured and torn down before the next
/// one starts), so one contender's thousand pods never weigh on another's
/// ADDs. The results are ordered by level, then contender.
pub(super) fn run(
    opts: &CniOptions,
    bins: &Bins,
    checks: &mut Vec<Check>,
) -> Result<Vec<ScaleResult>, BenchError> {
    let mut levels = opts.scale_levels.clone();
    levels.sort_unstable();
    levels.dedup();
    let mut out: Vec<ScaleResult> = Vec::new();
    for (i, &c) in opts.scale_contenders.iter().enumerate() {
        progress(&format!(
            "scale, {}: alone on the machine, levels {levels:?}",
            c.label()
        ));
        let mut node = NodeNetns::start(c, 40 + i as u8, bins)?;
        let mut filler: Vec<Pod> = Vec::new();
        let measured: Result<Vec<ScaleResult>, BenchError> = levels
            .iter()
            .map(|&level| one_level(opts, &mut node, &mut filler, level, checks))
            .collect();
        progress(&format!("scale, {}: tearing the node down", c.label()));
        drop(filler);
        drop(node);
        out.extend(measured?);
    }
    for r in 0..out.len() {
        let first = out
            .iter()
            .find(|f| f.contender == out[r].contender)
            .and_then(|f| f.add)
            .map(|s| s.p50);
        if let (Some(first), Some(s)) = (first, out[r].add) {
            out[r].p50_ratio_to_first_level = ratio(s.p50, first);
        }
    }
    let order = |c: Contender| opts.scale_contenders.iter().position(|&o| o == c);
    out.sort_by_key(|r| (r.existing, order(r.contender)));
    Ok(out)
}

/// Fills `node` to `level` endpoints, then times `scale_samples` ADDs (their
/// phases too, for Sarena), measures the plugin's peak RSS and the daemon's
/// memory, and deletes the measured pods again so the level stays exact.
fn one_level(
    opts: &CniOptions,
    node: &mut NodeNetns,
    filler: &mut Vec<Pod>,
    level: usize,
    checks: &mut Vec<Check>,
) -> Result<ScaleResult, BenchError> {
    let contender = node.contender();
    fill(node, filler, level)?;
    let usage = node.ipam_usage()?;
    push_check(
        checks,
        usage_is(usage, level),
        format!(
            "scale, {}: {level} existing endpoints ({usage:?})",
            contender.label()
        ),
    );
    progress(&format!(
        "scale, {}: {level} existing endpoints, {} measured ADDs",
        contender.label(),
        opts.scale_samples
    ));
    let samples = make_pods(
        &format!("scale{level}-{}", contender.slug()),
        opts.scale_samples,
        4,
    )?;
    let file = node.work_dir().join(format!("scale{level}-phases.jsonl"));
    let mut phases = Samples::default();
    if contender.is_sarena() {
        node.record_phases(Some(file.clone()));
    }
    let mut runs = Vec::new();
    for pod in &samples {
        let run = node.add(pod)?;
        if run.ok() && contender.is_sarena() {
            phases.add(&run, &file)?;
        }
        runs.push(run);
    }
    node.record_phases(None);
    // Peak RSS at this level: RSS_PODS more ADDs through GNU time (untimed).
    let mut rss: Vec<u64> = Vec::new();
    for pod in make_pods(&format!("rss{level}-{}", contender.slug()), RSS_PODS, 2)? {
        let run = node.run_measuring_rss("ADD", &pod)?;
        rss.extend(run.max_rss_kib);
        node.del(&pod)?;
    }
    for pod in &samples {
        node.del(pod)?;
    }
    let ok: Vec<f64> = runs
        .iter()
        .filter(|r| r.ok())
        .map(|r| ms(r.elapsed))
        .collect();
    Ok(ScaleResult {
        contender,
        existing: level,
        add: Summary::of(&ok),
        errors: runs.len() - ok.len(),
        daemon_rss_kib: node.daemon_rss_kib()?,
        plugin_peak_rss_kib: rss.iter().copied().max(),
        plugin_median_rss_kib: median_u64(&rss),
        p50_ratio_to_first_level: None,
        add_phases: phases.into_op("ADD"),
    })
}

/// Extra ADDs per level and contender whose peak RSS is measured (untimed).
const RSS_PODS: usize = 3;

/// Grows `filler` (pods ADDed on `node`) to `target` pods, on 3 worker threads.
fn fill(node: &NodeNetns, filler: &mut Vec<Pod>, target: usize) -> Result<(), BenchError> {
    let need = target.saturating_sub(filler.len());
    if need == 0 {
        return Ok(());
    }
    let pods = make_pods(&format!("fill-{}", node.contender().slug()), need, 4)?;
    let added = on_workers(need, 3, |i| node.add_ok(&pods[i]));
    // The pods stay with the node even after a failure: they are removed with it.
    filler.extend(pods);
    added.map(drop)
}
