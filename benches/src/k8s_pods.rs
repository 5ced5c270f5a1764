//! Issue 29, step 5: pods through a real kubelet, from
//! `e2e/k8s/test-k8s-deploy.sh` with `SARENA_DEPLOY_JSON` — N pods at once
//! on one node of e2e/k8s's cluster, the reference bridge + host-local on a
//! node of its own, then Sarena installed by its DaemonSet, in the same run.
//! The script writes [`FILE`] into the results dir; the page takes it from
//! there when it is present.

use serde::{Deserialize, Serialize};

/// The file the script writes (`scripts/bench.sh` puts it in the results dir).
pub const FILE: &str = "kubelet-pods.json";

/// Sarena against the reference, both lower-is-better: at most this ratio.
pub const TARGET_RATIO: f64 = 1.0;

/// The run: the machine, the command and each measurement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KubeletPods {
    /// `uname -r` of the machine.
    pub kernel: String,
    /// Its CPUs.
    pub cpus: u32,
    /// When (ISO 8601).
    pub date: String,
    /// The command that ran.
    pub command: String,
    /// Each contender at each size, in the order run (rounds one after the
    /// other).
    pub runs: Vec<PodsRun>,
}

/// N pods created at once (one Deployment) on one node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PodsRun {
    /// The round (a whole run of the script; 1 when there was one).
    #[serde(default = "first_round")]
    pub round: usize,
    /// `ref` (bridge + host-local) or `sarena`.
    pub slug: String,
    /// The contender, as the page names it.
    pub contender: String,
    /// Pods created at once.
    pub pods: usize,
    /// Per pod, its creation (first watch event) → Running: p50, s.
    pub p50_s: f64,
    /// The same, p90, s.
    pub p90_s: f64,
    /// The same, the slowest, s.
    pub max_s: f64,
    /// The Deployment's creation → the last pod Running, s.
    pub all_running_s: f64,
    /// kubelet's mean RunPodSandbox over these pods, ms.
    pub sandbox_mean_ms: Option<f64>,
    /// containerd's mean `sandbox_create_network` (netns + the CNI ADD of the
    /// whole chain) over these pods, ms.
    pub network_mean_ms: Option<f64>,
}

fn first_round() -> usize {
    1
}

/// What is compared, Sarena's value, the reference's and how a value is shown.
type Compared = (&'static str, Option<f64>, Option<f64>, fn(f64) -> String);

/// One row of the targets table: what, target, measured, met.
pub type PodsTarget = (String, String, String, bool);

impl KubeletPods {
    /// The sizes measured for both contenders, ascending.
    pub fn sizes(&self) -> Vec<usize> {
        let mut s: Vec<usize> = self
            .runs
            .iter()
            .filter(|r| r.slug == "sarena")
            .map(|r| r.pods)
            .filter(|n| self.runs.iter().any(|r| r.slug == "ref" && r.pods == *n))
            .collect();
        s.sort_unstable();
        s.dedup();
        s
    }

    /// The rounds run.
    pub fn rounds(&self) -> usize {
        let mut r: Vec<usize> = self.runs.iter().map(|r| r.round).collect();
        r.sort_unstable();
        r.dedup();
        r.len()
    }

    /// The median over the rounds of one value of the contender at `pods`.
    pub fn median_of(
        &self,
        slug: &str,
        pods: usize,
        value: impl Fn(&PodsRun) -> Option<f64>,
    ) -> Option<f64> {
        let values: Vec<f64> = self
            .runs
            .iter()
            .filter(|r| r.slug == slug && r.pods == pods)
            .filter_map(value)
            .collect();
        crate::stats::median(&values)
    }

    /// Per size: Sarena's creation → Running p50 and mean RunPodSandbox
    /// against the reference's (≤ [`TARGET_RATIO`]), medians over the rounds.
    pub fn targets(&self) -> Vec<PodsTarget> {
        let mut t = Vec::new();
        let both = |n: usize, f: fn(&PodsRun) -> Option<f64>| {
            (self.median_of("sarena", n, f), self.median_of("ref", n, f))
        };
        let rounds = match self.rounds() {
            1 => String::new(),
            r => format!(", medians of {r} rounds"),
        };
        for n in self.sizes() {
            let (s_p50, r_p50) = both(n, |r| Some(r.p50_s));
            let (s_sandbox, r_sandbox) = both(n, |r| r.sandbox_mean_ms);
            let rows: [Compared; 2] = [
                ("pod creation → Running, p50", s_p50, r_p50, |v| {
                    format!("{v:.2} s")
                }),
                ("kubelet's RunPodSandbox, mean", s_sandbox, r_sandbox, |v| {
                    format!("{v:.0} ms")
                }),
            ];
            for (what, ours, theirs, show) in rows {
                let ratio = crate::stats::ratio_of(ours, theirs);
                let measured = match (ratio, ours, theirs) {
                    (Some(x), Some(o), Some(t)) => {
                        format!("{x:.2}× ({} vs {}{rounds})", show(o), show(t))
                    }
                    _ => "not measured".into(),
                };
                t.push((
                    format!("{n} pods at once on one node through kubelet: {what}"),
                    format!("≤ {TARGET_RATIO:.1}× bridge + host-local"),
                    measured,
                    ratio.is_some_and(|x| x <= TARGET_RATIO),
                ));
            }
        }
        t
    }
}

#[cfg(test)]
pub(crate) const SAMPLE: &str = r#"{"kernel": "6.18.44", "cpus": 2, "date": "2026-12-05T12:00:00Z",
 "command": "SARENA_DEPLOY_PODS=\"50 100\" e2e/k8s/test-k8s-deploy.sh", "runs": [
 {"slug": "ref", "contender": "bridge + host-local", "pods": 50, "p50_s": 2.1, "p90_s": 3.0, "max_s": 3.2,
  "all_running_s": 3.4, "sandbox_mean_ms": 3060.0, "network_mean_ms": 61.5},
 {"slug": "ref", "contender": "bridge + host-local", "pods": 100, "p50_s": 4.0, "p90_s": 6.0, "max_s": 6.5,
  "all_running_s": 6.8, "sandbox_mean_ms": 5000.0, "network_mean_ms": null},
 {"slug": "sarena", "contender": "Sarena (eBPF dataplane)", "pods": 50, "p50_s": 2.0, "p90_s": 2.9, "max_s": 3.1,
  "all_running_s": 3.3, "sandbox_mean_ms": 3980.0, "network_mean_ms": 40.2},
 {"slug": "sarena", "contender": "Sarena (eBPF dataplane)", "pods": 100, "p50_s": 3.0, "p90_s": 5.0, "max_s": 5.5,
  "all_running_s": 5.9, "sandbox_mean_ms": 4000.0, "network_mean_ms": 55.0}]}"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_size_measured_by_both_is_judged_against_the_reference() {
        let mut run: KubeletPods = serde_json::from_str(SAMPLE).unwrap();
        assert_eq!(run.sizes(), [50, 100]);
        let t = run.targets();
        let met: Vec<bool> = t.iter().map(|t| t.3).collect();
        // 50: p50 faster, sandbox 1.30x slower; 100: both faster
        assert_eq!(met, [true, false, true, true]);
        assert!(
            t[1].2.starts_with("1.30× (3980 ms vs 3060 ms)"),
            "{}",
            t[1].2
        );
        assert!(t[0].0.starts_with("50 pods at once"));
        // a size only one contender ran is not judged
        run.runs.retain(|r| !(r.slug == "ref" && r.pods == 100));
        assert_eq!(run.sizes(), [50]);
        assert_eq!(run.targets().len(), 2);
        // no kubelet timer: missed, not met
        run.runs[1].sandbox_mean_ms = None;
        let t = run.targets();
        assert_eq!(t[1].2, "not measured");
        assert!(!t[1].3);
    }

    #[test]
    fn rounds_are_judged_by_their_medians() {
        let mut run: KubeletPods = serde_json::from_str(SAMPLE).unwrap();
        assert_eq!(run.rounds(), 1);
        let second: Vec<PodsRun> = run
            .runs
            .iter()
            .cloned()
            .map(|mut r| {
                r.round = 2;
                if r.slug == "sarena" && r.pods == 50 {
                    r.sandbox_mean_ms = Some(2000.0);
                }
                r
            })
            .collect();
        run.runs.extend(second);
        assert_eq!(run.rounds(), 2);
        // sarena at 50: 3980 and 2000 -> 2990, against 3060 twice
        assert_eq!(
            run.median_of("sarena", 50, |r| r.sandbox_mean_ms),
            Some(2990.0)
        );
        let t = run.targets();
        assert!(t[1].3, "{t:?}");
        assert!(
            t[1].2.ends_with("vs 3060 ms, medians of 2 rounds)"),
            "{}",
            t[1].2
        );
    }
}
