//! Issue 26, point 7 (the whole daemon's part): the results of
//! `e2e/k8s/bench-policy-cluster.sh`, Sarena installed by its DaemonSet on
//! a real two-node cluster of e2e/k8s with thousands of pods and policies
//! in the API server: policy created → enforced on every node, and the
//! daemons' memory. The script writes [`FILE`] into the results dir; the
//! page takes it from there when it is present.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{CHANGE_P50_TARGET_MS, CHANGE_P99_TARGET_MS, RSS_TARGET_MIB};

/// The file the script writes (in the results dir, `--out`).
pub const FILE: &str = "policy-cluster.json";

/// What the cluster run measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RealCluster {
    /// `uname -r` of the machine.
    pub kernel: String,
    /// Its CPUs.
    pub cpus: u32,
    /// When (ISO 8601).
    pub date: String,
    /// The command that ran.
    pub command: String,
    /// Policy created → seen in force on every node.
    pub enforce: Enforce,
    /// The daemons' memory.
    pub rss: Rss,
    /// Seconds to create the background objects, by pod count.
    pub populate_seconds: BTreeMap<String, f64>,
}

/// Policy created → enforced, over `samples` policies created one at a time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Enforce {
    /// Pods in the cluster.
    pub pods: usize,
    /// Policies in the cluster besides the measured one.
    pub policies: usize,
    /// Nodes running Sarena.
    pub nodes: usize,
    /// Policies measured.
    pub samples: usize,
    /// Median over samples of the slowest node, ms.
    pub p50_ms: f64,
    /// 90th percentile, ms.
    pub p90_ms: f64,
    /// 99th percentile, ms.
    pub p99_ms: f64,
    /// The slowest sample, ms.
    pub max_ms: f64,
    /// Each node's own median, ms.
    pub per_node_p50_ms: BTreeMap<String, f64>,
}

/// The daemons' memory, per node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rss {
    /// Pods in the cluster at the measure.
    pub pods: usize,
    /// Policies in the cluster at the measure.
    pub policies: usize,
    /// VmRSS once the cluster was up, before the background, MiB.
    pub idle_rss_mib: BTreeMap<String, f64>,
    /// VmRSS at `pods` and `policies`, settled, MiB.
    pub rss_mib: BTreeMap<String, f64>,
    /// VmHWM (the peak) then, MiB.
    pub hwm_mib: BTreeMap<String, f64>,
}

/// One target of the cluster run: what, the target, the measure, met.
pub type ClusterTarget = (String, String, String, bool);

impl RealCluster {
    /// The largest of a per-node map (0 when empty).
    fn worst(map: &BTreeMap<String, f64>) -> f64 {
        map.values().copied().fold(0.0, f64::max)
    }

    /// The issue's three whole-daemon targets against this run.
    pub fn targets(&self) -> Vec<ClusterTarget> {
        let e = &self.enforce;
        let on = format!(
            "{} pods, {} policies, {} nodes; {} samples",
            e.pods, e.policies, e.nodes, e.samples
        );
        let rss = Self::worst(&self.rss.rss_mib).max(Self::worst(&self.rss.hwm_mib));
        vec![
            (
                format!("policy created → enforced on every node, p50 (real cluster: {on})"),
                format!("≤ {CHANGE_P50_TARGET_MS:.0} ms"),
                format!("{:.1} ms", e.p50_ms),
                e.p50_ms <= CHANGE_P50_TARGET_MS,
            ),
            (
                "policy created → enforced on every node, p99 (real cluster)".into(),
                format!("≤ {CHANGE_P99_TARGET_MS:.0} ms"),
                format!("{:.1} ms", e.p99_ms),
                e.p99_ms <= CHANGE_P99_TARGET_MS,
            ),
            (
                format!(
                    "daemon RSS, peak of the nodes (real cluster: {} pods, {} policies)",
                    self.rss.pods, self.rss.policies
                ),
                format!("≤ {RSS_TARGET_MIB:.0} MiB"),
                format!("{rss:.1} MiB"),
                rss <= RSS_TARGET_MIB,
            ),
        ]
    }
}

/// What the script wrote in a real run (1,000 pods, 200 policies; 10,000
/// pods and 1,000 policies for the memory), for the tests.
#[cfg(test)]
pub(crate) const SAMPLE: &str = r#"{"kernel": "6.18.44", "cpus": 2,
  "date": "2026-12-02T21:10:35+00:00", "command": "e2e/k8s/bench-policy-cluster.sh --out x",
  "enforce": {"pods": 1000, "policies": 200, "nodes": 2, "samples": 50, "p50_ms": 40.8,
    "p90_ms": 44.8, "p99_ms": 54.1, "max_ms": 54.1, "per_node_p50_ms": {"a": 40.2, "b": 39.6}},
  "rss": {"pods": 10000, "policies": 1000, "idle_rss_mib": {"a": 22.9, "b": 23.3},
    "rss_mib": {"a": 76.8, "b": 74.3}, "hwm_mib": {"a": 76.8, "b": 74.3}},
  "populate_seconds": {"1000": 4.1, "10000": 40.4}}"#;

#[cfg(test)]
mod tests {
    use super::*;

    fn run(p50: f64, p99: f64, rss: f64, hwm: f64) -> RealCluster {
        let per_node = |v: f64| BTreeMap::from([("n1".to_string(), 10.0), ("n2".to_string(), v)]);
        RealCluster {
            kernel: "6.18".into(),
            cpus: 2,
            date: "2026-12-02T21:10:35+00:00".into(),
            command: "e2e/k8s/bench-policy-cluster.sh".into(),
            enforce: Enforce {
                pods: 1000,
                policies: 200,
                nodes: 2,
                samples: 50,
                p50_ms: p50,
                p90_ms: p99,
                p99_ms: p99,
                max_ms: p99,
                per_node_p50_ms: per_node(p50),
            },
            rss: Rss {
                pods: 10000,
                policies: 1000,
                idle_rss_mib: per_node(20.0),
                rss_mib: per_node(rss),
                hwm_mib: per_node(hwm),
            },
            populate_seconds: BTreeMap::from([("1000".to_string(), 4.0)]),
        }
    }

    #[test]
    fn the_script_s_json_is_read() {
        let text = SAMPLE;
        let r: RealCluster = serde_json::from_str(text).unwrap();
        assert_eq!(r.enforce.samples, 50);
        assert_eq!(r.rss.rss_mib["a"], 76.8);
        assert!(r.targets().iter().all(|t| t.3));
    }

    #[test]
    fn each_target_is_judged_on_the_worst_node_and_the_peak() {
        let met = |r: &RealCluster| r.targets().iter().map(|t| t.3).collect::<Vec<_>>();
        assert_eq!(met(&run(40.0, 60.0, 70.0, 70.0)), [true, true, true]);
        assert_eq!(met(&run(101.0, 60.0, 70.0, 70.0)), [false, true, true]);
        assert_eq!(met(&run(40.0, 501.0, 70.0, 70.0)), [true, false, true]);
        assert_eq!(met(&run(40.0, 60.0, 70.0, 120.0)), [true, true, false]);
        assert_eq!(met(&run(40.0, 60.0, 101.0, 90.0)), [true, true, false]);
    }
}
