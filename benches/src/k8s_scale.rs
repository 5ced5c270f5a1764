//! Issue 31: Kubernetes mode at cluster scale, from
//! `e2e/k8s/bench-node-scale.sh` — two real nodes running the daemon on the
//! real API server of e2e/k8s and up to a thousand Node objects without a
//! kubelet. The script writes [`FILES`] into the results dir (one per
//! routing mode); the page takes them from there when they are present.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The files the script writes (in the results dir, `--json`): native
/// routing, then vxlan.
pub const FILES: [&str; 2] = ["node-scale.json", "node-scale-vxlan.json"];

/// Daemon RSS target at the largest level, MiB.
pub const RSS_TARGET_MIB: f64 = 64.0;
/// Steady-state CPU target at the largest level, % of one CPU ("~0").
pub const CPU_TARGET_PERCENT: f64 = 1.0;
/// A Node change on every real node, p99 target, ms.
pub const CHANGE_P99_TARGET_MS: f64 = 1000.0;
/// A joining daemon ready, target, s.
pub const JOIN_TARGET_S: f64 = 5.0;

/// The run: the machine, the command and each level.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeScale {
    /// `uname -r` of the machine.
    pub kernel: String,
    /// Its CPUs.
    pub cpus: u32,
    /// When (ISO 8601).
    pub date: String,
    /// The command that ran.
    pub command: String,
    /// `native` or `vxlan`.
    pub routing: String,
    /// The levels, in the order run (the cluster grows in place).
    pub levels: Vec<Level>,
}

/// One level: the cluster at `nodes` nodes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Level {
    /// Nodes in the cluster, the two real ones included.
    pub nodes: usize,
    /// Node objects created at this level.
    pub new_ghosts: usize,
    /// Seconds to create them (parallel requests).
    pub create_s: f64,
    /// Seconds from the first create until both real nodes routed every one.
    pub converged_s: f64,
    /// Per new Node: podCIDR seen → routed on every real node.
    pub grow: Latency,
    /// One Node added at a time: podCIDR seen → routed on every real node.
    pub probe_add: Latency,
    /// One Node deleted at a time: deletion seen → route gone on every real node.
    pub probe_delete: Latency,
    /// Per real node: its routes against the expected set.
    pub exact: BTreeMap<String, Exact>,
    /// The steady state, heartbeats on.
    pub steady: Steady,
    /// A daemon joining again.
    pub join: Join,
    /// Pod objects added at this level (the last), if any.
    #[serde(default)]
    pub pods: Option<Pods>,
}

/// Pod objects on the ghost Nodes, and what the daemons did with them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pods {
    /// Pods created.
    pub pods: usize,
    /// Seconds to create them (and set their status).
    pub create_s: f64,
    /// Seconds after, until both daemons were quiet.
    pub settle_s: f64,
    /// Per real node: its daemon then.
    pub daemons: BTreeMap<String, PodsLoad>,
}

/// A daemon once the pods settled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PodsLoad {
    /// CPU over a quiet window, % of one CPU.
    pub idle_cpu_percent: f64,
    /// VmRSS, MiB.
    #[serde(rename = "VmRSS")]
    pub rss_mib: f64,
    /// VmHWM, MiB.
    #[serde(rename = "VmHWM")]
    pub hwm_mib: f64,
}

/// Percentiles over samples (the slower real node of each), ms.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    /// Samples.
    pub n: usize,
    /// Median, ms.
    pub p50_ms: Option<f64>,
    /// 99th percentile, ms.
    pub p99_ms: Option<f64>,
    /// The slowest, ms.
    pub max_ms: Option<f64>,
    /// Samples at or below 0: the route came before the harness's own
    /// watch saw the podCIDR (its start is a watch like the daemon's).
    #[serde(default)]
    pub early: usize,
}

/// A real node's Sarena routes against the expected set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Exact {
    /// Routes it holds.
    pub routes: usize,
    /// Routes it should hold.
    pub expected: usize,
    /// What differs ("" when nothing).
    pub problems: String,
}

/// The steady state: `seconds` with the Node objects heartbeating.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Steady {
    /// Length of the window, s.
    pub seconds: f64,
    /// Node status patches per second, all Nodes together.
    pub heartbeats_per_s: f64,
    /// Seconds waited for the Node objects to be quiet (5 s without a
    /// change) before the windows; `None`: not waited for (older runs).
    #[serde(default)]
    pub quiet_after_s: Option<f64>,
    /// Per real node: its daemon.
    pub daemons: BTreeMap<String, DaemonLoad>,
}

/// A daemon over the steady window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DaemonLoad {
    /// CPU with the heartbeats, % of one CPU.
    pub cpu_percent: f64,
    /// CPU in a window before, with nothing happening, % of one CPU.
    #[serde(default)]
    pub idle_cpu_percent: Option<f64>,
    /// Bytes per second into its node's eth0 in that window.
    #[serde(default)]
    pub idle_rx_bytes_per_s: Option<f64>,
    /// VmRSS at the end, MiB.
    #[serde(rename = "VmRSS")]
    pub rss_mib: f64,
    /// VmHWM (its peak so far), MiB.
    #[serde(rename = "VmHWM")]
    pub hwm_mib: f64,
    /// Bytes per second into its node's eth0 (its API server traffic).
    pub rx_bytes_per_s: f64,
    /// Bytes per second out.
    pub tx_bytes_per_s: f64,
}

/// A daemon started again on a node whose routes were flushed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Join {
    /// Start → health ready, s.
    pub ready_s: Option<f64>,
    /// Start → every peer routed, s.
    pub routes_s: Option<f64>,
}

/// One target: what, the target, the measure, met.
pub type ScaleTarget = (String, String, String, bool);

impl Level {
    /// Whether every real node's routes were exactly the expected set.
    pub fn exact(&self) -> bool {
        !self.exact.is_empty() && self.exact.values().all(|e| e.problems.is_empty())
    }

    fn worst(&self, f: impl Fn(&DaemonLoad) -> f64) -> f64 {
        self.steady.daemons.values().map(f).fold(0.0, f64::max)
    }

    /// The largest RSS or peak of the daemons, MiB.
    pub fn rss_mib(&self) -> f64 {
        self.worst(|d| d.rss_mib.max(d.hwm_mib))
    }

    /// The busiest daemon's steady CPU, %.
    pub fn cpu_percent(&self) -> f64 {
        self.worst(|d| d.cpu_percent)
    }
}

impl NodeScale {
    /// The issue's targets at the largest level run.
    pub fn targets(&self) -> Vec<ScaleTarget> {
        let Some(l) = self.levels.iter().max_by_key(|l| l.nodes) else {
            return Vec::new();
        };
        let n = l.nodes;
        let change = l
            .probe_add
            .p99_ms
            .unwrap_or(f64::INFINITY)
            .max(l.probe_delete.p99_ms.unwrap_or(f64::INFINITY));
        let ready = l.join.ready_s.unwrap_or(f64::INFINITY);
        vec![
            (
                format!(
                    "daemon RSS at {n} nodes, {} (peak of the real nodes)",
                    self.routing
                ),
                format!("≤ {RSS_TARGET_MIB:.0} MiB"),
                format!("{:.1} MiB", l.rss_mib()),
                l.rss_mib() <= RSS_TARGET_MIB,
            ),
            (
                format!(
                    "daemon CPU at {n} nodes, {}, steady ({:.1} Node heartbeats/s)",
                    self.routing, l.steady.heartbeats_per_s
                ),
                format!("≤ {CPU_TARGET_PERCENT:.0} % of a CPU (~0)"),
                format!("{:.2} %", l.cpu_percent()),
                l.cpu_percent() <= CPU_TARGET_PERCENT,
            ),
            (
                format!(
                    "a Node added or deleted → every real node, p99, at {n} nodes, {}",
                    self.routing
                ),
                format!("≤ {CHANGE_P99_TARGET_MS:.0} ms"),
                format!("{change:.1} ms"),
                change <= CHANGE_P99_TARGET_MS && l.exact(),
            ),
            (
                format!(
                    "a daemon joining a {n}-node cluster, {}: ready",
                    self.routing
                ),
                format!("≤ {JOIN_TARGET_S:.0} s"),
                format!("{ready:.2} s"),
                ready <= JOIN_TARGET_S,
            ),
        ]
    }
}

#[cfg(test)]
pub(crate) const SAMPLE: &str = r#"{"kernel": "6.18.44", "cpus": 2, "date": "2026-12-05T09:00:00Z",
 "command": "e2e/k8s/bench-node-scale.sh", "routing": "native", "levels": [
 {"nodes": 10, "ghosts": 8, "routing": "native", "new_ghosts": 8, "create_s": 0.08, "converged_s": 0.13,
  "grow": {"n": 8, "p50_ms": 11.9, "p99_ms": 37.0, "max_ms": 37.0}, "grow_last_route_s": 0.04,
  "probe_add": {"n": 20, "p50_ms": 11.4, "p99_ms": 33.9, "max_ms": 33.9},
  "probe_delete": {"n": 20, "p50_ms": 8.7, "p99_ms": 19.3, "max_ms": 19.3}, "watch_errors": [],
  "exact": {"node1": {"routes": 9, "expected": 9, "problems": ""}, "node2": {"routes": 9, "expected": 9, "problems": ""}},
  "steady": {"seconds": 30.0, "heartbeats_per_s": 0.2, "daemons": {
    "node1": {"cpu_percent": 0.37, "VmHWM": 31.2, "VmRSS": 29.4, "rx_bytes_per_s": 7801, "tx_bytes_per_s": 151, "packets_per_s": 4.8},
    "node2": {"cpu_percent": 0.43, "VmHWM": 31.5, "VmRSS": 29.0, "rx_bytes_per_s": 7795, "tx_bytes_per_s": 137, "packets_per_s": 4.6}}},
  "join": {"ready_s": 0.67, "routes_s": 0.67, "routes": 9}},
 {"nodes": 1000, "ghosts": 998, "routing": "native", "new_ghosts": 990, "create_s": 5.38, "converged_s": 43.62,
  "grow": {"n": 990, "p50_ms": 14.3, "p99_ms": 86.4, "max_ms": 131.7}, "grow_last_route_s": 0.13,
  "probe_add": {"n": 20, "p50_ms": 58.1, "p99_ms": 86.4, "max_ms": 86.4},
  "probe_delete": {"n": 20, "p50_ms": 36.5, "p99_ms": 53.6, "max_ms": 53.6}, "watch_errors": [],
  "exact": {"node1": {"routes": 999, "expected": 999, "problems": ""}, "node2": {"routes": 999, "expected": 999, "problems": ""}},
  "steady": {"seconds": 30.0, "heartbeats_per_s": 16.7, "daemons": {
    "node1": {"cpu_percent": 12.87, "VmHWM": 66.3, "VmRSS": 66.3, "rx_bytes_per_s": 454233, "tx_bytes_per_s": 5870, "packets_per_s": 224.0},
    "node2": {"cpu_percent": 12.47, "VmHWM": 66.6, "VmRSS": 66.6, "rx_bytes_per_s": 454619, "tx_bytes_per_s": 6045, "packets_per_s": 227.4}}},
  "join": {"ready_s": 1.07, "routes_s": 1.1, "routes": 999}}]}"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_script_s_json_is_read_and_judged_at_the_largest_level() {
        let mut run: NodeScale = serde_json::from_str(SAMPLE).unwrap();
        assert_eq!(run.levels.len(), 2);
        assert_eq!(run.levels[1].rss_mib(), 66.6);
        let met: Vec<bool> = run.targets().iter().map(|t| t.3).collect();
        assert_eq!(met, [false, false, true, true]);
        assert!(run.targets()[0].0.contains("1000 nodes"));
        // a route set not exact fails the change target whatever its time
        run.levels[1].exact.get_mut("node2").unwrap().problems = "1 missing".into();
        assert!(!run.targets()[2].3);
        // no join: missed
        run.levels[1].join.ready_s = None;
        assert!(!run.targets()[3].3);
    }
}
