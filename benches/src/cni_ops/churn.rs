//! Item 2: churn. `n` ADDs started at once (one thread each, released together by a
//! barrier), then `n` DELs at once; wall time, per-op latency, errors, and a check
//! that no address was handed out twice. Contenders in turn, each on a fresh node.

use std::sync::Barrier;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::{Check, CniOptions, duplicates, make_pods, progress, push_check, usage_is};
use crate::BenchError;
use crate::node::{Bins, Contender, IpamUsage, NodeNetns, PluginRun, Pod};
use crate::stats::{Summary, ms};

/// One contender at one concurrency.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ChurnResult {
    /// Who.
    pub contender: Contender,
    /// Concurrent operations.
    pub concurrency: usize,
    /// From release until the last ADD was reaped, ms.
    pub add_wall_ms: f64,
    /// From release until the last DEL was reaped, ms.
    pub del_wall_ms: f64,
    /// Per-ADD latency of the successful ones, ms.
    pub add: Option<Summary>,
    /// Per-DEL latency of the successful ones, ms.
    pub del: Option<Summary>,
    /// Failed ADDs (non-zero exit or no address).
    pub add_errors: usize,
    /// Failed DELs.
    pub del_errors: usize,
    /// The first failure.
    pub first_error: Option<String>,
    /// Addresses handed out more than once (must be empty).
    pub duplicates: Vec<String>,
    /// IPAM after the ADDs.
    pub held_after_add: IpamUsage,
    /// IPAM after the DELs.
    pub held_after_del: IpamUsage,
}

pub(super) fn run(
    opts: &CniOptions,
    bins: &Bins,
    n: usize,
    checks: &mut Vec<Check>,
) -> Result<Vec<ChurnResult>, BenchError> {
    let mut out = Vec::new();
    for (i, &c) in opts.contenders.iter().enumerate() {
        let node = NodeNetns::start(c, 20 + i as u8, bins)?;
        let pods = make_pods(&format!("churn{n}-{}", c.slug()), n, 4)?;
        let (adds, add_wall) = concurrently(&pods, |p| node.add(p));
        let adds = adds.into_iter().collect::<Result<Vec<_>, _>>()?;
        let held_after_add = node.ipam_usage()?;
        let (dels, del_wall) = concurrently(&pods, |p| node.del(p));
        let dels = dels.into_iter().collect::<Result<Vec<_>, _>>()?;
        let held_after_del = node.ipam_usage()?;
        let r = result(
            c,
            n,
            &adds,
            &dels,
            add_wall,
            del_wall,
            held_after_add,
            held_after_del,
        );
        progress(&format!(
            "churn {n}, {}: ADD wall {:.0} ms ({} errors), DEL wall {:.0} ms ({} errors)",
            c.label(),
            r.add_wall_ms,
            r.add_errors,
            r.del_wall_ms,
            r.del_errors
        ));
        let label = c.label();
        let good = n - r.add_errors;
        push_check(
            checks,
            r.duplicates.is_empty(),
            format!(
                "churn {n}, {label}: no address handed out twice (duplicates: {:?})",
                r.duplicates
            ),
        );
        push_check(
            checks,
            usage_is(held_after_add, good),
            format!(
                "churn {n}, {label}: after the ADDs the IPAM holds the {good} addresses ({held_after_add:?})"
            ),
        );
        push_check(
            checks,
            usage_is(held_after_del, 0),
            format!(
                "churn {n}, {label}: after the DELs the IPAM holds nothing ({held_after_del:?})"
            ),
        );
        drop(pods);
        drop(node);
        out.push(r);
    }
    Ok(out)
}

#[allow(clippy::too_many_arguments)]
fn result(
    contender: Contender,
    n: usize,
    adds: &[PluginRun],
    dels: &[PluginRun],
    add_wall: Duration,
    del_wall: Duration,
    held_after_add: IpamUsage,
    held_after_del: IpamUsage,
) -> ChurnResult {
    let add_ok: Vec<&PluginRun> = adds.iter().filter(|r| r.ok() && r.ip.is_some()).collect();
    let del_ok: Vec<&PluginRun> = dels.iter().filter(|r| r.ok()).collect();
    let ips: Vec<_> = add_ok.iter().filter_map(|r| r.ip).collect();
    let first_error = adds
        .iter()
        .chain(dels)
        .find(|r| !r.ok())
        .map(PluginRun::error_text);
    ChurnResult {
        contender,
        concurrency: n,
        add_wall_ms: ms(add_wall),
        del_wall_ms: ms(del_wall),
        add: Summary::of(&add_ok.iter().map(|r| ms(r.elapsed)).collect::<Vec<_>>()),
        del: Summary::of(&del_ok.iter().map(|r| ms(r.elapsed)).collect::<Vec<_>>()),
        add_errors: adds.len() - add_ok.len(),
        del_errors: dels.len() - del_ok.len(),
        first_error,
        duplicates: duplicates(&ips).iter().map(|a| a.to_string()).collect(),
        held_after_add,
        held_after_del,
    }
}

/// Runs `f` on every pod at once (a thread each, released together); the results
/// in pod order and the wall time from release to the last one finished.
fn concurrently<R: Send>(
    pods: &[Pod],
    f: impl Fn(&Pod) -> Result<R, BenchError> + Sync,
) -> (Vec<Result<R, BenchError>>, Duration) {
    let barrier = Barrier::new(pods.len() + 1);
    std::thread::scope(|s| {
        let handles: Vec<_> = pods
            .iter()
            .map(|p| {
                let (f, barrier) = (&f, &barrier);
                s.spawn(move || {
                    barrier.wait();
                    f(p)
                })
            })
            .collect();
        barrier.wait();
        let start = Instant::now();
        let results: Vec<Result<R, BenchError>> = handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(BenchError::Input {
                        what: "a churn thread panicked".into(),
                    })
                })
            })
            .collect();
        (results, start.elapsed())
    })
}
