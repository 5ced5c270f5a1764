//! Ethernet and ARP frames built by hand, for what a well-behaved kernel
//! never sends.

use std::net::Ipv4Addr;

use sarena_test_support::Pod;

/// ARP's hardware type for Ethernet.
pub const HTYPE_ETHERNET: u16 = 1;
/// ARP's hardware type for IEEE 802 networks, which Linux accepts on
/// Ethernet devices too.
pub const HTYPE_IEEE802: u16 = 6;
/// The IPv4 EtherType (ARP's protocol type for IPv4).
pub const ETH_P_IP: u16 = 0x0800;
/// The IPv6 EtherType.
pub const ETH_P_IPV6: u16 = 0x86dd;
/// The broadcast MAC address.
pub const BROADCAST: [u8; 6] = [0xff; 6];

/// A frame from `pod`'s MAC to `dst` with `ether_type` (or an 802.3 length)
/// and `payload`.
pub fn ethernet(pod: &Pod, dst: [u8; 6], ether_type: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&dst);
    f.extend_from_slice(&pod.endpoint.spec.pod_mac.octets());
    f.extend_from_slice(&ether_type.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// A broadcast ARP request from `pod` (its MAC as the sender's hardware
/// address) with hardware type `htype` and protocol type `ptype`, asking
/// for `target` as `sender`.
pub fn arp_request(
    pod: &Pod,
    htype: u16,
    ptype: u16,
    sender: Ipv4Addr,
    target: Ipv4Addr,
) -> Vec<u8> {
    let mut arp = Vec::new();
    arp.extend_from_slice(&htype.to_be_bytes());
    arp.extend_from_slice(&ptype.to_be_bytes());
    arp.extend_from_slice(&[6, 4, 0, 1]);
    arp.extend_from_slice(&pod.endpoint.spec.pod_mac.octets());
    arp.extend_from_slice(&sender.octets());
    arp.extend_from_slice(&[0; 6]);
    arp.extend_from_slice(&target.octets());
    ethernet(pod, BROADCAST, 0x0806, &arp)
}
