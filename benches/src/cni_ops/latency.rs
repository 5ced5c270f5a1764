//! Item 1: ADD / CHECK / STATUS / DEL latency, every contender on its own node,
//! interleaved op by op (pod i of every contender, in an order rotated per pod, so
//! machine noise hits all alike).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{
    Check, CniOptions, duplicates, make_pods, pod_has_address, progress, push_check, usage_is,
};
use crate::BenchError;
use crate::node::{Bins, Contender, NodeNetns, PluginRun, Pod};
use crate::stats::{Summary, median_u64, ms, ratio};

/// The operations measured, in order.
pub const OPS: [&str; 4] = ["ADD", "CHECK", "STATUS", "DEL"];

/// One contender's latency of one operation.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OpLatency {
    /// Who.
    pub contender: Contender,
    /// "ADD", "CHECK", "STATUS" or "DEL".
    pub op: String,
    /// Latency of the successful runs, ms (spawn to reaped).
    pub summary: Option<Summary>,
    /// Failed runs (non-zero exit).
    pub errors: usize,
    /// The first failure's CNI error.
    pub first_error: Option<String>,
    /// p50 / ptp's p50 of the same op.
    pub p50_ratio_to_ptp: Option<f64>,
    /// p99 / ptp's p99 of the same op.
    pub p99_ratio_to_ptp: Option<f64>,
    /// The plugin process's peak RSS, largest over the RSS runs (through GNU time,
    /// separate from the timed runs), KiB.
    pub plugin_peak_rss_kib: Option<u64>,
    /// The plugin process's peak RSS, median over the RSS runs, KiB.
    pub plugin_median_rss_kib: Option<u64>,
    /// Every successful sample, ms, in run order (for plots).
    pub samples_ms: Vec<f64>,
}

/// Item 1's results.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LatencyResults {
    /// Pods per contender.
    pub pods: usize,
    /// One row per contender and op (ops a contender does not implement are absent).
    pub rows: Vec<OpLatency>,
    /// Pods per contender of the RSS pass.
    pub rss_pods: usize,
    /// GNU time's own figure for /bin/true: the floor under every RSS figure, KiB.
    pub rss_floor_kib: Option<u64>,
}

impl LatencyResults {
    /// The row of `contender` and `op`.
    pub fn row(&self, contender: Contender, op: &str) -> Option<&OpLatency> {
        self.rows
            .iter()
            .find(|r| r.contender == contender && r.op == op)
    }
}

#[derive(Default)]
struct Acc {
    samples: Vec<f64>,
    rss: Vec<u64>,
    errors: usize,
    first_error: Option<String>,
}

impl Acc {
    fn record(&mut self, run: &PluginRun) {
        if run.ok() {
            self.samples.push(ms(run.elapsed));
        } else {
            self.errors += 1;
            self.first_error.get_or_insert_with(|| run.error_text());
        }
    }
}

// Indexes rotate across contenders (`(i + j) % k`): plain loops read best.
#[allow(clippy::needless_range_loop)]
pub(super) fn run(
    opts: &CniOptions,
    bins: &Bins,
    checks: &mut Vec<Check>,
) -> Result<LatencyResults, BenchError> {
    let n = opts.pods;
    let mut nodes = Vec::new();
    for (i, &c) in opts.contenders.iter().enumerate() {
        nodes.push(NodeNetns::start(c, i as u8, bins)?);
    }
    let mut pods: Vec<Vec<Pod>> = Vec::new();
    for node in &nodes {
        pods.push(make_pods(
            &format!("lat-{}", node.contender().slug()),
            n,
            4,
        )?);
    }
    let mut acc: BTreeMap<(Contender, &str), Acc> = BTreeMap::new();
    let k = nodes.len();
    // ADD, CHECK, DEL of pod i on every node in a rotated order; STATUS likewise.
    for op in OPS {
        progress(&format!("latency: {op} x {n}"));
        for i in 0..n {
            for j in 0..k {
                let c = (i + j) % k;
                let node = &nodes[c];
                let pod = &pods[c][i];
                let run = match op {
                    "ADD" => node.add(pod)?,
                    "CHECK" if pod_added(pod) => node.check(pod)?,
                    "STATUS" if node.contender().supports_status() => node.status()?,
                    "DEL" => node.del(pod)?,
                    _ => continue,
                };
                acc.entry((node.contender(), op)).or_default().record(&run);
            }
        }
        if op == "ADD" {
            verify_added(&nodes, &pods, checks)?;
        }
    }
    for node in &nodes {
        let usage = node.ipam_usage()?;
        push_check(
            checks,
            usage_is(usage, 0),
            format!(
                "latency, {}: after {n} DELs the IPAM holds nothing ({usage:?})",
                node.contender().label()
            ),
        );
    }
    drop(pods);
    let rss_pods = RSS_PODS.min(n);
    progress(&format!(
        "latency: plugin peak RSS, {rss_pods} pods each (through GNU time, untimed)"
    ));
    for node in &nodes {
        for pod in make_pods(&format!("rss-{}", node.contender().slug()), rss_pods, 2)? {
            for op in OPS {
                if op == "STATUS" && !node.contender().supports_status() {
                    continue;
                }
                let run = node.run_measuring_rss(op, &pod)?;
                if let Some(kib) = run.max_rss_kib {
                    acc.entry((node.contender(), op)).or_default().rss.push(kib);
                }
            }
        }
        let usage = node.ipam_usage()?;
        push_check(
            checks,
            usage_is(usage, 0),
            format!(
                "latency, {}: after the RSS pass the IPAM holds nothing ({usage:?})",
                node.contender().label()
            ),
        );
    }
    let floor = node_scratch_floor(&nodes);
    drop(nodes);
    Ok(LatencyResults {
        pods: n,
        rows: rows(acc),
        rss_pods,
        rss_floor_kib: floor,
    })
}

/// Pods per contender of the RSS pass.
const RSS_PODS: usize = 5;

fn node_scratch_floor(nodes: &[NodeNetns]) -> Option<u64> {
    crate::node::exec::rss_floor_kib(nodes.first()?.work_dir())
}

fn pod_added(pod: &Pod) -> bool {
    pod.has_prev_result()
}

/// Each pod that got an ADD result carries its address; no address twice; the
/// IPAM holds exactly the successful ADDs.
fn verify_added(
    nodes: &[NodeNetns],
    pods: &[Vec<Pod>],
    checks: &mut Vec<Check>,
) -> Result<(), BenchError> {
    for (node, pods) in nodes.iter().zip(pods) {
        let label = node.contender().label();
        let mut ips = Vec::new();
        let mut missing = Vec::new();
        for pod in pods {
            let Some(ip) = pod.prev_ip() else {
                missing.push(pod.container_id().to_string());
                continue;
            };
            if !pod_has_address(pod, ip)? {
                missing.push(format!("{} ({ip} not on eth0)", pod.container_id()));
            }
            ips.push(ip);
        }
        push_check(
            checks,
            missing.is_empty(),
            format!(
                "latency, {label}: each of {} pods has its address on eth0{}",
                pods.len(),
                if missing.is_empty() {
                    String::new()
                } else {
                    format!("; not: {missing:?}")
                }
            ),
        );
        let dups = duplicates(&ips);
        push_check(
            checks,
            dups.is_empty(),
            format!("latency, {label}: no address handed out twice (duplicates: {dups:?})"),
        );
        let usage = node.ipam_usage()?;
        push_check(
            checks,
            usage_is(usage, ips.len()),
            format!(
                "latency, {label}: the IPAM holds the {} addresses ({usage:?})",
                ips.len()
            ),
        );
    }
    Ok(())
}

fn rows(acc: BTreeMap<(Contender, &str), Acc>) -> Vec<OpLatency> {
    let mut rows: Vec<OpLatency> = acc
        .into_iter()
        .map(|((contender, op), a)| OpLatency {
            contender,
            op: op.to_string(),
            summary: Summary::of(&a.samples),
            errors: a.errors,
            first_error: a.first_error,
            p50_ratio_to_ptp: None,
            p99_ratio_to_ptp: None,
            plugin_peak_rss_kib: a.rss.iter().copied().max(),
            plugin_median_rss_kib: median_u64(&a.rss),
            samples_ms: a.samples,
        })
        .collect();
    let ptp: BTreeMap<String, Summary> = rows
        .iter()
        .filter(|r| r.contender == Contender::PtpHostLocal)
        .filter_map(|r| Some((r.op.clone(), r.summary?)))
        .collect();
    for r in &mut rows {
        if let (Some(s), Some(p)) = (r.summary, ptp.get(&r.op)) {
            r.p50_ratio_to_ptp = ratio(s.p50, p.p50);
            r.p99_ratio_to_ptp = ratio(s.p99, p.p99);
        }
    }
    rows.sort_by_key(|r| (OPS.iter().position(|o| *o == r.op), r.contender));
    rows
}
