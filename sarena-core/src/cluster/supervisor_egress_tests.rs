//! [`Supervisor`]'s egress steps against mocks: the pods' MTU from the
//! uplink (and a change of it), the cluster's networks to the dataplane.

use std::sync::{Arc, Mutex};

use mockall::predicate::{always, eq};

use super::tests::{local, node_daemon, routes_ok, view};
use super::*;
use crate::api::MtuSource;
use crate::cluster::ClusterNode;
use crate::cluster::traits::{MockClusterApi, MockNodeSessions};
use crate::dataplane::{MockNodeUpdates, UpdateOutcome};

fn eth0(mtu: u32) -> Underlay {
    Underlay {
        name: "eth0".into(),
        index: 2,
        mtu,
    }
}

/// A supervisor in `routing` without a configured MTU, whose uplink's MTU
/// is what `uplink_mtu` holds, pushing to `updates`; its status cell.
fn supervisor(
    routing: RoutingMode,
    state: MockNodeSessions,
    uplink_mtu: Arc<Mutex<u32>>,
    updates: MockNodeUpdates,
) -> (Supervisor, NetworkCell) {
    let mut overlay = super::tests::uplink(&["172.30.0.11"]);
    overlay
        .expect_underlay()
        .with(
            eq("172.30.0.11".parse::<std::net::IpAddr>().unwrap()),
            eq(None),
        )
        .returning(move |_, _| Ok(eth0(*uplink_mtu.lock().unwrap())));
    let mut api = MockClusterApi::new();
    api.expect_mark_network_available().returning(|_| Ok(()));
    let network = NetworkCell::default();
    let sup = Supervisor::new(SupervisorParts {
        node_name: "node1".into(),
        routing,
        mtu: None,
        uplink: Arc::new(overlay),
        underlay: None,
        egress: EgressParts {
            masquerade: true,
            cluster_cidrs: Vec::new(),
            exempt: Vec::new(),
            updates: Some(Arc::new(updates)),
        },
        network: network.clone(),
        state: Arc::new(state),
        peers: Arc::new(routes_ok()),
        api: Arc::new(api),
    });
    (sup, network)
}

fn opened_with(mtus: Arc<Mutex<Vec<u32>>>) -> MockNodeSessions {
    let mut state = MockNodeSessions::new();
    state.expect_open().returning(move |p| {
        mtus.lock().unwrap().push(p.mtu);
        Ok(node_daemon(Arc::default()))
    });
    state.expect_close().returning(|| ());
    state
}

fn any_updates() -> MockNodeUpdates {
    let mut updates = MockNodeUpdates::new();
    updates
        .expect_apply()
        .with(always())
        .returning(|_| Ok(UpdateOutcome::Applied));
    updates
}

#[tokio::test]
async fn the_pods_mtu_follows_the_uplink_and_a_change_reopens_the_session() {
    let uplink = Arc::new(Mutex::new(9000));
    let opened = Arc::new(Mutex::new(Vec::new()));
    let (mut sup, network) = supervisor(
        RoutingMode::Vxlan,
        opened_with(opened.clone()),
        uplink.clone(),
        any_updates(),
    );
    let v = view(Some(local(&["10.244.1.0/24"], "u1")));
    assert!(sup.on_view(&v).await);
    assert!(sup.on_view(&v).await, "same uplink: kept");
    assert_eq!(*opened.lock().unwrap(), [8950]);
    let mtu = network.lock().unwrap().mtu.clone().unwrap();
    assert_eq!(
        (mtu.mtu, mtu.base, mtu.source),
        (8950, 9000, MtuSource::Uplink)
    );
    assert_eq!(mtu.uplink.as_deref(), Some("eth0"));
    *uplink.lock().unwrap() = 1400;
    assert!(sup.on_view(&v).await);
    assert_eq!(*opened.lock().unwrap(), [8950, 1350]);
    assert_eq!(network.lock().unwrap().mtu.as_ref().unwrap().mtu, 1350);
}

#[tokio::test]
async fn the_cluster_networks_go_to_the_dataplane_when_they_change() {
    let sent = Arc::new(Mutex::new(Vec::new()));
    let mut updates = MockNodeUpdates::new();
    let log = sent.clone();
    updates.expect_apply().returning(move |u| {
        if let NodeUpdate::ClusterNetworks(n) = u {
            log.lock().unwrap().push(n.clone());
        }
        Ok(UpdateOutcome::Applied)
    });
    let (mut sup, network) = supervisor(
        RoutingMode::Native,
        opened_with(Arc::default()),
        Arc::new(Mutex::new(1500)),
        updates,
    );
    let mut v = view(Some(local(&["10.244.1.0/24"], "u1")));
    assert!(sup.on_view(&v).await);
    assert!(sup.on_view(&v).await);
    v.peers.push(ClusterNode {
        name: "node2".into(),
        uid: "u2".into(),
        internal_ips: vec!["172.30.0.12".parse().unwrap()],
        pod_cidrs: vec!["10.244.2.0/24".parse().unwrap()],
    });
    assert!(sup.on_view(&v).await);
    let sent = sent.lock().unwrap();
    assert_eq!(sent.len(), 2, "sent once per change: {sent:?}");
    assert_eq!(sent[0].pod_cidrs.len(), 1);
    let last: Vec<String> = sent[1]
        .destinations()
        .iter()
        .map(|n| n.to_string())
        .collect();
    assert_eq!(
        last,
        [
            "10.244.1.0/24",
            "10.244.2.0/24",
            "172.30.0.11/32",
            "172.30.0.12/32"
        ]
    );
    let status = network.lock().unwrap().masquerade.clone().unwrap();
    assert!(status.enabled);
    let exempt: Vec<String> = status.exempt.iter().map(|n| n.to_string()).collect();
    assert_eq!(exempt, last, "the node's podCIDR is among the cluster's");
}

#[tokio::test]
async fn a_failed_update_is_retried() {
    let mut updates = MockNodeUpdates::new();
    let mut seq = mockall::Sequence::new();
    updates
        .expect_apply()
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_| {
            Err(crate::dataplane::DataplaneError::Command {
                command: "nft -f -",
                stderr: "busy".into(),
            })
        });
    updates
        .expect_apply()
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_| Ok(UpdateOutcome::Applied));
    let (mut sup, _) = supervisor(
        RoutingMode::Native,
        opened_with(Arc::default()),
        Arc::new(Mutex::new(1500)),
        updates,
    );
    let v = view(Some(local(&["10.244.1.0/24"], "u1")));
    assert!(!sup.on_view(&v).await, "not converged: the update failed");
    assert!(sup.on_view(&v).await);
}
