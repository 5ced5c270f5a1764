//! The registry over a state store whose disk fills up and empties again:
//! writes fail cleanly (nothing half written, in memory or on disk), health
//! says not ready and why, and once space is back the same registry writes
//! again: no reopen by the caller, no restart. The disk is a small tmpfs of
//! the test's own.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use sarena_core::api::{AllocateRequest, ApiErrorKind, Attachment, Daemon, Inspect as _};
use sarena_core::node::{NodeConfig, Registry};
use sarena_test_support::{Tmpfs, require_root};

/// ADDs tried on the full disk before giving up on seeing one fail.
const MAX_TRIES: usize = 40;

fn request(n: usize) -> AllocateRequest {
    AllocateRequest {
        owner: Attachment {
            container_id: format!("disk{n}"),
            ifname: "eth0".into(),
        },
        pod: Default::default(),
        requested: vec![],
        pool: None,
    }
}

async fn owners(node: &Registry) -> Vec<String> {
    let state = node.ipam_state().await.unwrap();
    state
        .allocations
        .into_iter()
        .map(|r| r.owner.container_id)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "privileged: needs root; run as root with --include-ignored (scripts/test.sh)"]
async fn a_full_disk_fails_writes_cleanly_and_the_store_writes_again_once_space_is_back() {
    require_root("a_full_disk_fails_writes_cleanly...");
    let fs = Tmpfs::new(1 << 20);
    let state_dir = fs.path().join("state");
    let node = Registry::open(&state_dir, NodeConfig::default()).unwrap();
    node.allocate(request(0)).await.unwrap();

    let filler = fs.fill("filler");
    let mut failed = None;
    for n in 1..=MAX_TRIES {
        if let Err(e) = node.allocate(request(n)).await {
            failed = Some((n, e));
            break;
        }
    }
    let (failed, error) = failed.expect("every allocation succeeded on a full disk");
    let text = sarena_core::error_chain(&error);
    assert_eq!(error.kind(), Some(ApiErrorKind::Unavailable), "{text}");
    assert!(text.contains("No space left"), "{text}");
    let health = node.health().await.unwrap();
    assert!(!health.ready, "ready on a full disk: {health:?}");
    assert!(health.message.contains("state store"), "{health:?}");
    let before: Vec<String> = (0..failed).map(|n| format!("disk{n}")).collect();
    assert_eq!(owners(&node).await, before, "the failed allocation is held");

    std::fs::remove_file(&filler).unwrap();
    node.allocate(request(failed)).await.unwrap();
    let health = node.health().await.unwrap();
    assert!(health.ready, "not ready once space is back: {health:?}");

    // What the store holds is what was acknowledged, no more.
    let mut acknowledged = before;
    acknowledged.push(format!("disk{failed}"));
    drop(node);
    let node = Registry::open(&state_dir, NodeConfig::default()).unwrap();
    assert_eq!(owners(&node).await, acknowledged);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "privileged: needs root; run as root with --include-ignored (scripts/test.sh)"]
async fn health_recovers_with_no_write_in_between() {
    require_root("health_recovers_with_no_write_in_between");
    let fs = Tmpfs::new(1 << 20);
    let node = Registry::open(&fs.path().join("state"), NodeConfig::default()).unwrap();
    let filler = fs.fill("filler");
    let mut refused = false;
    for n in 0..MAX_TRIES {
        if node.allocate(request(n)).await.is_err() {
            refused = true;
            break;
        }
    }
    assert!(refused, "every allocation succeeded on a full disk");
    assert!(!node.health().await.unwrap().ready);
    std::fs::remove_file(&filler).unwrap();
    // Readiness comes back by itself: health tries a write.
    let health = node.health().await.unwrap();
    assert!(health.ready, "{health:?}");
}
