//! Item 3: scale. ADD latency and the daemon's resident memory with 0, 100 and
//! 1,000 existing endpoints on the node, and the plugin's peak RSS. The nodes of all
//! scale contenders grow together; at each level the measured ADDs are interleaved
//! across them, then deleted again (untimed) so the level stays exact.

use serde::{Deserialize, Serialize};

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
}

// Indexes rotate across contenders (`(i + j) % k`): plain loops read best.
#[allow(clippy::needless_range_loop)]
pub(super) fn run(
    opts: &CniOptions,
    bins: &Bins,
    checks: &mut Vec<Check>,
) -> Result<Vec<ScaleResult>, BenchError> {
    let mut nodes = Vec::new();
    for (i, &c) in opts.scale_contenders.iter().enumerate() {
        nodes.push(NodeNetns::start(c, 40 + i as u8, bins)?);
    }
    let mut fillers: Vec<Vec<Pod>> = nodes.iter().map(|_| Vec::new()).collect();
    let mut levels = opts.scale_levels.clone();
    levels.sort_unstable();
    let mut out: Vec<ScaleResult> = Vec::new();
    for &level in &levels {
        for (node, filler) in nodes.iter().zip(fillers.iter_mut()) {
            fill(node, filler, level)?;
            let usage = node.ipam_usage()?;
            push_check(
                checks,
                usage_is(usage, level),
                format!(
                    "scale, {}: {level} existing endpoints ({usage:?})",
                    node.contender().label()
                ),
            );
        }
        progress(&format!(
            "scale: {level} existing endpoints, {} measured ADDs each",
            opts.scale_samples
        ));
        let k = nodes.len();
        let samples: Vec<Vec<Pod>> = nodes
            .iter()
            .map(|n| {
                make_pods(
                    &format!("scale{level}-{}", n.contender().slug()),
                    opts.scale_samples,
                    4,
                )
            })
            .collect::<Result<_, _>>()?;
        let mut runs: Vec<Vec<crate::node::PluginRun>> = nodes.iter().map(|_| Vec::new()).collect();
        for s in 0..opts.scale_samples {
            for j in 0..k {
                let c = (s + j) % k;
                runs[c].push(nodes[c].add(&samples[c][s])?);
            }
        }
        for (c, node) in nodes.iter().enumerate() {
            // Peak RSS at this level: RSS_PODS more ADDs through GNU time (untimed).
            let mut rss: Vec<u64> = Vec::new();
            let tag = format!("rss{level}-{}", node.contender().slug());
            for pod in make_pods(&tag, RSS_PODS, 2)? {
                let run = node.run_measuring_rss("ADD", &pod)?;
                rss.extend(run.max_rss_kib);
                node.del(&pod)?;
            }
            for pod in &samples[c] {
                node.del(pod)?;
            }
            let ok: Vec<f64> = runs[c]
                .iter()
                .filter(|r| r.ok())
                .map(|r| ms(r.elapsed))
                .collect();
            out.push(ScaleResult {
                contender: node.contender(),
                existing: level,
                add: Summary::of(&ok),
                errors: runs[c].len() - ok.len(),
                daemon_rss_kib: node.daemon_rss_kib()?,
                plugin_peak_rss_kib: rss.iter().copied().max(),
                plugin_median_rss_kib: median_u64(&rss),
                p50_ratio_to_first_level: None,
            });
        }
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
    progress("scale: tearing the nodes down");
    drop(fillers);
    drop(nodes);
    Ok(out)
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
