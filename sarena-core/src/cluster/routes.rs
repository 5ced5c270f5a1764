//! Routes to the other nodes' podCIDRs: [`PeerRoute`] and the routes a
//! [`ClusterView`] asks for in each routing mode (pure).
//!
//! Peer routes carry their own route protocol,
//! [`SARENA_PEER_ROUTE_PROTOCOL`] (`ip route show proto 91`), apart from the
//! per-pod host routes of the kernel dataplane (proto 90,
//! [`crate::dataplane::kernel::routes::SARENA_ROUTE_PROTOCOL`]): each
//! reconciler lists and removes only routes of its own protocol, so neither
//! ever touches the other's routes, nor anyone else's.

use std::net::IpAddr;

use ipnet::IpNet;

use super::cidr_set::{CidrSet, overlaps};
use super::types::{ClusterNode, ClusterView};

/// The `proto` of Sarena's routes to peer podCIDRs.
pub const SARENA_PEER_ROUTE_PROTOCOL: u8 = 91;

/// A route to a peer's podCIDR, in the main table.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PeerRoute {
    /// The peer's podCIDR.
    pub dst: IpNet,
    /// The next hop: the peer's `InternalIP` (native) or its VTEP address (vxlan).
    pub via: IpAddr,
    /// The output device, when the route names one (vxlan); the kernel
    /// picks it for native routes.
    pub dev: Option<u32>,
    /// `onlink`: the next hop is on the device whatever its addresses (vxlan).
    pub onlink: bool,
}

impl PeerRoute {
    /// Whether the route `present` in the kernel is this route: same
    /// destination, next hop and `onlink`, and the same device when this
    /// route names one.
    pub fn is_met_by(&self, present: &PeerRoute) -> bool {
        self.dst == present.dst
            && self.via == present.via
            && self.onlink == present.onlink
            && self.dev.is_none_or(|dev| present.dev == Some(dev))
    }
}

impl std::fmt::Display for PeerRoute {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} via {}", self.dst, self.via)?;
        if let Some(dev) = self.dev {
            write!(f, " dev #{dev}")?;
        }
        if self.onlink {
            f.write_str(" onlink")?;
        }
        Ok(())
    }
}

/// The peers whose podCIDRs can be routed, each podCIDR once: a podCIDR
/// that overlaps this node's own, or one an earlier peer (by name) already
/// claims, is skipped and reported (`skipped`).
pub fn routable_peers<'a>(
    view: &'a ClusterView,
    skipped: &mut Vec<String>,
) -> Vec<(&'a ClusterNode, IpNet)> {
    let own: Vec<IpNet> = view
        .local
        .iter()
        .flat_map(|l| l.pod_cidrs.clone())
        .collect();
    let mut seen = CidrSet::new();
    let mut out = Vec::new();
    let mut peers: Vec<&ClusterNode> = view.peers.iter().collect();
    peers.sort_by(|a, b| a.name.cmp(&b.name));
    for peer in peers {
        for cidr in &peer.pod_cidrs {
            let cidr = cidr.trunc();
            if own.iter().any(|o| overlaps(o, &cidr)) {
                skipped.push(format!(
                    "podCIDR {cidr} of node {} overlaps this node's own",
                    peer.name
                ));
            } else if seen.overlapping(&cidr).is_some() {
                skipped.push(format!(
                    "podCIDR {cidr} of node {} overlaps another node's",
                    peer.name
                ));
            } else {
                seen.insert(cidr);
                out.push((peer, cidr));
            }
        }
    }
    out
}

/// Native routing: each peer podCIDR via the peer's `InternalIP` of the
/// same family. A podCIDR without one is skipped and reported.
pub fn native_routes(view: &ClusterView, skipped: &mut Vec<String>) -> Vec<PeerRoute> {
    let mut routes = Vec::new();
    for (peer, cidr) in routable_peers(view, skipped) {
        match peer.internal_ip_like(cidr.addr()) {
            Some(via) => routes.push(PeerRoute {
                dst: cidr,
                via,
                dev: None,
                onlink: false,
            }),
            None => skipped.push(format!(
                "node {} has no InternalIP of the family of its podCIDR {cidr}",
                peer.name
            )),
        }
    }
    routes.sort();
    routes
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn node(name: &str, ips: &[&str], cidrs: &[&str]) -> ClusterNode {
        ClusterNode {
            name: name.into(),
            uid: format!("uid-{name}"),
            internal_ips: ips.iter().map(|s| s.parse().unwrap()).collect(),
            pod_cidrs: cidrs.iter().map(|s| s.parse().unwrap()).collect(),
        }
    }

    fn route(dst: &str, via: &str) -> PeerRoute {
        PeerRoute {
            dst: dst.parse().unwrap(),
            via: via.parse().unwrap(),
            dev: None,
            onlink: false,
        }
    }

    #[test]
    fn native_routes_each_peer_cidr_via_its_internal_ip_of_that_family() {
        let view = ClusterView {
            local_name: "a".into(),
            local: Some(node("a", &["172.30.0.11"], &["10.244.0.0/24"])),
            peers: vec![
                node(
                    "c",
                    &["172.30.0.13", "fd00::13"],
                    &["10.244.2.0/24", "fd00:10:244:2::/64"],
                ),
                node(
                    "b",
                    &["172.30.0.12"],
                    &["10.244.1.0/24", "fd00:10:244:1::/64"],
                ),
                node("d", &["172.30.0.14"], &[]),
            ],
        };
        let mut skipped = Vec::new();
        let routes = native_routes(&view, &mut skipped);
        assert_eq!(
            routes,
            vec![
                route("10.244.1.0/24", "172.30.0.12"),
                route("10.244.2.0/24", "172.30.0.13"),
                route("fd00:10:244:2::/64", "fd00::13"),
            ]
        );
        assert_eq!(skipped.len(), 1);
        assert!(
            skipped[0].contains("node b has no InternalIP"),
            "{skipped:?}"
        );
    }

    #[test]
    fn overlapping_pod_cidrs_are_skipped_not_routed() {
        let view = ClusterView {
            local_name: "a".into(),
            local: Some(node("a", &["172.30.0.11"], &["10.244.0.0/24"])),
            peers: vec![
                node("b", &["172.30.0.12"], &["10.244.0.0/25"]),
                node("c", &["172.30.0.13"], &["10.244.5.0/24"]),
                node("d", &["172.30.0.14"], &["10.244.5.0/24"]),
            ],
        };
        let mut skipped = Vec::new();
        let routes = native_routes(&view, &mut skipped);
        assert_eq!(routes, vec![route("10.244.5.0/24", "172.30.0.13")]);
        assert_eq!(skipped.len(), 2, "{skipped:?}");
        assert!(
            skipped[0].contains("node b overlaps this node's own"),
            "{skipped:?}"
        );
        assert!(
            skipped[1].contains("node d overlaps another node's"),
            "{skipped:?}"
        );
    }

    #[test]
    fn a_route_is_met_by_the_kernels_copy_with_the_device_it_chose() {
        let want = route("10.244.1.0/24", "172.30.0.12");
        let mut present = want.clone();
        present.dev = Some(2);
        assert!(want.is_met_by(&present));
        present.via = "172.30.0.99".parse().unwrap();
        assert!(!want.is_met_by(&present));
        let vx = PeerRoute {
            dev: Some(7),
            onlink: true,
            ..want.clone()
        };
        assert!(!vx.is_met_by(&PeerRoute {
            dev: Some(8),
            ..vx.clone()
        }));
        assert!(!vx.is_met_by(&want));
        assert_eq!(
            vx.to_string(),
            "10.244.1.0/24 via 172.30.0.12 dev #7 onlink"
        );
    }
}
