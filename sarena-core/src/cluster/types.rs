//! What Sarena needs to know of the cluster: the nodes, their addresses and
//! their podCIDRs, as [`ClusterView`] (built from the API server's Node
//! objects by `sarena-k8s`; any other source works the same).

use std::net::IpAddr;

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

/// One node of the cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterNode {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.uid`: tells a re-created Node of the same name apart.
    #[serde(default)]
    pub uid: String,
    /// `status.addresses` of type `InternalIP`, in the API's order.
    pub internal_ips: Vec<IpAddr>,
    /// `spec.podCIDRs` (or `spec.podCIDR`), at most one per family.
    pub pod_cidrs: Vec<IpNet>,
}

impl ClusterNode {
    /// The node's first `InternalIP` of the family of `like`.
    pub fn internal_ip_like(&self, like: IpAddr) -> Option<IpAddr> {
        self.internal_ips
            .iter()
            .copied()
            .find(|ip| ip.is_ipv4() == like.is_ipv4())
    }

    /// The node's underlay address: its first IPv4 `InternalIP`, else its
    /// first IPv6 one.
    pub fn underlay_ip(&self) -> Option<IpAddr> {
        self.internal_ips
            .iter()
            .copied()
            .find(IpAddr::is_ipv4)
            .or_else(|| self.internal_ips.first().copied())
    }
}

/// The cluster as this node sees it: itself (if its Node object exists) and
/// every other node.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterView {
    /// This node's name (what `--node-name` chose).
    pub local_name: String,
    /// This node's Node object, once it exists.
    pub local: Option<ClusterNode>,
    /// Every other node, sorted by name.
    pub peers: Vec<ClusterNode>,
}

/// How the podCIDRs of the other nodes are reached (`[kubernetes] routing`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RoutingMode {
    /// A route per peer podCIDR via the peer's `InternalIP`: the nodes must
    /// share one L2 segment (flannel host-gw's model). No encapsulation.
    #[default]
    Native,
    /// A kernel VXLAN device; per peer a forwarding entry to its
    /// `InternalIP`, a neighbour entry and a route through the device. Works
    /// over any IP underlay; costs 50 bytes of MTU (70 over IPv6).
    Vxlan,
}

impl RoutingMode {
    /// `native` or `vxlan`.
    pub fn as_str(self) -> &'static str {
        match self {
            RoutingMode::Native => "native",
            RoutingMode::Vxlan => "vxlan",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(ips: &[&str]) -> ClusterNode {
        ClusterNode {
            name: "n".into(),
            uid: String::new(),
            internal_ips: ips.iter().map(|s| s.parse().unwrap()).collect(),
            pod_cidrs: vec![],
        }
    }

    #[test]
    fn the_underlay_is_the_first_ipv4_internal_ip_else_the_first_ipv6_one() {
        let dual = node(&["fd00::12", "172.30.0.12", "172.30.0.99"]);
        assert_eq!(dual.underlay_ip(), Some("172.30.0.12".parse().unwrap()));
        assert_eq!(
            dual.internal_ip_like("fd00::1".parse().unwrap()),
            Some("fd00::12".parse().unwrap())
        );
        assert_eq!(
            node(&["fd00::12"]).underlay_ip(),
            Some("fd00::12".parse().unwrap())
        );
        assert_eq!(node(&[]).underlay_ip(), None);
        assert_eq!(
            node(&["fd00::12"]).internal_ip_like("10.0.0.1".parse().unwrap()),
            None
        );
    }
}
