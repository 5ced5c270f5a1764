//! What Kubernetes mode tells the dataplane and the status about traffic
//! leaving the pods (pure): the cluster's networks, never masqueraded, and
//! the pods' MTU from the uplink.

use std::net::IpAddr;

use ipnet::IpNet;

use super::pools::overhead;
use super::traits::Underlay;
use super::types::{ClusterNode, ClusterView, RoutingMode};
use crate::api::{MasqueradeStatus, MtuStatus};
use crate::dataplane::ClusterNetworks;

/// The cluster's networks in `view`: the pod CIDRs are `configured` when
/// given, else every Node's podCIDRs; and every Node's `InternalIP`s.
pub fn cluster_networks(view: &ClusterView, configured: &[IpNet]) -> ClusterNetworks {
    let nodes = || view.local.iter().chain(&view.peers);
    let mut pod_cidrs: Vec<IpNet> = if configured.is_empty() {
        nodes()
            .flat_map(|n| n.pod_cidrs.iter().map(IpNet::trunc))
            .collect()
    } else {
        configured.to_vec()
    };
    pod_cidrs.sort();
    pod_cidrs.dedup();
    let mut node_addresses: Vec<IpAddr> = nodes().flat_map(|n| n.internal_ips.clone()).collect();
    node_addresses.sort();
    node_addresses.dedup();
    let mut peer_pod_cidrs: Vec<IpNet> = view
        .peers
        .iter()
        .flat_map(|n| n.pod_cidrs.iter().map(IpNet::trunc))
        .collect();
    peer_pod_cidrs.sort();
    peer_pod_cidrs.dedup();
    ClusterNetworks {
        pod_cidrs,
        node_addresses,
        peer_pod_cidrs,
    }
}

/// The masquerading status: on or off, and every destination exempt (the
/// node's own podCIDRs, the configured exemptions, the cluster's networks),
/// merged.
pub fn masquerade_status(
    enabled: bool,
    own: &[IpNet],
    configured: &[IpNet],
    cluster: &ClusterNetworks,
) -> MasqueradeStatus {
    let all: Vec<IpNet> = own
        .iter()
        .chain(configured)
        .map(IpNet::trunc)
        .chain(cluster.destinations())
        .collect();
    MasqueradeStatus {
        enabled,
        exempt: IpNet::aggregate(&all),
    }
}

/// The pods' MTU for `local` under `routing`: `configured`, else `uplink`'s
/// (`None`: not found), less the routing mode's overhead.
pub fn session_mtu(
    local: Option<&ClusterNode>,
    routing: RoutingMode,
    configured: Option<u32>,
    uplink: Option<&Underlay>,
) -> MtuStatus {
    let overhead = overhead(routing, local.and_then(ClusterNode::underlay_ip));
    crate::uplink::mtu_status(configured, uplink, overhead)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, ip: &str, cidrs: &[&str]) -> ClusterNode {
        ClusterNode {
            name: name.into(),
            uid: String::new(),
            internal_ips: vec![ip.parse().unwrap()],
            pod_cidrs: cidrs.iter().map(|c| c.parse().unwrap()).collect(),
        }
    }

    fn view() -> ClusterView {
        ClusterView {
            local_name: "n1".into(),
            local: Some(node("n1", "172.30.0.11", &["10.244.1.0/24"])),
            peers: vec![
                node(
                    "n2",
                    "172.30.0.12",
                    &["10.244.2.0/24", "fd00:10:244:2::/64"],
                ),
                node("n3", "172.30.0.13", &[]),
            ],
        }
    }

    #[test]
    fn the_cluster_is_every_nodes_pod_cidrs_and_addresses_unless_configured() {
        let n = cluster_networks(&view(), &[]);
        let cidrs: Vec<String> = n.pod_cidrs.iter().map(|c| c.to_string()).collect();
        assert_eq!(
            cidrs,
            ["10.244.1.0/24", "10.244.2.0/24", "fd00:10:244:2::/64"]
        );
        assert_eq!(n.node_addresses.len(), 3);
        let configured: Vec<IpNet> = vec!["10.244.0.0/16".parse().unwrap()];
        let n = cluster_networks(&view(), &configured);
        assert_eq!(n.pod_cidrs, configured);
        assert_eq!(n.node_addresses.len(), 3, "nodes are never masqueraded");
        let all: Vec<String> = n.destinations().iter().map(|c| c.to_string()).collect();
        assert_eq!(
            all,
            [
                "10.244.0.0/16",
                "172.30.0.11/32",
                "172.30.0.12/31" // .12 and .13 merged
            ]
        );
    }

    #[test]
    fn the_status_lists_every_exempt_destination_merged() {
        let n = cluster_networks(&view(), &[]);
        let own: Vec<IpNet> = vec!["10.244.1.0/24".parse().unwrap()];
        let extra: Vec<IpNet> = vec!["192.168.0.0/16".parse().unwrap()];
        let s = masquerade_status(true, &own, &extra, &n);
        assert!(s.enabled);
        let exempt: Vec<String> = s.exempt.iter().map(|c| c.to_string()).collect();
        assert_eq!(
            exempt,
            [
                "10.244.1.0/24",
                "10.244.2.0/24",
                "172.30.0.11/32",
                "172.30.0.12/31",
                "192.168.0.0/16",
                "fd00:10:244:2::/64"
            ]
        );
    }

    #[test]
    fn the_mtu_follows_the_uplink_less_vxlan() {
        let local = node("n1", "172.30.0.11", &["10.244.1.0/24"]);
        let eth0 = Underlay {
            name: "eth0".into(),
            index: 2,
            mtu: 9000,
        };
        let s = session_mtu(Some(&local), RoutingMode::Vxlan, None, Some(&eth0));
        assert_eq!((s.mtu, s.overhead), (8950, 50));
        let s = session_mtu(Some(&local), RoutingMode::Native, None, Some(&eth0));
        assert_eq!(s.mtu, 9000);
        let s = session_mtu(Some(&local), RoutingMode::Vxlan, Some(1400), Some(&eth0));
        assert_eq!(s.mtu, 1350);
    }
}
