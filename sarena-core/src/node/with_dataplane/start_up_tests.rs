//! [`WithDataplane::start_up`]'s steps, in order, against mocks.

use std::sync::Arc;

use mockall::Sequence;

use super::*;
use crate::api::{EndpointSpec, MockNodeApi, PodRef};
use crate::dataplane::{DataplaneMode, MockDataplane};
use crate::links::MockLinks;
use crate::node::{MockVethLedger, OwedRemoval};

fn endpoint(cid: &str, ifname: &str, ifindex: u32) -> Endpoint {
    Endpoint {
        spec: EndpointSpec {
            owner: Attachment {
                container_id: cid.into(),
                ifname: "eth0".into(),
            },
            pod: PodRef::default(),
            host_ifname: ifname.into(),
            host_ifindex: ifindex,
            host_mac: "02:00:00:00:00:01".parse().unwrap(),
            pod_mac: "02:00:00:00:00:02".parse().unwrap(),
            addresses: vec!["10.200.0.9/16".parse().unwrap()],
            netns: "/var/run/netns/x".into(),
            bandwidth: None,
            identity: Default::default(),
        },
        created_at: 1,
    }
}

fn owed(ifname: &str, ifindex: u32) -> OwedRemoval {
    OwedRemoval {
        host_ifname: ifname.into(),
        host_ifindex: ifindex,
    }
}

#[tokio::test]
async fn stale_endpoints_then_owed_removals_then_unowned_links_then_reconcile() {
    let mut seq = Sequence::new();
    let (mut registry, mut dataplane) = (MockNodeApi::new(), MockDataplane::new());
    let (mut links, mut ledger) = (MockLinks::new(), MockVethLedger::new());
    dataplane.expect_mode().return_const(DataplaneMode::Ebpf);
    let live = endpoint("live", "lxclive", 10);
    let gone = endpoint("gone", "lxcgone", 11);
    let renamed = endpoint("renamed", "lxcrenamed", 12);
    let listed = vec![live.clone(), gone.clone(), renamed.clone()];
    registry
        .expect_endpoints()
        .times(1)
        .in_sequence(&mut seq)
        .return_once(move || Ok(listed));
    // 1. Each endpoint's veth looked up by name; only the one with the same
    // index is live.
    for (name, found) in [
        ("lxclive", Some(10)),
        ("lxcgone", None),
        ("lxcrenamed", Some(99)),
    ] {
        links
            .expect_host_link_index()
            .withf(move |n| n == name)
            .times(1)
            .in_sequence(&mut seq)
            .returning(move |_| Ok(found));
        if found != Some(10) {
            let cid = if name == "lxcgone" { "gone" } else { "renamed" };
            registry
                .expect_delete_endpoint()
                .withf(move |o| o.container_id == cid)
                .times(1)
                .in_sequence(&mut seq)
                .returning(|_| Ok(true));
        }
    }
    // 2. Owed removals: one done, one foreign (settled), one failing (kept).
    ledger
        .expect_owed_removals()
        .times(1)
        .in_sequence(&mut seq)
        .returning(|| {
            Ok(vec![
                owed("lxcold", 5),
                owed("lxcforeign", 6),
                owed("lxcbusy", 7),
            ])
        });
    links
        .expect_remove_host_link_index()
        .withf(|i, _| *i == 5)
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_, _| Ok(true));
    links
        .expect_remove_host_link_index()
        .withf(|i, _| *i == 6)
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_, n| {
            Err(LinkError::NotOurs {
                ifname: n.into(),
                group: 0,
            })
        });
    links
        .expect_remove_host_link_index()
        .withf(|i, _| *i == 7)
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_, n| {
            Err(LinkError::Netlink(crate::NetlinkError::from_errno(
                "link del",
                n,
                libc::EBUSY,
            )))
        });
    ledger
        .expect_settle_removals()
        .withf(|done| *done == vec![owed("lxcold", 5), owed("lxcforeign", 6)])
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_| Ok(()));
    // 3. Marked links nobody owns (the renamed endpoint's included) go.
    links
        .expect_list_host_links()
        .times(1)
        .in_sequence(&mut seq)
        .returning(|| {
            Ok(vec![
                HostLink {
                    ifname: "lxclive".into(),
                    ifindex: 10,
                },
                HostLink {
                    ifname: "lxcrenamed".into(),
                    ifindex: 99,
                },
            ])
        });
    links
        .expect_remove_host_link_index()
        .withf(|i, n| *i == 99 && n == "lxcrenamed")
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_, _| Ok(true));
    // 4. The dataplane reconciles with the live endpoint only.
    let expected = vec![live.clone()];
    dataplane
        .expect_reconcile()
        .withf(move |e| e == expected.as_slice())
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_| Ok(ReconcileReport::default()));
    let daemon = WithDataplane::new(Arc::new(registry), Arc::new(dataplane))
        .with_veth_removal(Arc::new(links), Arc::new(ledger));
    let report = daemon.start_up().await.unwrap();
    assert_eq!(
        report.stale_endpoints,
        vec![gone.spec.owner.clone(), renamed.spec.owner.clone()]
    );
    assert_eq!(report.endpoints, 1);
    assert_eq!(report.owed_removals_done, 2);
    assert_eq!(report.unowned_links_removed, vec!["lxcrenamed".to_string()]);
}

#[tokio::test]
async fn without_veth_removal_only_the_dataplane_reconciles() {
    let (mut registry, mut dataplane) = (MockNodeApi::new(), MockDataplane::new());
    dataplane.expect_mode().return_const(DataplaneMode::Kernel);
    let listed = vec![endpoint("a", "lxca", 3)];
    let expected = listed.clone();
    registry.expect_endpoints().return_once(move || Ok(listed));
    registry.expect_delete_endpoint().never();
    dataplane
        .expect_reconcile()
        .withf(move |e| e == expected.as_slice())
        .times(1)
        .returning(|_| Ok(ReconcileReport::default()));
    let report = WithDataplane::new(Arc::new(registry), Arc::new(dataplane))
        .start_up()
        .await
        .unwrap();
    assert_eq!(
        report,
        StartUpReport {
            endpoints: 1,
            ..StartUpReport::default()
        }
    );
}

#[tokio::test]
async fn a_failing_link_lookup_fails_start_up_before_anything_is_deleted() {
    let (mut registry, mut dataplane) = (MockNodeApi::new(), MockDataplane::new());
    let (mut links, ledger) = (MockLinks::new(), MockVethLedger::new());
    dataplane.expect_mode().return_const(DataplaneMode::Ebpf);
    let listed = vec![endpoint("a", "lxca", 3)];
    registry.expect_endpoints().return_once(move || Ok(listed));
    registry.expect_delete_endpoint().never();
    links.expect_host_link_index().returning(|n| {
        Err(LinkError::Netlink(crate::NetlinkError::from_errno(
            "link get",
            n,
            libc::ENOBUFS,
        )))
    });
    dataplane.expect_reconcile().never();
    let err = WithDataplane::new(Arc::new(registry), Arc::new(dataplane))
        .with_veth_removal(Arc::new(links), Arc::new(ledger))
        .start_up()
        .await
        .unwrap_err();
    assert!(matches!(err, StartUpError::Links(_)), "{err}");
}
