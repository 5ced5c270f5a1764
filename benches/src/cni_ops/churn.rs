//! Item 2: churn. `n` ADDs started at once (one thread each, released together by a
//! barrier), then `n` DELs at once; wall time, per-op latency, errors, and a check
//! that no address was handed out twice. Every contender once a round, each on a
//! fresh node, in an order rotated per round; the wall time reported is the
//! median over the rounds (one round of 100 processes on two cores varies by up
//! to 2x). Sarena's ADDs record their phases, a file per run, so the report can
//! say what a concurrent ADD waits for.

use std::net::Ipv4Addr;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::phases::{OpPhases, Samples};
use super::{Check, CniOptions, duplicates, make_pods, progress, push_check, usage_is};
use crate::BenchError;
use crate::dataplane::cpu::{self, CpuTicks, ticks_per_second};
use crate::node::{Bins, Contender, IpamUsage, NodeNetns, PluginRun, Pod};
use crate::stats::{Summary, median, ms};

/// One contender at one concurrency, over every round.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ChurnResult {
    /// Who.
    pub contender: Contender,
    /// Concurrent operations.
    pub concurrency: usize,
    /// From release until the last ADD was reaped, ms: the median over the rounds.
    pub add_wall_ms: f64,
    /// Every round's ADD wall time, ms, in round order.
    #[serde(default)]
    pub add_walls_ms: Vec<f64>,
    /// From release until the last DEL was reaped, ms: the median over the rounds.
    pub del_wall_ms: f64,
    /// Every round's DEL wall time, ms, in round order.
    #[serde(default)]
    pub del_walls_ms: Vec<f64>,
    /// Per-ADD latency of the successful ones, every round, ms.
    pub add: Option<Summary>,
    /// Per-DEL latency of the successful ones, every round, ms.
    pub del: Option<Summary>,
    /// Failed ADDs (non-zero exit or no address), every round.
    pub add_errors: usize,
    /// Failed DELs, every round.
    pub del_errors: usize,
    /// The first failure.
    pub first_error: Option<String>,
    /// Addresses handed out more than once within a round (must be empty).
    pub duplicates: Vec<String>,
    /// IPAM after the ADDs of the last round.
    pub held_after_add: IpamUsage,
    /// IPAM after the DELs of the last round.
    pub held_after_del: IpamUsage,
    /// The machine's CPUs busy during the ADDs (from the release to the last
    /// reap, all CPUs, `/proc/stat`), as a share: the median over the rounds.
    /// Near 1, the wall time is what the ADDs cost in CPU, not waiting.
    #[serde(default)]
    pub add_cpu_busy: Option<f64>,
    /// The machine's CPU time during the ADDs divided by N, ms: what one ADD
    /// costs, plugin, daemon, kernel and harness together (median over the rounds).
    #[serde(default)]
    pub add_cpu_ms_per_op: Option<f64>,
    /// Of [`ChurnResult::add_cpu_ms_per_op`], the plugin processes' own
    /// (each reaped with `wait4`; ptp's includes its host-local), per ADD:
    /// the median over the rounds.
    #[serde(default)]
    pub add_plugin_cpu_ms_per_op: Option<f64>,
    /// Of [`ChurnResult::add_cpu_ms_per_op`], the daemon's (`/proc/PID/stat`
    /// over the ADDs), per ADD: the median over the rounds; `None` without
    /// a daemon.
    #[serde(default)]
    pub add_daemon_cpu_ms_per_op: Option<f64>,
    /// Sarena's ADD phases (`SARENA_CNI_PHASES`), medians over every round's
    /// successful ADDs; `None` for the reference plugins.
    #[serde(default)]
    pub add_phases: Option<OpPhases>,
}

/// One round of one contender.
struct Round {
    adds: Vec<PluginRun>,
    dels: Vec<PluginRun>,
    add_wall: Duration,
    del_wall: Duration,
    /// CPU ticks (busy, total) of the machine over the ADDs.
    add_cpu: Option<CpuTicks>,
    /// The daemon's CPU time over the ADDs.
    add_daemon_cpu: Option<Duration>,
    held_after_add: IpamUsage,
    held_after_del: IpamUsage,
}

impl Round {
    /// The addresses the successful ADDs were given.
    fn addresses(&self) -> Vec<Ipv4Addr> {
        self.adds
            .iter()
            .filter(|a| added(a))
            .filter_map(|a| a.ip)
            .collect()
    }
}

pub(super) fn run(
    opts: &CniOptions,
    bins: &Bins,
    n: usize,
    checks: &mut Vec<Check>,
) -> Result<Vec<ChurnResult>, BenchError> {
    let contenders = &opts.contenders;
    let mut rounds: Vec<Vec<Round>> = contenders.iter().map(|_| Vec::new()).collect();
    let mut phases: Vec<Samples> = contenders.iter().map(|_| Samples::default()).collect();
    for round in 0..opts.churn_rounds.max(1) {
        for k in 0..contenders.len() {
            let i = (k + round) % contenders.len();
            let r = one_round(contenders[i], 20 + i as u8, n, round, bins, &mut phases[i])?;
            check_round(checks, contenders[i], n, round, &r);
            rounds[i].push(r);
        }
    }
    Ok(contenders
        .iter()
        .zip(rounds)
        .zip(phases)
        .map(|((&c, rounds), phases)| result(c, n, &rounds, phases))
        .collect())
}

/// `n` ADDs then `n` DELs of `c` on a fresh node; Sarena's ADD phases go to `phases`.
fn one_round(
    c: Contender,
    slot: u8,
    n: usize,
    round: usize,
    bins: &Bins,
    phases: &mut Samples,
) -> Result<Round, BenchError> {
    let node = NodeNetns::start(c, slot, bins)?;
    let pods = make_pods(&format!("churn{n}-{}", c.slug()), n, 4)?;
    let files: Vec<_> = (0..pods.len())
        .map(|i| node.work_dir().join(format!("churn{n}-{round}-{i}.jsonl")))
        .collect();
    let record = c.is_sarena();
    let daemon_before = node.daemon_cpu();
    let (adds, add_wall, add_cpu) = concurrently(&pods, |i, p| match record {
        true => node.add_recording(p, &files[i]),
        false => node.add(p),
    });
    let add_daemon_cpu = daemon_before
        .zip(node.daemon_cpu())
        .map(|(before, after)| after.saturating_sub(before));
    let adds = adds.into_iter().collect::<Result<Vec<_>, _>>()?;
    if record {
        for (run, file) in adds.iter().zip(&files).filter(|(r, _)| r.ok()) {
            phases.add(run, file)?;
        }
    }
    let held_after_add = node.ipam_usage()?;
    let (dels, del_wall, _) = concurrently(&pods, |_, p| node.del(p));
    let dels = dels.into_iter().collect::<Result<Vec<_>, _>>()?;
    let held_after_del = node.ipam_usage()?;
    let r = Round {
        adds,
        dels,
        add_wall,
        del_wall,
        add_cpu,
        add_daemon_cpu,
        held_after_add,
        held_after_del,
    };
    progress(&format!(
        "churn {n}, round {}, {}: ADD wall {:.0} ms ({} errors), DEL wall {:.0} ms ({} errors)",
        round + 1,
        c.label(),
        ms(r.add_wall),
        r.adds.iter().filter(|a| !added(a)).count(),
        ms(r.del_wall),
        r.dels.iter().filter(|d| !d.ok()).count(),
    ));
    drop(pods);
    drop(node);
    Ok(r)
}

/// A successful ADD: exit 0 and an address.
fn added(r: &PluginRun) -> bool {
    r.ok() && r.ip.is_some()
}

/// The round's verifications: no address twice, the IPAM holding exactly
/// the successful ADDs' addresses, then nothing.
fn check_round(checks: &mut Vec<Check>, c: Contender, n: usize, round: usize, r: &Round) {
    let label = c.label();
    let round = round + 1;
    let ips = r.addresses();
    let twice = duplicates(&ips);
    push_check(
        checks,
        twice.is_empty(),
        format!(
            "churn {n}, round {round}, {label}: no address handed out twice (duplicates: {twice:?})"
        ),
    );
    let good = ips.len();
    push_check(
        checks,
        usage_is(r.held_after_add, good),
        format!(
            "churn {n}, round {round}, {label}: after the ADDs the IPAM holds the {good} addresses ({:?})",
            r.held_after_add
        ),
    );
    push_check(
        checks,
        usage_is(r.held_after_del, 0),
        format!(
            "churn {n}, round {round}, {label}: after the DELs the IPAM holds nothing ({:?})",
            r.held_after_del
        ),
    );
}

fn result(contender: Contender, n: usize, rounds: &[Round], phases: Samples) -> ChurnResult {
    let adds: Vec<&PluginRun> = rounds.iter().flat_map(|r| &r.adds).collect();
    let dels: Vec<&PluginRun> = rounds.iter().flat_map(|r| &r.dels).collect();
    let add_ok: Vec<f64> = adds
        .iter()
        .filter(|r| added(r))
        .map(|r| ms(r.elapsed))
        .collect();
    let del_ok: Vec<f64> = dels
        .iter()
        .filter(|r| r.ok())
        .map(|r| ms(r.elapsed))
        .collect();
    let add_walls: Vec<f64> = rounds.iter().map(|r| ms(r.add_wall)).collect();
    let del_walls: Vec<f64> = rounds.iter().map(|r| ms(r.del_wall)).collect();
    let duplicates = rounds
        .iter()
        .flat_map(|r| duplicates(&r.addresses()))
        .map(|a| a.to_string())
        .collect();
    let busy: Vec<f64> = rounds
        .iter()
        .filter_map(|r| r.add_cpu)
        .filter(|t| t.total > 0)
        .map(|t| t.busy as f64 / t.total as f64)
        .collect();
    let cpu_ms: Vec<f64> = rounds
        .iter()
        .filter_map(|r| r.add_cpu)
        .map(|t| t.busy as f64 * 1000.0 / ticks_per_second() / n.max(1) as f64)
        .collect();
    let per_add = |d: Duration| ms(d) / n.max(1) as f64;
    let plugin_cpu: Vec<f64> = rounds
        .iter()
        .filter_map(|r| r.adds.iter().map(|a| a.cpu).sum::<Option<Duration>>())
        .map(per_add)
        .collect();
    let daemon_cpu: Vec<f64> = rounds
        .iter()
        .filter_map(|r| r.add_daemon_cpu)
        .map(per_add)
        .collect();
    let last = rounds.last();
    ChurnResult {
        contender,
        concurrency: n,
        add_wall_ms: median(&add_walls).unwrap_or(0.0),
        add_walls_ms: add_walls,
        del_wall_ms: median(&del_walls).unwrap_or(0.0),
        del_walls_ms: del_walls,
        add: Summary::of(&add_ok),
        del: Summary::of(&del_ok),
        add_errors: adds.len() - add_ok.len(),
        del_errors: dels.len() - del_ok.len(),
        first_error: adds
            .iter()
            .chain(&dels)
            .find(|r| !r.ok())
            .map(|r| r.error_text()),
        duplicates,
        add_cpu_busy: median(&busy),
        add_cpu_ms_per_op: median(&cpu_ms),
        add_plugin_cpu_ms_per_op: median(&plugin_cpu),
        add_daemon_cpu_ms_per_op: median(&daemon_cpu),
        held_after_add: last.map_or_else(IpamUsage::default, |r| r.held_after_add),
        held_after_del: last.map_or_else(IpamUsage::default, |r| r.held_after_del),
        add_phases: phases.into_op("ADD"),
    }
}

/// Runs `f` on every pod (with its index) at once (a thread each, released
/// together); the results in pod order, the wall time from release to the
/// last one finished and the machine's CPU ticks over that time (`None`
/// when `/proc/stat` cannot be read).
fn concurrently<R: Send>(
    pods: &[Pod],
    f: impl Fn(usize, &Pod) -> Result<R, BenchError> + Sync,
) -> (Vec<Result<R, BenchError>>, Duration, Option<CpuTicks>) {
    let barrier = Barrier::new(pods.len() + 1);
    std::thread::scope(|s| {
        let handles: Vec<_> = pods
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let (f, barrier) = (&f, &barrier);
                s.spawn(move || {
                    barrier.wait();
                    f(i, p)
                })
            })
            .collect();
        let before = cpu::sample().ok();
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
        let wall = start.elapsed();
        let ticks = before.zip(cpu::sample().ok()).map(|(b, a)| CpuTicks {
            busy: a.busy.saturating_sub(b.busy),
            total: a.total.saturating_sub(b.total),
            steal: a.steal.saturating_sub(b.steal),
        });
        (results, wall, ticks)
    })
}
