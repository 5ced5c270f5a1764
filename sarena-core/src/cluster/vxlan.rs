//! The VXLAN overlay's desired state (pure): the device, and per peer a
//! forwarding-database entry, neighbour entries and routes.
//!
//! VTEP identity is stateless, so nothing needs annotating on the Node
//! objects and RBAC stays minimal: a node's VTEP MAC is derived from its
//! underlay address ([`vtep_mac`]), and its VTEP addresses on the overlay
//! are the network addresses of its podCIDRs (never handed to a pod), as
//! flannel's VXLAN backend does. Every node computes the same for every
//! other node from the Node objects alone.

use std::net::IpAddr;

use ipnet::IpNet;
use sha2::{Digest, Sha256};

use super::config::VXLAN_DEVICE;
use super::routes::{PeerRoute, routable_peers};
use super::types::{ClusterNode, ClusterView};
use crate::mac::MacAddr;

/// The VTEP MAC of the node whose underlay address is `underlay`: locally
/// administered unicast `02:53:…`; the last four octets are an IPv4
/// address itself, or the first four of the SHA-256 of an IPv6 one.
pub fn vtep_mac(underlay: IpAddr) -> MacAddr {
    let tail: [u8; 4] = match underlay {
        IpAddr::V4(v4) => v4.octets(),
        IpAddr::V6(v6) => {
            let hash = Sha256::digest(v6.octets());
            [hash[0], hash[1], hash[2], hash[3]]
        }
    };
    MacAddr::new([0x02, 0x53, tail[0], tail[1], tail[2], tail[3]])
}

/// The VTEP address of a podCIDR on the overlay: its network address.
pub fn vtep_address(cidr: &IpNet) -> IpAddr {
    cidr.network()
}

/// The local VXLAN device as it should be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VxlanDevice {
    /// Its name ([`VXLAN_DEVICE`]).
    pub name: String,
    /// The VNI.
    pub vni: u32,
    /// The UDP port.
    pub port: u16,
    /// The local underlay address (this node's `InternalIP`).
    pub local: IpAddr,
    /// The underlay device's ifindex.
    pub underlay: u32,
    /// The device's MTU.
    pub mtu: u32,
    /// Its MAC ([`vtep_mac`] of `local`).
    pub mac: MacAddr,
    /// Its addresses: the VTEP address of each local podCIDR, as a host prefix.
    pub addresses: Vec<IpNet>,
}

impl VxlanDevice {
    /// The device for `local` (which must have podCIDRs and an underlay
    /// address: `None` otherwise).
    pub fn for_node(
        local: &ClusterNode,
        vni: u32,
        port: u16,
        underlay: u32,
        mtu: u32,
    ) -> Option<VxlanDevice> {
        let local_ip = local.underlay_ip()?;
        if local.pod_cidrs.is_empty() {
            return None;
        }
        Some(VxlanDevice {
            name: VXLAN_DEVICE.to_owned(),
            vni,
            port,
            local: local_ip,
            underlay,
            mtu,
            mac: vtep_mac(local_ip),
            addresses: local
                .pod_cidrs
                .iter()
                .map(|c| IpNet::from(vtep_address(c)))
                .collect(),
        })
    }
}

/// A forwarding-database entry of the VXLAN device: frames to `mac` go to
/// the underlay address `dst` (`bridge fdb replace MAC dev DEV dst DST self permanent`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FdbEntry {
    /// The peer's VTEP MAC.
    pub mac: MacAddr,
    /// The peer's underlay address.
    pub dst: IpAddr,
}

/// A permanent neighbour entry on the VXLAN device: the peer's VTEP address
/// and MAC (`ip neigh replace IP lladdr MAC dev DEV nud permanent`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NeighbourEntry {
    /// The peer's VTEP address.
    pub ip: IpAddr,
    /// The peer's VTEP MAC.
    pub mac: MacAddr,
}

/// What the overlay should hold for `view`: FDB entries, neighbours and
/// routes through the device `ifindex`, whose local underlay address is
/// `local` (peers are reached at their `InternalIP` of that family; one
/// without it is skipped and reported).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OverlayState {
    /// One per peer.
    pub fdb: Vec<FdbEntry>,
    /// One per peer podCIDR.
    pub neighbours: Vec<NeighbourEntry>,
    /// One per peer podCIDR.
    pub routes: Vec<PeerRoute>,
}

/// The [`OverlayState`] of `view` (see there).
pub fn overlay_state(
    view: &ClusterView,
    local: IpAddr,
    ifindex: u32,
    skipped: &mut Vec<String>,
) -> OverlayState {
    let mut state = OverlayState::default();
    for (peer, cidr) in routable_peers(view, skipped) {
        let Some(underlay) = peer.internal_ip_like(local) else {
            skipped.push(format!(
                "node {} has no InternalIP of the underlay's family ({local})",
                peer.name
            ));
            continue;
        };
        let mac = vtep_mac(underlay);
        let vtep = vtep_address(&cidr);
        // one per peer; a peer with two podCIDRs repeats it (deduplicated below)
        state.fdb.push(FdbEntry { mac, dst: underlay });
        state.neighbours.push(NeighbourEntry { ip: vtep, mac });
        state.routes.push(PeerRoute {
            dst: cidr,
            via: vtep,
            dev: Some(ifindex),
            onlink: true,
        });
    }
    state.fdb.sort();
    state.fdb.dedup();
    state.neighbours.sort();
    state.routes.sort();
    state
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, ips: &[&str], cidrs: &[&str]) -> ClusterNode {
        ClusterNode {
            name: name.into(),
            uid: String::new(),
            internal_ips: ips.iter().map(|s| s.parse().unwrap()).collect(),
            pod_cidrs: cidrs.iter().map(|s| s.parse().unwrap()).collect(),
        }
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn the_vtep_mac_is_derived_from_the_underlay_address() {
        assert_eq!(vtep_mac(ip("172.30.0.12")).to_string(), "02:53:ac:1e:00:0c");
        let a = vtep_mac(ip("fd00:1::10"));
        let b = vtep_mac(ip("fd00:2::10"));
        assert_ne!(a, b, "IPv6 addresses differing only in their upper bits");
        assert_eq!(a, vtep_mac(ip("fd00:1::10")));
        assert!(a.is_unicast() && a.octets()[0] & 0x02 == 0x02);
    }

    #[test]
    fn the_device_carries_the_local_vtep_addresses_and_mac() {
        let local = node(
            "a",
            &["172.30.0.11"],
            &["10.244.0.0/24", "fd00:10:244::/64"],
        );
        let dev = VxlanDevice::for_node(&local, 1, 8472, 2, 1450).unwrap();
        assert_eq!(dev.name, "sarena.vxlan");
        assert_eq!(dev.local, ip("172.30.0.11"));
        assert_eq!(dev.mac, vtep_mac(ip("172.30.0.11")));
        let addrs: Vec<String> = dev.addresses.iter().map(|a| a.to_string()).collect();
        assert_eq!(addrs, ["10.244.0.0/32", "fd00:10:244::/128"]);
        assert_eq!(
            VxlanDevice::for_node(&node("a", &[], &["10.244.0.0/24"]), 1, 1, 1, 1),
            None
        );
        assert_eq!(
            VxlanDevice::for_node(&node("a", &["172.30.0.11"], &[]), 1, 1, 1, 1),
            None
        );
    }

    #[test]
    fn each_peer_gets_an_fdb_entry_and_each_cidr_a_neighbour_and_an_onlink_route() {
        let view = ClusterView {
            local_name: "a".into(),
            local: Some(node("a", &["172.30.0.11"], &["10.244.0.0/24"])),
            peers: vec![
                node(
                    "b",
                    &["172.30.0.12"],
                    &["10.244.1.0/24", "fd00:10:244:1::/64"],
                ),
                node("c", &["fd00::13"], &["10.244.2.0/24"]),
            ],
        };
        let mut skipped = Vec::new();
        let state = overlay_state(&view, ip("172.30.0.11"), 7, &mut skipped);
        let mac = vtep_mac(ip("172.30.0.12"));
        assert_eq!(
            state.fdb,
            vec![FdbEntry {
                mac,
                dst: ip("172.30.0.12")
            }]
        );
        assert_eq!(
            state.neighbours,
            vec![
                NeighbourEntry {
                    ip: ip("10.244.1.0"),
                    mac
                },
                NeighbourEntry {
                    ip: ip("fd00:10:244:1::"),
                    mac
                },
            ]
        );
        let routes: Vec<String> = state.routes.iter().map(|r| r.to_string()).collect();
        assert_eq!(
            routes,
            [
                "10.244.1.0/24 via 10.244.1.0 dev #7 onlink",
                "fd00:10:244:1::/64 via fd00:10:244:1:: dev #7 onlink"
            ]
        );
        assert_eq!(skipped.len(), 1);
        assert!(skipped[0].contains("node c has no InternalIP of the underlay's family"));
    }
}
