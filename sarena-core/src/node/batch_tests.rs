//! Group commit: concurrent mutations share one fsync, each answered only
//! once it is durable; a lost commit is answered as such and memory is the
//! store's again.

use std::collections::HashSet;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::api::{AllocateRequest, Allocation, Attachment, PodRef};
use crate::node::{NodeConfig, NodeError, Registry};

fn req(c: &str) -> AllocateRequest {
    AllocateRequest {
        owner: Attachment {
            container_id: c.into(),
            ifname: "eth0".into(),
        },
        pod: PodRef::default(),
        requested: vec![],
        pool: None,
    }
}

/// `n` allocations started while the test holds the state mutex: the first
/// caller leads and waits for the mutex, the other `n - 1` queue behind it.
/// Returns once they are all queued, the mutex still held by the caller.
fn queue_allocations(reg: &Registry, n: usize) -> Vec<JoinHandle<Result<Allocation, NodeError>>> {
    let handles: Vec<_> = (0..n)
        .map(|i| {
            let reg = reg.clone();
            std::thread::spawn(move || reg.inner.allocate(req(&format!("c{i}")), 1))
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(10);
    while reg.inner.batches.waiting() < n - 1 {
        assert!(Instant::now() < deadline, "the allocations did not queue");
        std::thread::sleep(Duration::from_millis(1));
    }
    handles
}

#[test]
fn concurrent_mutations_share_one_fsync_and_are_all_kept() {
    let dir = tempfile::tempdir().unwrap();
    let reg = Registry::open(dir.path(), NodeConfig::default()).unwrap();
    let before = reg.inner.commit_counts();
    let held = reg.inner.state.lock().unwrap();
    let handles = queue_allocations(&reg, 8);
    drop(held);
    let allocations: Vec<Allocation> = handles
        .into_iter()
        .map(|h| h.join().unwrap().unwrap())
        .collect();
    let after = reg.inner.commit_counts();
    // The leader's own allocation alone (one durable commit), then the
    // seven queued behind it: seven deferred commits and one flush.
    assert_eq!(after.transactions - before.transactions, 1 + 7 + 1);
    assert_eq!(after.durable_commits - before.durable_commits, 2);
    let addresses: HashSet<_> = allocations.iter().map(|a| a.addresses[0].address).collect();
    assert_eq!(addresses.len(), 8, "an address was handed out twice");
    drop(reg);
    let reopened = Registry::open(dir.path(), NodeConfig::default()).unwrap();
    assert_eq!(reopened.open_report().allocations, 8);
}

#[test]
fn a_lost_group_commit_answers_not_kept_and_memory_is_the_stores_again() {
    let dir = tempfile::tempdir().unwrap();
    let reg = Registry::open(dir.path(), NodeConfig::default()).unwrap();
    let held = reg.inner.state.lock().unwrap();
    let handles = queue_allocations(&reg, 4);
    reg.inner
        .batches
        .fail_next_flush
        .store(true, std::sync::atomic::Ordering::Relaxed);
    drop(held);
    let answers: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let kept = answers.iter().filter(|a| a.is_ok()).count();
    let lost: Vec<_> = answers.iter().filter_map(|a| a.as_ref().err()).collect();
    assert_eq!(
        kept, 1,
        "only the leader's own, committed alone: {answers:?}"
    );
    assert_eq!(lost.len(), 3, "{answers:?}");
    for e in &lost {
        assert!(
            matches!(e, NodeError::NotKept { reason } if reason.contains("injected")),
            "{e:?}"
        );
        assert_eq!(e.kind(), crate::api::ApiErrorKind::Unavailable);
    }
    // Memory was reloaded from the store: it holds what a restart would.
    let in_memory = reg.inner.ipam_state().unwrap().allocations;
    let snapshot = reg.inner.store.load().unwrap();
    assert_eq!(in_memory.len(), snapshot.allocations.len());
    assert!(!reg.inner.stale.load(std::sync::atomic::Ordering::Acquire));
    // And the registry goes on: a retried allocation is answered.
    let again = reg.inner.allocate(req("c-retry"), 2).unwrap();
    assert_eq!(again.owner.container_id, "c-retry");
}
