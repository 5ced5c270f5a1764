//! Whole-stack chaos: the real `sarena-daemon` on the eBPF dataplane and the
//! real `sarena-cni`, driven as a busy node's runtime drives them, while
//! everything that can die does.
//!
//! Workers (one per slice of the pods, as a runtime serialises one pod's
//! operations) run ADD, CHECK, repeated ADD and DEL through the plugin
//! process on pods in throwaway netns; some plugin runs are SIGKILLed
//! mid-ADD or mid-DEL; the daemon is SIGKILLed at random points and kept
//! down for a few operations (DELs then go to the deletion queue) before it
//! comes back on the same state and pins. Along the way: every DEL not
//! killed succeeds, every ADD and CHECK with the daemon up throughout
//! succeeds, a repeated ADD keeps its address. Afterwards (the pods whose
//! fate is unknown DELed, as a runtime does, the daemon restarted so it
//! replays the queue; checked once before and once after a GC with the true
//! set of live attachments, so GC has nothing left to clean): no
//! address owned twice, none held by a gone pod, no orphan link (host or
//! pod side), map entry, filter, pin or owed removal, an empty deletion
//! queue, and every live pod reaches another.
//!
//! Size: 1,000 operations over 50 pods with 12 daemon kills by default (a
//! few minutes on two cores); `SARENA_CHAOS_LONG=1` runs 10,000 over 200
//! with 60; `SARENA_CHAOS_OPS`, `_PODS`, `_KILLS`, `_SEED` set each.
//!
//! Privileged: root and the eBPF object. The daemon's start-up sweep and the
//! final GC remove every marked link no endpoint of this daemon owns, so
//! nothing else that makes Sarena links may run alongside.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod pods;
mod verify;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use sarena_test_support::daemon::EbpfNode;
use sarena_test_support::{TestNetns, require, require_root};

use pods::{Pod, PodState, Shared};

const POOL: &str = "10.245.0.0/16";
const GATEWAY: &str = "10.245.0.1";
const WORKERS: usize = 4;
/// The share of plugin runs SIGKILLed mid-way.
const PLUGIN_KILL_RATIO: f64 = 0.06;

#[derive(Debug, Clone, Copy)]
struct Params {
    ops: usize,
    pods: usize,
    kills: usize,
    seed: u64,
}

impl Params {
    fn from_env() -> Params {
        let long = std::env::var("SARENA_CHAOS_LONG").is_ok_and(|v| v == "1");
        let (ops, pods, kills) = if long {
            (10_000, 200, 60)
        } else {
            (1_000, 50, 12)
        };
        let var = |name: &str, default: u64| {
            std::env::var(name)
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(default)
        };
        Params {
            ops: var("SARENA_CHAOS_OPS", ops as u64) as usize,
            pods: var("SARENA_CHAOS_PODS", pods as u64) as usize,
            kills: var("SARENA_CHAOS_KILLS", kills as u64) as usize,
            seed: var("SARENA_CHAOS_SEED", rand::random()),
        }
    }
}

fn preconditions(test: &str) {
    require_root(test);
    require(
        test,
        sarena_daemon::ebpf_object::ebpf_object().is_some(),
        "the daemon was built without the eBPF object (run scripts/setup-ebpf.sh)",
    );
}

/// Waits until `shared.finished` reaches `n` (or the workers are done).
async fn until_finished(shared: &Shared, n: usize, total: usize) {
    while shared.finished.load(Ordering::SeqCst) < n.min(total) {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "privileged: needs root and the eBPF object; run as root with --include-ignored (scripts/test.sh)"]
async fn chaos_loses_nothing_and_leaves_nothing_behind() {
    preconditions("chaos_loses_nothing_and_leaves_nothing_behind");
    let params = Params::from_env();
    eprintln!("chaos: {params:?}");
    let started = Instant::now();
    let mut rng = rand::rngs::StdRng::seed_from_u64(params.seed);
    let mut node = EbpfNode::start(POOL, GATEWAY, "").await;
    let namespaces: Vec<TestNetns> = (0..params.pods).map(|_| TestNetns::new()).collect();
    let shared = Arc::new(Shared::default());
    shared.up.store(true, Ordering::SeqCst);

    // The workers, each with its own pods.
    let mut slices: Vec<Vec<Pod>> = vec![Vec::new(); WORKERS];
    for (i, netns) in namespaces.iter().enumerate() {
        slices[i % WORKERS].push(Pod {
            netns: netns.path(),
            name: netns.name.clone(),
            att: sarena_core::api::Attachment {
                container_id: netns.name.clone(),
                ifname: "eth0".into(),
            },
            state: PodState::Absent,
        });
    }
    let workers: Vec<_> = slices
        .into_iter()
        .map(|pods| {
            let (cni, shared, seed) = (node.cni.clone(), shared.clone(), rng.random());
            std::thread::spawn(move || {
                pods::worker(cni, pods, shared, params.ops, PLUGIN_KILL_RATIO, seed)
            })
        })
        .collect();

    // The killer: SIGKILL at random operation counts (and a random moment
    // within), down for a few operations, back on the same state and pins.
    let mut at: Vec<usize> = (0..params.kills)
        .map(|_| rng.random_range(params.ops / 20..params.ops * 19 / 20))
        .collect();
    at.sort_unstable();
    let mut kills = 0;
    for threshold in at {
        until_finished(&shared, threshold, params.ops).await;
        tokio::time::sleep(Duration::from_micros(rng.random_range(0..20_000))).await;
        let down_for: i64 = rng.random_range(3..12);
        shared
            .down_budget
            .store(down_for as isize, Ordering::SeqCst);
        shared.up.store(false, Ordering::SeqCst);
        shared.epoch.fetch_add(1, Ordering::SeqCst);
        node.kill();
        kills += 1;
        // The operations allowed while down start and finish, then it comes back.
        let down = async {
            while shared.down_budget.load(Ordering::SeqCst) > 0
                && shared.finished.load(Ordering::SeqCst) < params.ops
            {
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            let started = shared.started.load(Ordering::SeqCst);
            until_finished(&shared, started, params.ops).await;
        };
        tokio::time::timeout(Duration::from_secs(10), down)
            .await
            .ok();
        node.ensure_running().await;
        shared.epoch.fetch_add(1, Ordering::SeqCst);
        shared.up.store(true, Ordering::SeqCst);
    }
    let mut pods: Vec<Pod> = Vec::new();
    for w in workers {
        pods.extend(
            tokio::task::spawn_blocking(move || w.join().unwrap())
                .await
                .unwrap(),
        );
    }
    let run_time = started.elapsed();

    verify::settle_and_verify(&mut node, &mut pods).await;

    let c = |a: &std::sync::atomic::AtomicUsize| a.load(Ordering::SeqCst);
    let ops = c(&shared.finished);
    eprintln!(
        "chaos: {ops} operations ({} ADD, {} CHECK, {} DEL) over {} pods in {run_time:?}; \
         {kills} daemon SIGKILLs; plugin SIGKILLed {} times mid-ADD and {} mid-DEL; \
         {} DELs while the daemon was down; {} ADDs failed (daemon down or queue busy); \
         {} repeated ADDs kept their address; {} CHECKs asserted; seed {}; total {:?}",
        c(&shared.adds),
        c(&shared.checks),
        c(&shared.dels),
        params.pods,
        c(&shared.plugin_kills_add),
        c(&shared.plugin_kills_del),
        c(&shared.dels_while_down),
        c(&shared.failed_adds),
        c(&shared.repeated_adds_checked),
        c(&shared.checks_asserted),
        params.seed,
        started.elapsed(),
    );
    assert!(ops >= params.ops, "only {ops} operations ran");
    assert_eq!(kills, params.kills);
    assert!(
        c(&shared.plugin_kills_add) > 0 && c(&shared.plugin_kills_del) > 0,
        "no plugin was killed mid-ADD or mid-DEL"
    );
    assert!(
        c(&shared.dels_while_down) > 0,
        "no DEL ran while the daemon was down"
    );
    drop(namespaces);
}
