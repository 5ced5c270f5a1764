//! The pods of the chaos run and what a runtime does to them: ADD, CHECK and
//! DEL through the real plugin, some killed mid-way, each outcome checked
//! against what the pod's history promises.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicIsize, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use rand::Rng;
use sarena_core::api::Attachment;
use sarena_test_support::Cni;

/// What the runtime knows of one pod.
#[derive(Debug, Clone)]
pub enum PodState {
    /// Never attached, or its last DEL succeeded.
    Absent,
    /// Its last ADD succeeded with this result.
    Live {
        /// The address (CIDR) the ADD answered.
        address: String,
        /// The whole result (CHECK's `prevResult`).
        result: serde_json::Value,
    },
    /// Its last ADD or DEL failed or was killed: a runtime DELs it later.
    Unknown,
}

/// One pod: its netns and attachment, and what is known of it.
#[derive(Debug, Clone)]
pub struct Pod {
    /// `CNI_NETNS`.
    pub netns: PathBuf,
    /// Its netns's name (for `ip netns exec`).
    pub name: String,
    /// `CNI_CONTAINERID` / `CNI_IFNAME`.
    pub att: Attachment,
    /// What the runtime knows.
    pub state: PodState,
}

/// What every worker and the killer share.
#[derive(Debug, Default)]
pub struct Shared {
    /// Operations started.
    pub started: AtomicUsize,
    /// Operations finished.
    pub finished: AtomicUsize,
    /// Bumped at every daemon kill and every return.
    pub epoch: AtomicU64,
    /// The daemon is serving.
    pub up: AtomicBool,
    /// How many more operations may start while the daemon is down; at 0
    /// the workers wait for it (a runtime's retries are not that eager).
    pub down_budget: AtomicIsize,
    /// Counts, for the report.
    pub adds: AtomicUsize,
    pub checks: AtomicUsize,
    pub dels: AtomicUsize,
    pub dels_while_down: AtomicUsize,
    pub plugin_kills_add: AtomicUsize,
    pub plugin_kills_del: AtomicUsize,
    pub failed_adds: AtomicUsize,
    pub repeated_adds_checked: AtomicUsize,
    pub checks_asserted: AtomicUsize,
}

/// The daemon was up at `before` (epoch, up) and nothing happened to it since.
fn undisturbed(shared: &Shared, before: (u64, bool)) -> bool {
    before.1 && shared.up.load(Ordering::SeqCst) && shared.epoch.load(Ordering::SeqCst) == before.0
}

fn snapshot(shared: &Shared) -> (u64, bool) {
    (
        shared.epoch.load(Ordering::SeqCst),
        shared.up.load(Ordering::SeqCst),
    )
}

/// Runs the plugin and SIGKILLs it after a random few milliseconds.
fn killed(cni: &Cni, command: &str, pod: &Pod, rng: &mut impl Rng) {
    let netns = Some(pod.netns.as_path());
    let mut child = cni.spawn(command, &pod.att, netns);
    std::thread::sleep(Duration::from_micros(rng.random_range(0..25_000)));
    let _ = child.kill();
    let _ = child.wait();
}

/// ADD (or a repeated ADD of a live pod, which must keep its address).
pub fn add(cni: &Cni, pod: &mut Pod, shared: &Shared, kill_ratio: f64, rng: &mut impl Rng) {
    shared.adds.fetch_add(1, Ordering::SeqCst);
    if rng.random_bool(kill_ratio) {
        killed(cni, "ADD", pod, rng);
        shared.plugin_kills_add.fetch_add(1, Ordering::SeqCst);
        pod.state = PodState::Unknown;
        return;
    }
    let before = snapshot(shared);
    let run = cni.add(&pod.att, &pod.netns);
    if !run.ok {
        shared.failed_adds.fetch_add(1, Ordering::SeqCst);
        // Refused while its queued DEL waits for a replay another plugin
        // process holds the queue for: a runtime retries.
        let pending = run
            .stdout
            .contains("a deletion of this attachment is queued");
        assert!(
            pending || !undisturbed(shared, before),
            "ADD of {} failed with the daemon up throughout: {run:?}",
            pod.name
        );
        pod.state = PodState::Unknown;
        return;
    }
    let result = run.json();
    let address = result["ips"][0]["address"].as_str().unwrap().to_string();
    if let PodState::Live { address: was, .. } = &pod.state {
        assert_eq!(
            &address, was,
            "a repeated ADD of {} changed its address",
            pod.name
        );
        shared.repeated_adds_checked.fetch_add(1, Ordering::SeqCst);
    }
    pod.state = PodState::Live { address, result };
}

/// CHECK of a live pod: must pass whenever the daemon was up throughout.
pub fn check(cni: &Cni, pod: &Pod, shared: &Shared) {
    let PodState::Live { result, .. } = &pod.state else {
        return;
    };
    shared.checks.fetch_add(1, Ordering::SeqCst);
    let before = snapshot(shared);
    let run = cni.check(&pod.att, &pod.netns, result);
    if undisturbed(shared, before) {
        assert!(run.ok, "CHECK of live pod {} failed: {run:?}", pod.name);
        shared.checks_asserted.fetch_add(1, Ordering::SeqCst);
    }
}

/// DEL: must succeed unless killed, daemon up or not (it queues).
pub fn del(cni: &Cni, pod: &mut Pod, shared: &Shared, kill_ratio: f64, rng: &mut impl Rng) {
    shared.dels.fetch_add(1, Ordering::SeqCst);
    if !shared.up.load(Ordering::SeqCst) {
        shared.dels_while_down.fetch_add(1, Ordering::SeqCst);
    }
    if rng.random_bool(kill_ratio) {
        killed(cni, "DEL", pod, rng);
        shared.plugin_kills_del.fetch_add(1, Ordering::SeqCst);
        pod.state = PodState::Unknown;
        return;
    }
    let run = cni.del(&pod.att, Some(&pod.netns));
    assert!(run.ok, "DEL of {} failed: {run:?}", pod.name);
    pod.state = PodState::Absent;
}

/// One worker: operations on its own pods (a runtime serialises the
/// operations of one pod) until `total` have started.
pub fn worker(
    cni: Cni,
    mut pods: Vec<Pod>,
    shared: Arc<Shared>,
    total: usize,
    kill_ratio: f64,
    seed: u64,
) -> Vec<Pod> {
    use rand::SeedableRng;
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    loop {
        while !shared.up.load(Ordering::SeqCst)
            && shared.down_budget.fetch_sub(1, Ordering::SeqCst) <= 0
        {
            std::thread::sleep(Duration::from_millis(5));
        }
        if shared.started.fetch_add(1, Ordering::SeqCst) >= total {
            break;
        }
        let i = rng.random_range(0..pods.len());
        let pod = &mut pods[i];
        let roll: f64 = rng.random();
        match pod.state {
            PodState::Absent if roll < 0.9 => add(&cni, pod, &shared, kill_ratio, &mut rng),
            PodState::Absent => del(&cni, pod, &shared, kill_ratio, &mut rng),
            PodState::Live { .. } if roll < 0.3 => check(&cni, pod, &shared),
            PodState::Live { .. } if roll < 0.45 => add(&cni, pod, &shared, kill_ratio, &mut rng),
            PodState::Live { .. } => del(&cni, pod, &shared, kill_ratio, &mut rng),
            PodState::Unknown if roll < 0.7 => del(&cni, pod, &shared, kill_ratio, &mut rng),
            PodState::Unknown => add(&cni, pod, &shared, kill_ratio, &mut rng),
        }
        shared.finished.fetch_add(1, Ordering::SeqCst);
    }
    pods
}
