//! IPv6 frames built by hand, for what a well-behaved kernel never sends.

use std::net::Ipv6Addr;

use sarena_core::mac::MacAddr;
use sarena_test_support::Pod;

/// ICMPv6's protocol number.
pub const ICMPV6: u8 = 58;
/// UDP's protocol number.
pub const UDP: u8 = 17;
/// The Destination Options header's protocol number.
pub const DEST_OPTS: u8 = 60;
/// The Hop-by-Hop Options header's protocol number.
pub const HOP_BY_HOP: u8 = 0;
/// The Fragment header's protocol number.
pub const FRAGMENT: u8 = 44;

/// An Ethernet + IPv6 frame from `pod` to its host end: `src` → `dst`,
/// `next` header, hop limit `hop`, then `payload` (payload length: its length).
pub fn frame(
    pod: &Pod,
    src: Ipv6Addr,
    dst: Ipv6Addr,
    next: u8,
    hop: u8,
    payload: &[u8],
) -> Vec<u8> {
    let macs = (pod.endpoint.spec.pod_mac, pod.endpoint.spec.host_mac);
    frame_between(macs, src, dst, next, hop, payload)
}

/// [`frame`] from the MAC `macs.0` to `macs.1`.
pub fn frame_between(
    macs: (MacAddr, MacAddr),
    src: Ipv6Addr,
    dst: Ipv6Addr,
    next: u8,
    hop: u8,
    payload: &[u8],
) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&macs.1.octets());
    f.extend_from_slice(&macs.0.octets());
    f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0]);
    f.extend_from_slice(&(payload.len() as u16).to_be_bytes());
    f.extend_from_slice(&[next, hop]);
    f.extend_from_slice(&src.octets());
    f.extend_from_slice(&dst.octets());
    f.extend_from_slice(payload);
    f
}

/// The upper-layer checksum of `data` (checksum field zero) from `src` to
/// `dst` with protocol `next` (RFC 8200 8.1).
pub fn checksum(src: Ipv6Addr, dst: Ipv6Addr, next: u8, data: &[u8]) -> u16 {
    let mut pseudo = Vec::new();
    pseudo.extend_from_slice(&src.octets());
    pseudo.extend_from_slice(&dst.octets());
    pseudo.extend_from_slice(&(data.len() as u32).to_be_bytes());
    pseudo.extend_from_slice(&[0, 0, 0, next]);
    pseudo.extend_from_slice(data);
    if pseudo.len() % 2 == 1 {
        pseudo.push(0);
    }
    let mut sum: u32 = pseudo
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum();
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// `body` (an ICMPv6 message, checksum field zero) with its checksum filled in.
pub fn icmpv6(src: Ipv6Addr, dst: Ipv6Addr, mut body: Vec<u8>) -> Vec<u8> {
    let sum = checksum(src, dst, ICMPV6, &body);
    body[2..4].copy_from_slice(&sum.to_be_bytes());
    body
}

/// A neighbour solicitation (type 135) for `target`, then `options`.
pub fn solicitation(target: Ipv6Addr, options: &[u8]) -> Vec<u8> {
    let mut b = vec![135, 0, 0, 0, 0, 0, 0, 0];
    b.extend_from_slice(&target.octets());
    b.extend_from_slice(options);
    b
}

/// A neighbour advertisement (type 136, Override) for `target`.
pub fn advertisement(target: Ipv6Addr) -> Vec<u8> {
    let mut b = vec![136, 0, 0, 0, 0x20, 0, 0, 0];
    b.extend_from_slice(&target.octets());
    b
}

/// A router solicitation (type 133) from `src` to all routers, with a
/// source link-layer address option carrying `mac`: the whole ICMPv6
/// message, checksum filled in.
pub fn router_solicitation(src: Ipv6Addr, mac: [u8; 6]) -> Vec<u8> {
    let mut body = vec![133, 0, 0, 0, 0, 0, 0, 0];
    body.extend(source_link_layer(mac));
    icmpv6(src, ALL_ROUTERS, body)
}

/// The all-routers link-local multicast address.
pub const ALL_ROUTERS: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 2);

/// A source link-layer address option carrying `mac`.
pub fn source_link_layer(mac: [u8; 6]) -> Vec<u8> {
    let mut o = vec![1, 1];
    o.extend_from_slice(&mac);
    o
}

/// A UDP datagram `sport` → `dport` carrying `data` (checksum left zero:
/// these frames are about what the programs do, not what a socket takes).
pub fn udp(sport: u16, dport: u16, data: &[u8]) -> Vec<u8> {
    let mut u = Vec::new();
    u.extend_from_slice(&sport.to_be_bytes());
    u.extend_from_slice(&dport.to_be_bytes());
    u.extend_from_slice(&((8 + data.len()) as u16).to_be_bytes());
    u.extend_from_slice(&[0, 0]);
    u.extend_from_slice(data);
    u
}

/// An 8-byte extension header (`len` byte 0: Destination or Hop-by-Hop
/// options with padding) followed by `next`.
pub fn ext8(next: u8) -> Vec<u8> {
    vec![next, 0, 1, 4, 0, 0, 0, 0]
}

/// The solicited-node multicast address of `target` (RFC 4291 2.7.1).
pub fn solicited_node(target: Ipv6Addr) -> Ipv6Addr {
    let t = target.octets();
    Ipv6Addr::new(
        0xff02,
        0,
        0,
        0,
        0,
        1,
        0xff00 | u16::from(t[13]),
        u16::from_be_bytes([t[14], t[15]]),
    )
}
