//! Issue items 1–3: CNI operation latency (ADD/DEL/CHECK/STATUS, interleaved across
//! the contenders op by op), churn (N concurrent ADDs, then DELs) and scale (ADD
//! latency, its phases and daemon memory with 0/100/1,000 existing endpoints,
//! each contender alone on the machine). Every part
//! verifies what it measured: each pod got its address, no address twice, and the
//! IPAM is empty after the DELs.

mod churn;
mod latency;
pub mod phases;
mod scale;

use std::net::Ipv4Addr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde::{Deserialize, Serialize};

use crate::BenchError;
use crate::node::{Contender, IpamUsage, Pod, run_cmd};

pub use churn::ChurnResult;
pub use latency::{LatencyResults, OpLatency};
pub use scale::ScaleResult;

/// What to run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CniOptions {
    /// Pods per contender in the latency part.
    pub pods: usize,
    /// Concurrency levels of the churn part.
    pub churn: Vec<usize>,
    /// Rounds of the churn part per level: every contender once a round, on
    /// a fresh node, in an order rotated per round.
    #[serde(default = "one")]
    pub churn_rounds: usize,
    /// Existing-endpoint levels of the scale part.
    pub scale_levels: Vec<usize>,
    /// Measured ADDs per scale level and contender.
    pub scale_samples: usize,
    /// Contenders of the latency and churn parts.
    pub contenders: Vec<Contender>,
    /// Contenders of the scale part.
    pub scale_contenders: Vec<Contender>,
    /// Runs per operation of the phase table (0: none).
    #[serde(default)]
    pub phase_runs: usize,
}

impl CniOptions {
    /// The numbers: `pods` (≥ 200) pods, churn 20 and 100, scale 0/100/1,000.
    pub fn full(pods: usize) -> CniOptions {
        CniOptions {
            pods,
            churn: vec![20, 100],
            churn_rounds: 5,
            scale_levels: vec![0, 100, 1000],
            scale_samples: 30,
            contenders: Contender::ALL.to_vec(),
            scale_contenders: vec![
                Contender::SarenaEbpf,
                Contender::SarenaKernel,
                Contender::PtpHostLocal,
            ],
            phase_runs: 200,
        }
    }

    /// A smoke run: tiny numbers, same code paths.
    pub fn quick() -> CniOptions {
        CniOptions {
            pods: 6,
            churn: vec![5],
            churn_rounds: 2,
            scale_levels: vec![0, 10],
            scale_samples: 3,
            phase_runs: 5,
            ..CniOptions::full(6)
        }
    }
}

fn one() -> usize {
    1
}

/// One verification and whether it held.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Check {
    /// What was checked.
    pub what: String,
    /// Whether it held.
    pub ok: bool,
}

/// Results of items 1–3.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CniResults {
    /// The options of the run.
    pub options: CniOptions,
    /// Item 1.
    pub latency: LatencyResults,
    /// Item 2.
    pub churn: Vec<ChurnResult>,
    /// Item 3.
    pub scale: Vec<ScaleResult>,
    /// Where a plugin run spends its time (issue 29).
    #[serde(default)]
    pub phases: Option<phases::PhaseTable>,
    /// Every verification made.
    pub checks: Vec<Check>,
}

impl CniResults {
    /// Whether every check held.
    pub fn all_checks_ok(&self) -> bool {
        self.checks.iter().all(|c| c.ok)
    }
}

/// Runs items 1–3.
pub fn run(opts: &CniOptions, bins: &crate::node::Bins) -> Result<CniResults, BenchError> {
    let mut checks = Vec::new();
    progress(&format!(
        "latency: {} pods x {} contenders",
        opts.pods,
        opts.contenders.len()
    ));
    let latency = latency::run(opts, bins, &mut checks)?;
    let phases = match opts.phase_runs {
        0 => None,
        runs => Some(phases::run(runs, bins, &mut checks)?),
    };
    let mut churn = Vec::new();
    for &n in &opts.churn {
        progress(&format!("churn: {n} concurrent ADDs then DELs"));
        churn.extend(churn::run(opts, bins, n, &mut checks)?);
    }
    progress(&format!("scale: levels {:?}", opts.scale_levels));
    let scale = scale::run(opts, bins, &mut checks)?;
    Ok(CniResults {
        options: opts.clone(),
        latency,
        churn,
        scale,
        phases,
        checks,
    })
}

/// A progress line on stderr.
pub fn progress(msg: &str) {
    eprintln!("[sarena-bench] {msg}");
}

pub(crate) fn push_check(checks: &mut Vec<Check>, ok: bool, what: String) {
    if !ok {
        progress(&format!("CHECK FAILED: {what}"));
    }
    checks.push(Check { what, ok });
}

/// `f(0)`, ..., `f(n - 1)` on `workers` threads that take the next index as they
/// go; the results in index order, or the first failure (then the remaining
/// indexes are not started).
pub(crate) fn on_workers<T: Send>(
    n: usize,
    workers: usize,
    f: impl Fn(usize) -> Result<T, BenchError> + Sync,
) -> Result<Vec<T>, BenchError> {
    let next = AtomicUsize::new(0);
    let done: Mutex<Vec<(usize, T)>> = Mutex::new(Vec::with_capacity(n));
    let failure: Mutex<Option<BenchError>> = Mutex::new(None);
    std::thread::scope(|s| {
        for _ in 0..workers.max(1) {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n {
                        return;
                    }
                    match f(i) {
                        Ok(v) => {
                            if let Ok(mut d) = done.lock() {
                                d.push((i, v));
                            }
                        }
                        Err(e) => {
                            if let Ok(mut first) = failure.lock() {
                                first.get_or_insert(e);
                            }
                            // No worker starts another index.
                            next.store(n, Ordering::Relaxed);
                            return;
                        }
                    }
                }
            });
        }
    });
    if let Some(e) = failure.into_inner().ok().flatten() {
        return Err(e);
    }
    let mut done = done
        .into_inner()
        .map_err(|_| BenchError::ThreadPanicked { what: "worker" })?;
    done.sort_by_key(|(i, _)| *i);
    Ok(done.into_iter().map(|(_, v)| v).collect())
}

/// `n` new pods tagged `tag-i`, made on `workers` threads.
pub(crate) fn make_pods(tag: &str, n: usize, workers: usize) -> Result<Vec<Pod>, BenchError> {
    on_workers(n, workers, |i| Pod::new(&format!("{tag}-{i}")))
}

/// Whether the pod's eth0 carries `ip` (read in the pod's netns).
pub(crate) fn pod_has_address(pod: &Pod, ip: Ipv4Addr) -> Result<bool, BenchError> {
    let out = run_cmd(
        "ip",
        &[
            "-n",
            pod.netns_name(),
            "-4",
            "-o",
            "addr",
            "show",
            "dev",
            "eth0",
        ],
    )?;
    Ok(out
        .split_whitespace()
        .any(|w| w.split('/').next() == Some(&ip.to_string())))
}

/// Addresses that occur more than once.
pub fn duplicates(ips: &[Ipv4Addr]) -> Vec<Ipv4Addr> {
    let mut sorted = ips.to_vec();
    sorted.sort();
    let mut dups: Vec<Ipv4Addr> = sorted
        .windows(2)
        .filter(|w| w[0] == w[1])
        .map(|w| w[0])
        .collect();
    dups.dedup();
    dups
}

/// Whether `usage` holds exactly `n` addresses (and endpoints where known).
pub(crate) fn usage_is(usage: IpamUsage, n: usize) -> bool {
    usage.addresses == n && usage.endpoints.is_none_or(|e| e == n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicates_found_once_each() {
        let a = Ipv4Addr::new(10, 0, 0, 2);
        let b = Ipv4Addr::new(10, 0, 0, 3);
        let c = Ipv4Addr::new(10, 0, 0, 4);
        assert_eq!(duplicates(&[a, b, c]), Vec::<Ipv4Addr>::new());
        assert_eq!(duplicates(&[b, a, b, c, b, a]), vec![a, b]);
    }

    #[test]
    fn workers_keep_index_order_and_report_the_failure() {
        let squares = on_workers(50, 4, |i| Ok(i * i)).unwrap();
        assert_eq!(squares, (0..50).map(|i| i * i).collect::<Vec<_>>());
        let failed = on_workers(50, 4, |i| {
            if i == 7 {
                Err(BenchError::Input { what: "7".into() })
            } else {
                Ok(i)
            }
        });
        assert!(matches!(failed, Err(BenchError::Input { what }) if what == "7"));
        assert!(on_workers(0, 4, Ok).unwrap().is_empty());
    }

    #[test]
    fn usage_matches_with_and_without_endpoints() {
        let u = |endpoints, addresses| IpamUsage {
            endpoints,
            addresses,
        };
        assert!(usage_is(u(None, 3), 3));
        assert!(usage_is(u(Some(3), 3), 3));
        assert!(!usage_is(u(Some(2), 3), 3));
        assert!(!usage_is(u(None, 0), 3));
    }
}
