use super::*;
use crate::api::{ApiErrorKind, Attachment, DaemonError, GcReport, MockDaemon};
use crate::cni::ErrorCode;
use crate::links::{HostLink, MockLinks};

fn link(ifname: String, ifindex: u32) -> HostLink {
    HostLink { ifname, ifindex }
}

fn a(id: &str) -> Attachment {
    Attachment {
        container_id: id.into(),
        ifname: "eth0".into(),
    }
}

#[tokio::test]
async fn gc_sends_the_valid_list_and_removes_only_stale_host_links() {
    let valid = vec![a("keep1"), a("keep2")];
    let stale = host_ifname("gone", "eth0");
    let mut d = MockDaemon::new();
    let expected = valid.clone();
    d.expect_gc()
        .withf(move |r| r.valid == expected)
        .times(1)
        .returning(|_| {
            Ok(GcReport {
                endpoints_removed: vec![a("gone")],
                ..Default::default()
            })
        });
    let mut l = MockLinks::new();
    let listed = vec![
        link(host_ifname("keep1", "eth0"), 3),
        link(stale.clone(), 4),
        link(host_ifname("keep2", "eth0"), 5),
    ];
    l.expect_list_host_links()
        .times(1)
        .return_once(move || Ok(listed));
    let s = stale.clone();
    l.expect_remove_host_link_index()
        .withf(move |i, n| *i == 4 && n == s)
        .times(1)
        .returning(|_, _| Ok(true));
    gc(&d, &l, &GcRequest { valid }).await.unwrap();
}

#[tokio::test]
async fn gc_links_ignore_non_sarena_names() {
    let mut d = MockDaemon::new();
    d.expect_gc()
        .times(1)
        .returning(|_| Ok(GcReport::default()));
    let mut l = MockLinks::new();
    l.expect_list_host_links()
        .times(1)
        .returning(|| Ok(vec![link("eth0".into(), 1), link("cni0".into(), 2)]));
    gc(&d, &l, &GcRequest { valid: vec![] }).await.unwrap();
}

#[tokio::test]
async fn gc_failures_are_collected_and_links_still_cleaned() {
    let mut d = MockDaemon::new();
    d.expect_gc()
        .times(1)
        .returning(|_| Err(DaemonError::api(ApiErrorKind::Internal, "db")));
    let mut l = MockLinks::new();
    l.expect_list_host_links()
        .times(1)
        .returning(|| Ok(vec![link(host_ifname("x", "eth0"), 7)]));
    l.expect_remove_host_link_index()
        .times(1)
        .returning(|_, _| Ok(true));
    let e = gc(&d, &l, &GcRequest { valid: vec![] }).await.unwrap_err();
    assert_eq!(e.step(), Some(Step::DaemonGc));
    assert_eq!(e.to_cni().code, ErrorCode::Daemon);
}

#[tokio::test]
async fn a_link_that_stopped_being_ours_is_no_error() {
    let mut d = MockDaemon::new();
    d.expect_gc()
        .times(1)
        .returning(|_| Ok(GcReport::default()));
    let mut l = MockLinks::new();
    l.expect_list_host_links()
        .times(1)
        .returning(|| Ok(vec![link(host_ifname("x", "eth0"), 7)]));
    l.expect_remove_host_link_index()
        .times(1)
        .returning(|_, n| {
            Err(LinkError::NotOurs {
                ifname: n.to_string(),
                group: 0,
            })
        });
    gc(&d, &l, &GcRequest { valid: vec![] }).await.unwrap();
}
