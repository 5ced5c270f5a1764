//! [`PeerSync`] against mocked kernel tables: what it adds, replaces and
//! removes, in which order, in both routing modes.

use std::net::IpAddr;
use std::sync::Arc;

use mockall::Sequence;
use mockall::predicate::{always, eq};

use super::*;
use crate::cluster::ClusterNode;
use crate::cluster::traits::{MockOverlay, MockRouteTable, Underlay};
use crate::cluster::vxlan::{FdbEntry, NeighbourEntry, vtep_mac};
use crate::netlink::NetlinkError;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn node(name: &str, addr: &str, cidr: &str) -> ClusterNode {
    ClusterNode {
        name: name.into(),
        uid: format!("uid-{name}"),
        internal_ips: vec![ip(addr)],
        pod_cidrs: vec![cidr.parse().unwrap()],
    }
}

fn view(peers: Vec<ClusterNode>) -> ClusterView {
    ClusterView {
        local_name: "a".into(),
        local: Some(node("a", "172.30.0.11", "10.244.0.0/24")),
        peers,
    }
}

fn native(dst: &str, via: &str, dev: Option<u32>) -> PeerRoute {
    PeerRoute {
        dst: dst.parse().unwrap(),
        via: ip(via),
        dev,
        onlink: false,
    }
}

fn config(routing: RoutingMode) -> KubernetesConfig {
    KubernetesConfig {
        enabled: true,
        routing,
        ..KubernetesConfig::default()
    }
}

fn sync(routing: RoutingMode, routes: MockRouteTable, overlay: MockOverlay) -> PeerSync {
    PeerSync::new(
        config(routing),
        Some(1500),
        Arc::new(routes),
        Arc::new(overlay),
    )
}

fn overlay_without_device() -> MockOverlay {
    let mut overlay = MockOverlay::new();
    overlay
        .expect_remove_device()
        .with(eq(VXLAN_DEVICE))
        .times(1)
        .returning(|_| Ok(false));
    overlay.expect_remove_filter().times(1).returning(|| Ok(()));
    overlay
}

#[tokio::test]
async fn native_adds_missing_keeps_present_and_removes_stale_routes_in_that_order() {
    let mut routes = MockRouteTable::new();
    let mut seq = Sequence::new();
    routes
        .expect_peer_routes()
        .times(1)
        .in_sequence(&mut seq)
        .returning(|| {
            Ok(vec![
                native("10.244.1.0/24", "172.30.0.12", Some(2)),
                native("10.244.9.0/24", "172.30.0.19", Some(2)),
            ])
        });
    routes
        .expect_replace_route()
        .with(eq(native("10.244.2.0/24", "172.30.0.13", None)))
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_| Ok(()));
    routes
        .expect_delete_route()
        .with(eq(native("10.244.9.0/24", "172.30.0.19", Some(2))))
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_| Ok(()));
    let peers = sync(RoutingMode::Native, routes, overlay_without_device());
    let report = peers
        .sync(&view(vec![
            node("b", "172.30.0.12", "10.244.1.0/24"),
            node("c", "172.30.0.13", "10.244.2.0/24"),
        ]))
        .await
        .unwrap();
    assert_eq!(report.changed, ["route 10.244.2.0/24 via 172.30.0.13"]);
    assert_eq!(
        report.removed,
        ["route 10.244.9.0/24 via 172.30.0.19 dev #2"]
    );
    assert!(report.failed.is_empty() && !report.deferred);
}

#[tokio::test]
async fn a_moved_peer_is_replaced_in_place_never_deleted() {
    let mut routes = MockRouteTable::new();
    routes
        .expect_peer_routes()
        .returning(|| Ok(vec![native("10.244.1.0/24", "172.30.0.12", Some(2))]));
    routes
        .expect_replace_route()
        .with(eq(native("10.244.1.0/24", "172.30.0.42", None)))
        .times(1)
        .returning(|_| Ok(()));
    routes.expect_delete_route().never();
    let peers = sync(RoutingMode::Native, routes, overlay_without_device());
    let report = peers
        .sync(&view(vec![node("b", "172.30.0.42", "10.244.1.0/24")]))
        .await
        .unwrap();
    assert_eq!(report.changed.len(), 1);
}

#[tokio::test]
async fn a_restart_with_everything_in_place_changes_nothing() {
    let mut routes = MockRouteTable::new();
    routes
        .expect_peer_routes()
        .times(2)
        .returning(|| Ok(vec![native("10.244.1.0/24", "172.30.0.12", Some(2))]));
    routes.expect_replace_route().never();
    routes.expect_delete_route().never();
    // The VXLAN device of an earlier run is looked for once, not on every sync.
    let peers = sync(RoutingMode::Native, routes, overlay_without_device());
    let v = view(vec![node("b", "172.30.0.12", "10.244.1.0/24")]);
    for _ in 0..2 {
        let report = peers.sync(&v).await.unwrap();
        assert_eq!(report, SyncReport::default());
    }
}

#[tokio::test]
async fn one_failing_route_is_reported_and_the_others_still_go_in() {
    let mut routes = MockRouteTable::new();
    routes.expect_peer_routes().returning(|| Ok(vec![]));
    routes
        .expect_replace_route()
        .with(eq(native("10.244.1.0/24", "172.30.0.12", None)))
        .returning(|_| {
            Err(
                NetlinkError::from_errno("route replace", "10.244.1.0/24", libc::ENETUNREACH)
                    .into(),
            )
        });
    routes
        .expect_replace_route()
        .with(eq(native("10.244.2.0/24", "172.30.0.13", None)))
        .times(1)
        .returning(|_| Ok(()));
    let peers = sync(RoutingMode::Native, routes, overlay_without_device());
    let report = peers
        .sync(&view(vec![
            node("b", "172.30.0.12", "10.244.1.0/24"),
            node("c", "172.30.0.13", "10.244.2.0/24"),
        ]))
        .await
        .unwrap();
    assert_eq!(report.changed, ["route 10.244.2.0/24 via 172.30.0.13"]);
    assert_eq!(report.failed.len(), 1);
    assert!(
        report.failed[0].contains("ENETUNREACH"),
        "{:?}",
        report.failed
    );
}

#[tokio::test]
async fn a_table_that_cannot_be_listed_is_an_error_and_nothing_is_removed() {
    let mut routes = MockRouteTable::new();
    routes.expect_peer_routes().returning(|| {
        Err(NetlinkError::new("route dump", "main", rtnetlink::Error::RequestFailed).into())
    });
    routes.expect_replace_route().never();
    routes.expect_delete_route().never();
    let peers = sync(RoutingMode::Native, routes, overlay_without_device());
    assert!(peers.sync(&view(vec![])).await.is_err());
}

#[tokio::test]
async fn native_mode_removes_the_vxlan_device_of_an_earlier_run_then_its_filter() {
    let mut seq = Sequence::new();
    let mut overlay = MockOverlay::new();
    overlay
        .expect_remove_device()
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_| Ok(true));
    overlay
        .expect_remove_filter()
        .times(1)
        .in_sequence(&mut seq)
        .returning(|| Ok(()));
    let mut routes = MockRouteTable::new();
    routes.expect_peer_routes().returning(|| Ok(vec![]));
    let report = sync(RoutingMode::Native, routes, overlay)
        .sync(&view(vec![]))
        .await
        .unwrap();
    assert_eq!(report.removed, ["device sarena.vxlan"]);
}

#[tokio::test]
async fn vxlan_waits_for_the_local_node_and_touches_nothing_meanwhile() {
    let routes = MockRouteTable::new();
    let overlay = MockOverlay::new();
    let peers = sync(RoutingMode::Vxlan, routes, overlay);
    let mut v = view(vec![node("b", "172.30.0.12", "10.244.1.0/24")]);
    v.local = None;
    let report = peers.sync(&v).await.unwrap();
    assert!(report.deferred);
}

#[tokio::test]
async fn vxlan_sets_up_the_filter_and_the_device_then_fdb_and_neighbours_then_routes_then_removes_stale_ones()
 {
    let b_mac = vtep_mac(ip("172.30.0.12"));
    let gone_mac = vtep_mac(ip("172.30.0.19"));
    let mut seq = Sequence::new();
    let mut overlay = MockOverlay::new();
    let mut routes = MockRouteTable::new();
    overlay
        .expect_underlay()
        .with(eq(ip("172.30.0.11")), eq(None))
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_, _| {
            Ok(Underlay {
                name: "eth0".into(),
                index: 2,
                mtu: 1500,
            })
        });
    // The filter before the device: only b's underlay address gets through.
    overlay
        .expect_ensure_filter()
        .with(eq(VxlanFilter {
            port: 8472,
            underlay: "eth0".into(),
            peers: vec![ip("172.30.0.12")],
        }))
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_| Ok(()));
    overlay
        .expect_ensure_device()
        .withf(|d| {
            d.name == "sarena.vxlan"
                && d.vni == 1
                && d.port == 8472
                && d.local == ip("172.30.0.11")
                && d.underlay == 2
                && d.mtu == 1450
                && d.addresses == vec!["10.244.0.0/32".parse().unwrap()]
        })
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_| Ok(7));
    overlay
        .expect_fdb()
        .with(eq(7))
        .times(1)
        .in_sequence(&mut seq)
        .returning(move |_| {
            Ok(vec![FdbEntry {
                mac: gone_mac,
                dst: ip("172.30.0.19"),
            }])
        });
    overlay
        .expect_neighbours()
        .with(eq(7))
        .times(1)
        .in_sequence(&mut seq)
        .returning(move |_| {
            Ok(vec![NeighbourEntry {
                ip: ip("10.244.9.0"),
                mac: gone_mac,
            }])
        });
    overlay
        .expect_replace_fdb()
        .with(
            eq(7),
            eq(FdbEntry {
                mac: b_mac,
                dst: ip("172.30.0.12"),
            }),
        )
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_, _| Ok(()));
    overlay
        .expect_replace_neighbour()
        .with(
            eq(7),
            eq(NeighbourEntry {
                ip: ip("10.244.1.0"),
                mac: b_mac,
            }),
        )
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_, _| Ok(()));
    let stale_route = PeerRoute {
        dst: "10.244.9.0/24".parse().unwrap(),
        via: ip("10.244.9.0"),
        dev: Some(7),
        onlink: true,
    };
    let stale = stale_route.clone();
    routes
        .expect_peer_routes()
        .times(1)
        .in_sequence(&mut seq)
        .returning(move || Ok(vec![stale.clone()]));
    routes
        .expect_replace_route()
        .with(eq(PeerRoute {
            dst: "10.244.1.0/24".parse().unwrap(),
            via: ip("10.244.1.0"),
            dev: Some(7),
            onlink: true,
        }))
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_| Ok(()));
    routes
        .expect_delete_route()
        .with(eq(stale_route))
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_| Ok(()));
    overlay
        .expect_delete_neighbour()
        .with(eq(7), always())
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_, _| Ok(()));
    overlay
        .expect_delete_fdb()
        .with(
            eq(7),
            eq(FdbEntry {
                mac: gone_mac,
                dst: ip("172.30.0.19"),
            }),
        )
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_, _| Ok(()));
    let report = sync(RoutingMode::Vxlan, routes, overlay)
        .sync(&view(vec![node("b", "172.30.0.12", "10.244.1.0/24")]))
        .await
        .unwrap();
    assert_eq!(report.changed.len(), 3, "{report:?}");
    assert_eq!(report.removed.len(), 3, "{report:?}");
}

#[tokio::test]
async fn a_route_the_kernel_will_not_replace_in_place_is_removed_then_added() {
    let old = native("fd00:10:244:1::/64", "fd00::12", Some(2));
    let new = native("fd00:10:244:1::/64", "fd00::42", None);
    let mut seq = Sequence::new();
    let mut routes = MockRouteTable::new();
    let present = old.clone();
    routes
        .expect_peer_routes()
        .times(1)
        .in_sequence(&mut seq)
        .returning(move || Ok(vec![present.clone()]));
    routes
        .expect_replace_route()
        .with(eq(new.clone()))
        .times(1)
        .in_sequence(&mut seq)
        .returning(|r| Err(NetlinkError::from_errno("route replace", r, libc::EINVAL).into()));
    routes
        .expect_delete_route()
        .with(eq(old))
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_| Ok(()));
    routes
        .expect_replace_route()
        .with(eq(new))
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_| Ok(()));
    let mut moved = node("b", "fd00::42", "fd00:10:244:1::/64");
    moved.internal_ips = vec![ip("fd00::42")];
    let report = sync(RoutingMode::Native, routes, overlay_without_device())
        .sync(&view(vec![moved]))
        .await
        .unwrap();
    assert_eq!(report.changed.len(), 1, "{report:?}");
    assert!(report.failed.is_empty(), "{report:?}");
}
