//! Lease expiry and deletion-queue replay, through the real daemon binary.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use sarena_core::api::{
    Allocation, Daemon, EndpointCreate, EndpointSpec, HttpDaemon, Inspect as _,
};
use sarena_core::plugin::DeleteQueue;
use sarena_test_support::daemon::{Site, alloc_req, owner};

fn endpoint_create(alloc: &Allocation) -> EndpointCreate {
    EndpointCreate {
        spec: EndpointSpec {
            netns: "/var/run/netns/lifecycle".into(),
            ..EndpointSpec::for_tests(
                alloc.owner.clone(),
                &format!("lxc{}", alloc.owner.container_id),
                alloc.addresses.iter().map(|a| a.address).collect(),
            )
        },
    }
}

async fn owners_allocated(d: &HttpDaemon) -> Vec<String> {
    let state = d.ipam_state().await.unwrap();
    state
        .allocations
        .into_iter()
        .map(|r| r.owner.container_id)
        .collect()
}

#[tokio::test]
async fn unclaimed_allocations_expire_claimed_ones_stay() {
    let site = Site::new();
    let config = site.config("lease_seconds = 1\n");
    let _daemon = site.start(&["--config", config.to_str().unwrap()]).await;
    let d = site.client();

    let started = Instant::now();
    let orphan = d.allocate(alloc_req("orphan")).await.unwrap();
    let lease = orphan
        .lease_expires_at
        .expect("an unclaimed allocation has a lease");
    let kept = d.allocate(alloc_req("kept")).await.unwrap();
    d.create_endpoint(endpoint_create(&kept)).await.unwrap();
    let state = d.ipam_state().await.unwrap();
    let kept_record = state
        .allocations
        .iter()
        .find(|r| r.owner == owner("kept"))
        .unwrap();
    assert_eq!(
        kept_record.lease_expires_at, None,
        "an endpoint ends the lease"
    );
    let orphan_record = state
        .allocations
        .iter()
        .find(|r| r.owner == owner("orphan"))
        .unwrap();
    assert_eq!(orphan_record.lease_expires_at, Some(lease));

    loop {
        let owners = owners_allocated(&d).await;
        if !owners.contains(&"orphan".to_owned()) {
            assert_eq!(owners, ["kept"]);
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "lease never expired"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The expired address is free again and the endpoint is untouched.
    assert!(d.endpoint(owner("kept")).await.unwrap().is_some());
    assert!(!d.release(owner("orphan")).await.unwrap());
    d.allocate(alloc_req("again")).await.unwrap();
}

#[tokio::test]
async fn deletion_queue_is_replayed_at_start_up() {
    let site = Site::new();
    let daemon = site.start(&[]).await;
    let d = site.client();
    for c in ["q1", "q2", "q3"] {
        let a = d.allocate(alloc_req(c)).await.unwrap();
        d.create_endpoint(endpoint_create(&a)).await.unwrap();
    }
    d.allocate(alloc_req("bare")).await.unwrap();
    assert_eq!(daemon.signal_and_wait(libc::SIGTERM).code(), Some(0));

    // DELs that ran while the daemon was down, queued the way the plugin does it
    // (default location: <state-dir>/delete-queue); one for an unknown attachment.
    let queue = DeleteQueue::new(site.state_dir().join("delete-queue"));
    for c in ["q1", "q3", "bare", "never-existed"] {
        queue.enqueue(&owner(c)).unwrap();
    }
    assert_eq!(queue.pending().unwrap().len(), 4);

    let _daemon = site.start(&[]).await;
    let endpoints: Vec<_> = d
        .endpoints()
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.spec.owner.container_id)
        .collect();
    assert_eq!(endpoints, ["q2"]);
    assert_eq!(owners_allocated(&d).await, ["q2"]);
    assert!(queue.is_empty().unwrap(), "replayed entries are removed");
}

#[tokio::test]
async fn deletion_queue_dir_can_be_moved() {
    let site = Site::new();
    let qdir = site.dir.path().join("elsewhere/queue");
    let queue = DeleteQueue::new(&qdir);
    let daemon = site
        .start(&["--delete-queue", qdir.to_str().unwrap()])
        .await;
    let d = site.client();
    let a = d.allocate(alloc_req("m1")).await.unwrap();
    d.create_endpoint(endpoint_create(&a)).await.unwrap();
    daemon.kill();
    queue.enqueue(&owner("m1")).unwrap();

    let _daemon = site
        .start(&["--delete-queue", qdir.to_str().unwrap()])
        .await;
    assert_eq!(d.endpoint(owner("m1")).await.unwrap(), None);
    assert!(queue.is_empty().unwrap());
}
