//! The supervisor with an untrusted peer: kept out of peer routing,
//! reported once (Event on its Node, count by reason), shown in the status
//! with the VXLAN filter's counter.

use std::sync::{Arc, Mutex};

use super::super::tests::{local, node_daemon, uplink, view};
use super::*;
use crate::cluster::traits::{MockClusterApi, MockNodeSessions, MockPeerRouting};
use crate::cluster::{ClusterNode, EgressParts, SupervisorParts, SyncReport};
use crate::node::NetworkCell;

fn peer(name: &str, ip: &str, cidr: &str) -> ClusterNode {
    ClusterNode {
        name: name.into(),
        uid: format!("uid-{name}"),
        internal_ips: vec![ip.parse().unwrap()],
        pod_cidrs: vec![cidr.parse().unwrap()],
    }
}

#[tokio::test]
async fn a_hostile_peer_is_not_routed_and_is_reported_once() {
    let synced: Arc<Mutex<Vec<ClusterView>>> = Arc::default();
    let mut peers = MockPeerRouting::new();
    let seen = synced.clone();
    peers.expect_sync().returning(move |v| {
        seen.lock().unwrap().push(v.clone());
        Ok(SyncReport::default())
    });
    let mut api = MockClusterApi::new();
    api.expect_mark_network_available().returning(|_| Ok(()));
    // One Event, on the hostile Node, for two rounds.
    api.expect_warn()
        .withf(|node, reason, message| {
            node.name == "evil"
                && reason == PEER_REJECTED_EVENT_REASON
                && message.contains("own_address")
        })
        .times(1)
        .returning(|_, _, _| Ok(()));
    let mut state = MockNodeSessions::new();
    state
        .expect_open()
        .returning(|_| Ok(node_daemon(Arc::default())));
    let network = NetworkCell::default();
    let mut sup = Supervisor::new(SupervisorParts {
        node_name: "node1".into(),
        routing: RoutingMode::Vxlan,
        mtu: Some(1500),
        uplink: Arc::new(uplink(&["172.30.0.11", "192.168.9.1"])),
        underlay: None,
        egress: EgressParts::default(),
        network: network.clone(),
        state: Arc::new(state),
        peers: Arc::new(peers),
        api: Arc::new(api),
    });
    let good = peer("good", "172.30.0.12", "10.244.2.0/24");
    let mut v = view(Some(local(&["10.244.1.0/24"], "u1")));
    // An address of this node that is no InternalIP of its Node.
    v.peers = vec![good.clone(), peer("evil", "192.168.9.1", "10.244.3.0/24")];
    sup.on_view(&v).await;
    sup.on_view(&v).await;
    for routed in synced.lock().unwrap().iter() {
        assert_eq!(routed.peers, vec![good.clone()]);
    }
    let status = network.lock().unwrap().clone();
    let peers = status.peers.unwrap();
    assert_eq!(peers.rejected.len(), 1);
    assert_eq!(
        (
            peers.rejected[0].node.as_str(),
            peers.rejected[0].reason.as_str()
        ),
        ("evil", "own_address")
    );
    assert_eq!(peers.rejections.get("own_address"), Some(&1));
    assert_eq!(status.vxlan_filter.unwrap().dropped_packets, 5);
}
