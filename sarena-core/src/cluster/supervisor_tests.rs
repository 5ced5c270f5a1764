//! [`Supervisor`] against mocks of the node state, peer routing and the API
//! server: what it opens, serves, refuses and marks, in which order.

use crate::api::{Daemon as _, Inspect as _};
use std::sync::{Arc, Mutex};

use mockall::Sequence;
use mockall::predicate::eq;

use super::*;
use crate::api::{Attachment, Endpoint, EndpointSpec, MockNodeApi};
use crate::cluster::traits::{MockClusterApi, MockNodeSessions, MockOverlay, MockPeerRouting};
use crate::cluster::{ClusterNode, SyncReport};

pub(super) fn local(cidrs: &[&str], uid: &str) -> ClusterNode {
    ClusterNode {
        name: "node1".into(),
        uid: uid.into(),
        internal_ips: vec!["172.30.0.11".parse().unwrap()],
        pod_cidrs: cidrs.iter().map(|c| c.parse().unwrap()).collect(),
    }
}

pub(super) fn view(local: Option<ClusterNode>) -> ClusterView {
    ClusterView {
        local_name: "node1".into(),
        local,
        peers: vec![],
    }
}

fn params(cidr: &str) -> SessionParams {
    SessionParams {
        pod_cidrs: vec![cidr.parse().unwrap()],
        mtu: 1500,
    }
}

fn endpoint(addr: &str) -> Endpoint {
    Endpoint {
        spec: EndpointSpec {
            owner: Attachment {
                container_id: "c1".into(),
                ifname: "eth0".into(),
            },
            pod: Default::default(),
            host_ifname: "lxc1".into(),
            host_ifindex: 5,
            host_mac: Default::default(),
            pod_mac: Default::default(),
            addresses: vec![addr.parse().unwrap()],
            netns: String::new(),
            bandwidth: None,
            identity: Default::default(),
        },
        created_at: 0,
    }
}

/// A node-state daemon whose endpoints are whatever `endpoints` holds.
pub(super) fn node_daemon(endpoints: Arc<Mutex<Vec<Endpoint>>>) -> Arc<dyn NodeApi> {
    let mut d = MockNodeApi::new();
    d.expect_endpoints()
        .returning(move || Ok(endpoints.lock().unwrap().clone()));
    d.expect_health().returning(|| {
        Ok(crate::api::Health {
            ready: true,
            message: "open".into(),
        })
    });
    Arc::new(d)
}

/// The uplink side: this node's addresses are `own`, the VXLAN filter has
/// dropped 5 packets.
pub(super) fn uplink(own: &[&str]) -> MockOverlay {
    let own: Vec<std::net::IpAddr> = own.iter().map(|s| s.parse().unwrap()).collect();
    let mut overlay = MockOverlay::new();
    overlay
        .expect_local_addresses()
        .returning(move || Ok(own.clone()));
    overlay.expect_vxlan_filter_drops().returning(|| {
        Ok(crate::cluster::FilterDrops {
            packets: 5,
            bytes: 500,
        })
    });
    overlay
}

fn supervisor(state: MockNodeSessions, peers: MockPeerRouting, api: MockClusterApi) -> Supervisor {
    Supervisor::new(SupervisorParts {
        node_name: "node1".into(),
        routing: RoutingMode::Native,
        mtu: Some(1500),
        uplink: Arc::new(uplink(&["172.30.0.11"])),
        underlay: None,
        egress: EgressParts::default(),
        network: NetworkCell::default(),
        state: Arc::new(state),
        peers: Arc::new(peers),
        api: Arc::new(api),
    })
}

pub(super) fn routes_ok() -> MockPeerRouting {
    let mut peers = MockPeerRouting::new();
    peers.expect_sync().returning(|_| Ok(SyncReport::default()));
    peers
}

#[tokio::test]
async fn waits_for_a_pod_cidr_then_opens_routes_and_marks_the_node_in_that_order() {
    let mut seq = Sequence::new();
    let mut state = MockNodeSessions::new();
    let mut peers = MockPeerRouting::new();
    let mut api = MockClusterApi::new();
    // Without a podCIDR: routes are still synced, nothing opened or marked.
    peers
        .expect_sync()
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_| Ok(SyncReport::default()));
    state
        .expect_open()
        .with(eq(params("10.244.1.0/24")))
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_| Ok(node_daemon(Arc::default())));
    peers
        .expect_sync()
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_| Ok(SyncReport::default()));
    api.expect_mark_network_available()
        .with(eq("node1"))
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_| Ok(()));
    peers
        .expect_sync()
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_| Ok(SyncReport::default()));
    let mut sup = supervisor(state, peers, api);
    let gate = sup.gate();

    assert!(sup.on_view(&view(Some(local(&[], "u1")))).await);
    let health = gate.health().await.unwrap();
    assert!(!health.ready);
    assert!(
        health.message.contains("node node1 has no spec.podCIDRs"),
        "{}",
        health.message
    );
    assert!(gate.config().await.is_err(), "ADD is refused");

    let with_cidr = view(Some(local(&["10.244.1.0/24"], "u1")));
    assert!(sup.on_view(&with_cidr).await);
    assert!(gate.health().await.unwrap().ready);
    // The same view again: nothing reopened, the Node not marked twice.
    assert!(sup.on_view(&with_cidr).await);
}

#[tokio::test]
async fn a_restart_reopens_the_last_session_closed_for_add_until_the_node_confirms_it() {
    let mut state = MockNodeSessions::new();
    state
        .expect_stored()
        .times(1)
        .returning(|| Ok(Some(params("10.244.1.0/24"))));
    state
        .expect_open()
        .with(eq(params("10.244.1.0/24")))
        .times(1)
        .returning(|_| Ok(node_daemon(Arc::default())));
    let mut api = MockClusterApi::new();
    api.expect_mark_network_available()
        .times(1)
        .returning(|_| Ok(()));
    let mut sup = supervisor(state, routes_ok(), api);
    let gate = sup.gate();
    sup.resume().await.unwrap();
    let health = gate.health().await.unwrap();
    assert!(
        !health.ready && health.message.contains("waiting for the Node node1"),
        "{}",
        health.message
    );
    assert!(
        sup.on_view(&view(Some(local(&["10.244.1.0/24"], "u1"))))
            .await
    );
    assert!(gate.health().await.unwrap().ready);
}

#[tokio::test]
async fn a_change_under_live_endpoints_is_refused_once_then_adopted_when_they_are_gone() {
    let endpoints = Arc::new(Mutex::new(vec![endpoint("10.244.1.5/24")]));
    let mut seq = Sequence::new();
    let mut state = MockNodeSessions::new();
    let eps = Arc::clone(&endpoints);
    state
        .expect_open()
        .with(eq(params("10.244.1.0/24")))
        .times(1)
        .in_sequence(&mut seq)
        .returning(move |_| Ok(node_daemon(Arc::clone(&eps))));
    state
        .expect_close()
        .times(1)
        .in_sequence(&mut seq)
        .returning(|| ());
    state
        .expect_open()
        .with(eq(params("10.244.7.0/24")))
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_| Ok(node_daemon(Arc::default())));
    let mut api = MockClusterApi::new();
    api.expect_mark_network_available()
        .times(2)
        .returning(|_| Ok(()));
    api.expect_warn()
        .withf(|node, reason, message| {
            node.name == "node1"
                && reason == REFUSED_EVENT_REASON
                && message.contains("from [10.244.1.0/24] to [10.244.7.0/24]")
        })
        .times(1)
        .returning(|_, _, _| Ok(()));
    let mut sup = supervisor(state, routes_ok(), api);
    let gate = sup.gate();
    assert!(
        sup.on_view(&view(Some(local(&["10.244.1.0/24"], "u1"))))
            .await
    );

    // The Node is re-created with another podCIDR while a pod lives.
    let moved = view(Some(local(&["10.244.7.0/24"], "u2")));
    for _ in 0..2 {
        assert!(!sup.on_view(&moved).await, "refused: retried soon");
        let health = gate.health().await.unwrap();
        assert!(
            !health.ready && health.message.contains("refusing to re-address"),
            "{}",
            health.message
        );
        let add = crate::api::AllocateRequest {
            owner: endpoint("10.244.7.9/24").spec.owner,
            pod: Default::default(),
            requested: vec![],
            pool: None,
        };
        assert!(gate.allocate(add).await.is_err());
        assert_eq!(
            gate.endpoints().await.unwrap().len(),
            1,
            "deletions are still served"
        );
    }
    endpoints.lock().unwrap().clear();
    assert!(sup.on_view(&moved).await);
    assert!(gate.health().await.unwrap().ready);
}

#[tokio::test]
async fn failed_routes_leave_the_node_unmarked_and_the_next_round_retries() {
    let mut state = MockNodeSessions::new();
    state
        .expect_open()
        .returning(|_| Ok(node_daemon(Arc::default())));
    let mut seq = Sequence::new();
    let mut peers = MockPeerRouting::new();
    peers
        .expect_sync()
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_| Err(ClusterError::WatchEnded));
    peers
        .expect_sync()
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_| Ok(SyncReport::default()));
    let mut api = MockClusterApi::new();
    api.expect_mark_network_available()
        .times(1)
        .returning(|_| Ok(()));
    let mut sup = supervisor(state, peers, api);
    let v = view(Some(local(&["10.244.1.0/24"], "u1")));
    assert!(!sup.on_view(&v).await, "not converged: retry soon");
    assert!(sup.on_view(&v).await);
}

#[tokio::test]
async fn a_deferred_overlay_leaves_the_node_unmarked() {
    let mut state = MockNodeSessions::new();
    state
        .expect_open()
        .returning(|_| Ok(node_daemon(Arc::default())));
    let mut peers = MockPeerRouting::new();
    peers.expect_sync().returning(|_| {
        Ok(SyncReport {
            deferred: true,
            ..SyncReport::default()
        })
    });
    let mut api = MockClusterApi::new();
    api.expect_mark_network_available().never();
    let mut sup = supervisor(state, peers, api);
    sup.on_view(&view(Some(local(&["10.244.1.0/24"], "u1"))))
        .await;
}

#[tokio::test]
async fn a_recreated_node_with_the_same_pod_cidr_is_marked_again_and_add_closes_meanwhile() {
    let mut state = MockNodeSessions::new();
    state
        .expect_open()
        .times(1)
        .returning(|_| Ok(node_daemon(Arc::default())));
    let mut api = MockClusterApi::new();
    api.expect_mark_network_available()
        .times(2)
        .returning(|_| Ok(()));
    let mut sup = supervisor(state, routes_ok(), api);
    let gate = sup.gate();
    sup.on_view(&view(Some(local(&["10.244.1.0/24"], "u1"))))
        .await;
    sup.on_view(&view(None)).await;
    let health = gate.health().await.unwrap();
    assert!(
        !health.ready && health.message.contains("does not exist"),
        "{}",
        health.message
    );
    sup.on_view(&view(Some(local(&["10.244.1.0/24"], "u2"))))
        .await;
    assert!(gate.health().await.unwrap().ready);
}

#[tokio::test]
async fn a_node_state_that_cannot_open_is_reported_in_health_and_retried() {
    let mut state = MockNodeSessions::new();
    let mut seq = Sequence::new();
    state
        .expect_open()
        .times(1)
        .in_sequence(&mut seq)
        .returning(|p| {
            Err(ClusterError::Open {
                pod_cidrs: format!("{:?}", p.pod_cidrs),
                source: "pool overlaps team-a".into(),
            })
        });
    state
        .expect_open()
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_| Ok(node_daemon(Arc::default())));
    let mut api = MockClusterApi::new();
    api.expect_mark_network_available()
        .times(1)
        .returning(|_| Ok(()));
    let mut sup = supervisor(state, routes_ok(), api);
    let gate = sup.gate();
    let v = view(Some(local(&["10.244.1.0/24"], "u1")));
    assert!(!sup.on_view(&v).await);
    let health = gate.health().await.unwrap();
    assert!(
        health.message.contains("pool overlaps team-a"),
        "{}",
        health.message
    );
    assert!(sup.on_view(&v).await);
}

#[tokio::test(start_paused = true)]
async fn run_follows_the_watch_and_ends_with_an_error_when_the_watcher_goes() {
    let mut state = MockNodeSessions::new();
    state
        .expect_open()
        .times(1)
        .returning(|_| Ok(node_daemon(Arc::default())));
    state.expect_close().times(1).returning(|| ());
    let mut api = MockClusterApi::new();
    api.expect_mark_network_available()
        .times(1)
        .returning(|_| Ok(()));
    let sup = supervisor(state, routes_ok(), api);
    let gate = sup.gate();
    let (tx, rx) = watch::channel(None);
    let task = tokio::spawn(sup.run(rx, std::future::pending()));
    tx.send(Some(view(Some(local(&["10.244.1.0/24"], "u1")))))
        .unwrap();
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert!(gate.health().await.unwrap().ready);
    drop(tx);
    let outcome = task.await.unwrap();
    assert!(
        matches!(outcome, Err(ClusterError::WatchEnded)),
        "{outcome:?}"
    );
}
