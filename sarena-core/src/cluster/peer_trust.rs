//! Which peers are trusted (pure): [`screen_peers`] keeps out of the
//! [`ClusterView`] every peer whose Node object would make this node route
//! somewhere it must not, and says why ([`RejectedPeer`]).
//!
//! A Node's `InternalIP` and podCIDRs are written by whoever may patch the
//! Node (its kubelet, and any holder of `nodes/status`): one compromised
//! node could otherwise point every other node's routes or FDB entries at
//! itself, at this node, or at the pods' own networks. A peer is rejected
//! (not routed, no FDB entry, not let through the VXLAN filter, not a
//! masquerading exemption) when
//! - an `InternalIP` is unspecified, loopback, link-local, multicast or the
//!   broadcast address, one of this node's own addresses, or inside a pod
//!   network (the configured cluster CIDRs, this node's podCIDRs, an
//!   accepted peer's podCIDR);
//! - a podCIDR lies outside the configured cluster CIDRs (none configured:
//!   is wider than this node's podCIDR of its family, as the controller
//!   manager gives every node the same size), holds one of this node's
//!   addresses, overlaps this node's podCIDRs or an accepted peer's (the
//!   first by name is accepted).

use std::net::IpAddr;

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

use super::cidr_set::{CidrSet, overlaps};
use super::types::{ClusterNode, ClusterView};

/// Why a peer is rejected; [`RejectReason::as_str`] is the metric label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RejectReason {
    /// An `InternalIP` is `0.0.0.0` or `::`.
    UnspecifiedAddress,
    /// An `InternalIP` is a loopback address.
    LoopbackAddress,
    /// An `InternalIP` is link-local (169.254.0.0/16, fe80::/10).
    LinkLocalAddress,
    /// An `InternalIP` is multicast.
    MulticastAddress,
    /// An `InternalIP` is 255.255.255.255.
    BroadcastAddress,
    /// An `InternalIP` is one of this node's addresses.
    OwnAddress,
    /// An `InternalIP` lies in a pod network.
    AddressInPodNetwork,
    /// A podCIDR lies outside the configured cluster CIDRs.
    PodCidrOutsideCluster,
    /// A podCIDR is wider than this node's (no cluster CIDRs configured).
    PodCidrTooWide,
    /// A podCIDR holds one of this node's addresses.
    PodCidrHoldsNodeAddress,
    /// A podCIDR overlaps this node's own.
    OwnPodCidr,
    /// A podCIDR overlaps an accepted peer's.
    OverlappingPodCidr,
}

impl RejectReason {
    /// Every reason (the metric's label values).
    pub const ALL: [RejectReason; 12] = [
        RejectReason::UnspecifiedAddress,
        RejectReason::LoopbackAddress,
        RejectReason::LinkLocalAddress,
        RejectReason::MulticastAddress,
        RejectReason::BroadcastAddress,
        RejectReason::OwnAddress,
        RejectReason::AddressInPodNetwork,
        RejectReason::PodCidrOutsideCluster,
        RejectReason::PodCidrTooWide,
        RejectReason::PodCidrHoldsNodeAddress,
        RejectReason::OwnPodCidr,
        RejectReason::OverlappingPodCidr,
    ];

    /// `own_address`, `pod_cidr_outside_cluster`, …
    pub fn as_str(self) -> &'static str {
        match self {
            RejectReason::UnspecifiedAddress => "unspecified_address",
            RejectReason::LoopbackAddress => "loopback_address",
            RejectReason::LinkLocalAddress => "link_local_address",
            RejectReason::MulticastAddress => "multicast_address",
            RejectReason::BroadcastAddress => "broadcast_address",
            RejectReason::OwnAddress => "own_address",
            RejectReason::AddressInPodNetwork => "address_in_pod_network",
            RejectReason::PodCidrOutsideCluster => "pod_cidr_outside_cluster",
            RejectReason::PodCidrTooWide => "pod_cidr_too_wide",
            RejectReason::PodCidrHoldsNodeAddress => "pod_cidr_holds_node_address",
            RejectReason::OwnPodCidr => "own_pod_cidr",
            RejectReason::OverlappingPodCidr => "overlapping_pod_cidr",
        }
    }
}

/// A peer kept out of the view, and why.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct RejectedPeer {
    /// The peer's name.
    pub node: String,
    /// Its uid.
    pub uid: String,
    /// The first reason found.
    pub reason: RejectReason,
    /// The address or podCIDR at fault, and what it collides with.
    pub detail: String,
}

impl RejectedPeer {
    /// The log line and Event message.
    pub fn message(&self, local: &str) -> String {
        format!(
            "node {local} does not route to node {}: {} ({}); fix the Node object",
            self.node,
            self.detail,
            self.reason.as_str()
        )
    }
}

/// What a peer is checked against.
#[derive(Debug, Clone, Copy)]
pub struct TrustAnchors<'a> {
    /// Every address of this node (its devices' and its Node's `InternalIP`s).
    pub own_addresses: &'a [IpAddr],
    /// The configured cluster CIDRs (`cluster_cidrs`; may be empty).
    pub cluster_cidrs: &'a [IpNet],
}

/// What is wrong with `ip` on its own (not its relation to pod networks).
fn address_fault(ip: IpAddr, own: &[IpAddr]) -> Option<RejectReason> {
    let ip = ip.to_canonical();
    let link_local = match ip {
        IpAddr::V4(v4) => v4.is_link_local(),
        IpAddr::V6(v6) => v6.is_unicast_link_local(),
    };
    if ip.is_unspecified() {
        Some(RejectReason::UnspecifiedAddress)
    } else if ip.is_loopback() {
        Some(RejectReason::LoopbackAddress)
    } else if link_local {
        Some(RejectReason::LinkLocalAddress)
    } else if ip.is_multicast() {
        Some(RejectReason::MulticastAddress)
    } else if matches!(ip, IpAddr::V4(v4) if v4.is_broadcast()) {
        Some(RejectReason::BroadcastAddress)
    } else if own.iter().any(|o| o.to_canonical() == ip) {
        Some(RejectReason::OwnAddress)
    } else {
        None
    }
}

/// The first pod network (`holding`: the one holding an address) that
/// holds one of `peer`'s addresses.
fn address_in(
    peer: &ClusterNode,
    holding: impl Fn(IpAddr) -> Option<IpNet>,
) -> Option<RejectedPeer> {
    peer.internal_ips.iter().find_map(|ip| {
        let ip = ip.to_canonical();
        holding(ip).map(|net| {
            rejected(
                peer,
                RejectReason::AddressInPodNetwork,
                format!("InternalIP {ip} lies in the pod network {net}"),
            )
        })
    })
}

fn rejected(peer: &ClusterNode, reason: RejectReason, detail: String) -> RejectedPeer {
    RejectedPeer {
        node: peer.name.clone(),
        uid: peer.uid.clone(),
        reason,
        detail,
    }
}

/// Why `cidr` of `peer` is not acceptable beside this node (`local`'s
/// podCIDRs) and the peers already accepted.
fn cidr_fault(
    peer: &ClusterNode,
    cidr: &IpNet,
    local: &[IpNet],
    accepted: &CidrSet,
    anchors: TrustAnchors<'_>,
) -> Option<RejectedPeer> {
    let fault = |reason, detail: String| Some(rejected(peer, reason, detail));
    let family = |n: &&IpNet| matches!(n, IpNet::V4(_)) == matches!(cidr, IpNet::V4(_));
    if !anchors.cluster_cidrs.is_empty() {
        if !anchors.cluster_cidrs.iter().any(|c| c.contains(cidr)) {
            return fault(
                RejectReason::PodCidrOutsideCluster,
                format!("podCIDR {cidr} lies outside the cluster CIDRs"),
            );
        }
    } else if let Some(own) = local.iter().find(family)
        && cidr.prefix_len() < own.prefix_len()
    {
        return fault(
            RejectReason::PodCidrTooWide,
            format!("podCIDR {cidr} is wider than this node's {own}"),
        );
    }
    if let Some(ip) = anchors.own_addresses.iter().find(|ip| cidr.contains(*ip)) {
        return fault(
            RejectReason::PodCidrHoldsNodeAddress,
            format!("podCIDR {cidr} holds this node's address {ip}"),
        );
    }
    if let Some(own) = local.iter().find(|o| overlaps(o, cidr)) {
        return fault(
            RejectReason::OwnPodCidr,
            format!("podCIDR {cidr} overlaps this node's {own}"),
        );
    }
    accepted.overlapping(cidr).and_then(|a| {
        fault(
            RejectReason::OverlappingPodCidr,
            format!("podCIDR {cidr} overlaps another node's {a}"),
        )
    })
}

/// `view` without the peers it must not trust, and those peers (see the
/// module's docs). Peers are taken in name order, so the same view always
/// gives the same answer.
pub fn screen_peers(
    view: &ClusterView,
    anchors: TrustAnchors<'_>,
) -> (ClusterView, Vec<RejectedPeer>) {
    let local: Vec<IpNet> = view
        .local
        .iter()
        .flat_map(|l| l.pod_cidrs.iter().map(IpNet::trunc))
        .collect();
    let pod_networks: Vec<IpNet> = anchors
        .cluster_cidrs
        .iter()
        .chain(&local)
        .copied()
        .collect();
    let mut peers: Vec<&ClusterNode> = view.peers.iter().collect();
    peers.sort_by(|a, b| a.name.cmp(&b.name));
    let mut rejections = Vec::new();
    let mut kept: Vec<&ClusterNode> = Vec::new();
    let mut accepted = CidrSet::new();
    for peer in peers {
        let address = peer.internal_ips.iter().find_map(|ip| {
            address_fault(*ip, anchors.own_addresses)
                .map(|reason| rejected(peer, reason, format!("InternalIP {ip}")))
        });
        let fault = address
            .or_else(|| {
                address_in(peer, |ip| {
                    pod_networks.iter().find(|n| n.contains(&ip)).copied()
                })
            })
            .or_else(|| {
                peer.pod_cidrs
                    .iter()
                    .find_map(|c| cidr_fault(peer, &c.trunc(), &local, &accepted, anchors))
            });
        match fault {
            Some(r) => rejections.push(r),
            None => {
                for cidr in &peer.pod_cidrs {
                    accepted.insert(*cidr);
                }
                kept.push(peer);
            }
        }
    }
    // An address inside another accepted peer's podCIDR.
    let mut trusted = Vec::new();
    for peer in kept {
        match address_in(peer, |ip| accepted.holding(ip)) {
            Some(r) => rejections.push(r),
            None => trusted.push(peer.clone()),
        }
    }
    rejections.sort();
    let screened = ClusterView {
        local_name: view.local_name.clone(),
        local: view.local.clone(),
        peers: trusted,
    };
    (screened, rejections)
}

#[cfg(test)]
#[path = "peer_trust_tests.rs"]
mod tests;
