use std::path::{Path, PathBuf};

use super::*;
use crate::api::{ApiErrorKind, DaemonError, Deleted, MockDaemon};
use crate::cni::ErrorCode;
use crate::links::MockLinks;
use crate::plugin::test_support::*;

fn req(netns: Option<&str>) -> DelRequest {
    DelRequest {
        attachment: att(),
        netns: netns.map(PathBuf::from),
    }
}

/// The daemon's answer when it leaves the veth to the plugin.
fn answer(deleted: bool) -> Deleted {
    Deleted {
        deleted,
        veth_removal: false,
    }
}

fn links_ok(existed: bool, with_netns: bool) -> MockLinks {
    let mut l = MockLinks::new();
    l.expect_remove_host_link()
        .withf(|n| n == host())
        .times(1)
        .returning(move |_| Ok(existed));
    if with_netns {
        l.expect_remove_pod_link()
            .withf(|netns, ifname| netns == Path::new(NETNS) && ifname == "eth0")
            .times(1)
            .returning(move |_, _| Ok(existed));
        expect_release(&mut l, 1);
    }
    l
}

/// The netns is released `times` times.
fn expect_release(l: &mut MockLinks, times: usize) {
    l.expect_release_netns()
        .withf(|netns| netns == Path::new(NETNS))
        .times(times)
        .return_const(());
}

#[tokio::test]
async fn del_deletes_the_endpoint_and_both_links() {
    let mut d = MockDaemon::new();
    d.expect_delete_endpoint_and_veth()
        .withf(|a| a == &att())
        .times(1)
        .returning(|_| Ok(answer(true)));
    del(&d, &links_ok(true, true), None, &req(Some(NETNS)))
        .await
        .unwrap();
}

#[tokio::test]
async fn del_is_idempotent() {
    let mut d = MockDaemon::new();
    d.expect_delete_endpoint_and_veth()
        .times(2)
        .returning(|_| Ok(answer(false)));
    let mut l = MockLinks::new();
    l.expect_remove_host_link()
        .times(2)
        .returning(|_| Ok(false));
    l.expect_remove_pod_link()
        .times(2)
        .returning(|_, _| Ok(false));
    expect_release(&mut l, 2);
    del(&d, &l, None, &req(Some(NETNS))).await.unwrap();
    del(&d, &l, None, &req(Some(NETNS))).await.unwrap();
}

#[tokio::test]
async fn del_without_netns_skips_the_pod_side() {
    let mut d = MockDaemon::new();
    d.expect_delete_endpoint_and_veth()
        .times(1)
        .returning(|_| Ok(answer(true)));
    del(&d, &links_ok(true, false), None, &req(None))
        .await
        .unwrap();
}

#[tokio::test]
async fn del_with_the_netns_gone_succeeds() {
    let mut d = MockDaemon::new();
    d.expect_delete_endpoint_and_veth()
        .times(1)
        .returning(|_| Ok(answer(true)));
    let mut l = MockLinks::new();
    l.expect_remove_host_link()
        .times(1)
        .returning(|_| Ok(false));
    l.expect_remove_pod_link()
        .times(1)
        .returning(|_, _| Err(netns_gone()));
    expect_release(&mut l, 1);
    del(&d, &l, None, &req(Some(NETNS))).await.unwrap();
}

#[tokio::test]
async fn unreachable_daemon_queues_the_deletion_and_del_succeeds() {
    let dir = tempfile::tempdir().unwrap();
    let q = DeleteQueue::new(dir.path().join("q"));
    let mut d = MockDaemon::new();
    d.expect_delete_endpoint_and_veth()
        .times(1)
        .returning(|_| Err(unreachable()));
    del(&d, &links_ok(true, true), Some(&q), &req(Some(NETNS)))
        .await
        .unwrap();
    assert_eq!(q.pending().unwrap(), vec![att()]);
}

#[tokio::test]
async fn unreachable_daemon_without_a_queue_is_try_again_later_after_local_cleanup() {
    let mut d = MockDaemon::new();
    d.expect_delete_endpoint_and_veth()
        .times(1)
        .returning(|_| Err(unreachable()));
    let e = del(&d, &links_ok(true, true), None, &req(Some(NETNS)))
        .await
        .unwrap_err();
    assert_eq!(e.to_cni().code, ErrorCode::TryAgainLater);
}

#[tokio::test]
async fn a_full_queue_is_reported_after_local_cleanup() {
    let dir = tempfile::tempdir().unwrap();
    let q = DeleteQueue::new(dir.path()).with_capacity(0);
    let mut d = MockDaemon::new();
    d.expect_delete_endpoint_and_veth()
        .times(1)
        .returning(|_| Err(unreachable()));
    let e = del(&d, &links_ok(true, true), Some(&q), &req(Some(NETNS)))
        .await
        .unwrap_err();
    assert_eq!(e.step(), Some(Step::EnqueueDeletion));
    assert_eq!(e.to_cni().code, ErrorCode::Io);
}

#[tokio::test]
async fn all_failures_are_collected_and_every_step_still_runs() {
    let mut d = MockDaemon::new();
    d.expect_delete_endpoint_and_veth()
        .times(1)
        .returning(|_| Err(DaemonError::api(ApiErrorKind::Internal, "db locked")));
    let mut l = MockLinks::new();
    l.expect_remove_host_link()
        .times(1)
        .returning(|_| Err(netlink("link del")));
    l.expect_remove_pod_link()
        .times(1)
        .returning(|_, _| Err(netlink("link del")));
    expect_release(&mut l, 1);
    let e = del(&d, &l, None, &req(Some(NETNS))).await.unwrap_err();
    let PluginError::Several { errors, .. } = &e else {
        panic!("{e:?}")
    };
    let steps: Vec<_> = errors.iter().filter_map(PluginError::step).collect();
    assert_eq!(
        steps,
        vec![
            Step::DeleteEndpoint,
            Step::RemoveHostLink,
            Step::RemovePodLink
        ]
    );
    let cni = e.to_cni();
    assert_eq!(cni.code, ErrorCode::Daemon);
    assert!(
        cni.details.contains("db locked") && cni.details.contains("EPERM"),
        "{}",
        cni.details
    );
}

#[tokio::test]
async fn invalid_request_touches_nothing() {
    let (d, l) = (MockDaemon::new(), MockLinks::new());
    let mut r = req(None);
    r.attachment.ifname = "a/b".into();
    let e = del(&d, &l, None, &r).await.unwrap_err();
    assert_eq!(e.to_cni().code, ErrorCode::InvalidEnvironment);
}

#[tokio::test]
async fn a_daemon_that_removes_the_veth_leaves_the_links_alone() {
    let mut d = MockDaemon::new();
    d.expect_delete_endpoint_and_veth()
        .withf(|a| a == &att())
        .times(1)
        .returning(|_| {
            Ok(Deleted {
                deleted: true,
                veth_removal: true,
            })
        });
    // No expectation on the links but the netns's release: any other call
    // would fail the test.
    let mut l = MockLinks::new();
    expect_release(&mut l, 1);
    del(&d, &l, None, &req(Some(NETNS))).await.unwrap();
}

#[tokio::test]
async fn the_netns_is_released_after_the_links_are_removed() {
    let mut seq = mockall::Sequence::new();
    let mut d = MockDaemon::new();
    d.expect_delete_endpoint_and_veth()
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_| Ok(answer(true)));
    let mut l = MockLinks::new();
    l.expect_remove_host_link()
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_| Ok(true));
    l.expect_remove_pod_link()
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_, _| Ok(false));
    l.expect_release_netns()
        .withf(|netns| netns == Path::new(NETNS))
        .times(1)
        .in_sequence(&mut seq)
        .return_const(());
    del(&d, &l, None, &req(Some(NETNS))).await.unwrap();
}

#[tokio::test]
async fn links_that_are_not_sarenas_are_left_alone_without_failing_del() {
    let mut d = MockDaemon::new();
    d.expect_delete_endpoint_and_veth()
        .times(1)
        .returning(|_| Ok(answer(false)));
    let not_ours = |ifname: &str| LinkError::NotOurs {
        ifname: ifname.to_string(),
        group: 0,
    };
    let mut l = MockLinks::new();
    l.expect_remove_host_link()
        .times(1)
        .returning(move |n| Err(not_ours(n)));
    l.expect_remove_pod_link()
        .times(1)
        .returning(move |_, n| Err(not_ours(n)));
    expect_release(&mut l, 1);
    del(&d, &l, None, &req(Some(NETNS))).await.unwrap();
}
