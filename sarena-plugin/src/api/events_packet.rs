//! What an event's first bytes of a frame say: addresses, protocol, ports,
//! ICMP type and code, TCP flags, or the ARP operation. Parsed in user
//! space from the copy the programs made, so the programs parse nothing
//! for an event; every field is optional, as a frame may be cut short,
//! malformed (it may be why it was dropped) or of another kind.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use serde::{Deserialize, Serialize};

const ETH_LEN: usize = 14;
const ETH_P_IP: u16 = 0x0800;
const ETH_P_ARP: u16 = 0x0806;
const ETH_P_IPV6: u16 = 0x86dd;
/// IPv6 extension headers walked to find the upper layer.
const MAX_EXT_HEADERS: usize = 8;

/// The summary of a frame.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PacketSummary {
    /// `ipv4`, `ipv6`, `arp`, or the EtherType in hex (`0x88cc`);
    /// `truncated` for less than an Ethernet header.
    pub family: String,
    /// Source address (IP; ARP: the sender's protocol address).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub src: Option<IpAddr>,
    /// Destination address (IP; ARP: the target's protocol address).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dst: Option<IpAddr>,
    /// `TCP`, `UDP`, `SCTP`, `ICMP`, `ICMPv6`, or the protocol number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    /// TCP, UDP or SCTP source port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub src_port: Option<u16>,
    /// TCP, UDP or SCTP destination port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dst_port: Option<u16>,
    /// ICMP or ICMPv6 type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icmp_type: Option<u8>,
    /// ICMP or ICMPv6 code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icmp_code: Option<u8>,
    /// TCP flags set (`SYN`, `SYN|ACK`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_flags: Option<String>,
    /// ARP operation (1 request, 2 reply).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arp_op: Option<u16>,
}

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
}

fn array<const N: usize>(b: &[u8], at: usize) -> Option<[u8; N]> {
    b.get(at..at + N)?.try_into().ok()
}

impl PacketSummary {
    /// Reads the frame's first bytes (from its Ethernet header on).
    pub fn parse(frame: &[u8]) -> PacketSummary {
        let Some(ether_type) = be16(frame, 12) else {
            return PacketSummary {
                family: "truncated".to_owned(),
                ..PacketSummary::default()
            };
        };
        let l3 = frame.get(ETH_LEN..).unwrap_or_default();
        match ether_type {
            ETH_P_IP => Self::ipv4(l3),
            ETH_P_IPV6 => Self::ipv6(l3),
            ETH_P_ARP => Self::arp(l3),
            other => PacketSummary {
                family: format!("{other:#06x}"),
                ..PacketSummary::default()
            },
        }
    }

    fn ipv4(ip: &[u8]) -> PacketSummary {
        let mut s = PacketSummary {
            family: "ipv4".to_owned(),
            src: array::<4>(ip, 12).map(|a| IpAddr::V4(Ipv4Addr::from(a))),
            dst: array::<4>(ip, 16).map(|a| IpAddr::V4(Ipv4Addr::from(a))),
            ..PacketSummary::default()
        };
        let (Some(&vihl), Some(&proto)) = (ip.first(), ip.get(9)) else {
            return s;
        };
        let first_fragment = be16(ip, 6).is_some_and(|f| f & 0x1fff == 0);
        let header = usize::from(vihl & 0x0f) * 4;
        let upper = if first_fragment && header >= 20 {
            ip.get(header..)
        } else {
            None
        };
        s.upper(proto, upper, false);
        s
    }

    fn ipv6(ip: &[u8]) -> PacketSummary {
        let addr = |at| array::<16>(ip, at).map(|a| IpAddr::V6(Ipv6Addr::from(a)));
        let mut s = PacketSummary {
            family: "ipv6".to_owned(),
            src: addr(8),
            dst: addr(24),
            ..PacketSummary::default()
        };
        let Some(&first) = ip.get(6) else {
            return s;
        };
        // Hop-by-Hop, Routing, Destination Options: skipped; a Fragment
        // header past the first fragment ends the walk.
        let (mut next, mut at) = (first, 40);
        for _ in 0..MAX_EXT_HEADERS {
            match next {
                0 | 43 | 60 => {
                    let (Some(&n), Some(&len)) = (ip.get(at), ip.get(at + 1)) else {
                        s.protocol = Some(next.to_string());
                        return s;
                    };
                    next = n;
                    at += (usize::from(len) + 1) * 8;
                }
                44 => {
                    let (Some(&n), Some(offset)) = (ip.get(at), be16(ip, at + 2)) else {
                        s.protocol = Some(next.to_string());
                        return s;
                    };
                    if offset & 0xfff8 != 0 {
                        s.protocol = Some(n.to_string());
                        return s;
                    }
                    next = n;
                    at += 8;
                }
                _ => break,
            }
        }
        s.upper(next, ip.get(at..), true);
        s
    }

    fn arp(arp: &[u8]) -> PacketSummary {
        // IPv4 over Ethernet: 6-byte hardware, 4-byte protocol addresses
        let ipv4_over_eth = arp.get(4) == Some(&6) && arp.get(5) == Some(&4);
        let addr = |at| {
            ipv4_over_eth
                .then(|| array::<4>(arp, at).map(|a| IpAddr::V4(Ipv4Addr::from(a))))
                .flatten()
        };
        PacketSummary {
            family: "arp".to_owned(),
            arp_op: be16(arp, 6),
            src: addr(14),
            dst: addr(24),
            ..PacketSummary::default()
        }
    }

    /// The upper layer `proto`, its header's bytes (none: not the first
    /// fragment, or cut off).
    fn upper(&mut self, proto: u8, header: Option<&[u8]>, v6: bool) {
        let l4 = header.unwrap_or_default();
        self.protocol = Some(match (proto, v6) {
            (6, _) => "TCP".to_owned(),
            (17, _) => "UDP".to_owned(),
            (132, _) => "SCTP".to_owned(),
            (1, false) => "ICMP".to_owned(),
            (58, true) => "ICMPv6".to_owned(),
            (other, _) => other.to_string(),
        });
        match (proto, v6) {
            (6 | 17 | 132, _) => {
                self.src_port = be16(l4, 0);
                self.dst_port = be16(l4, 2);
                if proto == 6 {
                    self.tcp_flags = l4.get(13).map(|&f| tcp_flags(f));
                }
            }
            (1, false) | (58, true) => {
                self.icmp_type = l4.first().copied();
                self.icmp_code = l4.get(1).copied();
            }
            _ => {}
        }
    }
}

/// `SYN|ACK`-style names of the TCP flags set.
fn tcp_flags(flags: u8) -> String {
    const NAMES: [(u8, &str); 8] = [
        (0x02, "SYN"),
        (0x10, "ACK"),
        (0x01, "FIN"),
        (0x04, "RST"),
        (0x08, "PSH"),
        (0x20, "URG"),
        (0x40, "ECE"),
        (0x80, "CWR"),
    ];
    let set: Vec<&str> = NAMES
        .iter()
        .filter(|(bit, _)| flags & bit != 0)
        .map(|(_, name)| *name)
        .collect();
    if set.is_empty() {
        "none".to_owned()
    } else {
        set.join("|")
    }
}

impl fmt::Display for PacketSummary {
    /// `10.0.0.5:40000 -> 10.0.0.6:80 TCP SYN`, `10.0.0.5 -> 10.0.0.6
    /// ICMP type 8 code 0`, `arp op 1 10.0.0.9 -> 10.0.0.1`, `0x88cc`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let endpoint = |addr: Option<IpAddr>, port: Option<u16>| match (addr, port) {
            (Some(IpAddr::V6(a)), Some(p)) => format!("[{a}]:{p}"),
            (Some(a), Some(p)) => format!("{a}:{p}"),
            (Some(a), None) => a.to_string(),
            (None, _) => "?".to_owned(),
        };
        if self.family == "arp" {
            return write!(
                f,
                "arp op {} {} -> {}",
                self.arp_op.unwrap_or(0),
                endpoint(self.src, None),
                endpoint(self.dst, None)
            );
        }
        if self.src.is_none() && self.dst.is_none() {
            return f.write_str(&self.family);
        }
        write!(
            f,
            "{} -> {}",
            endpoint(self.src, self.src_port),
            endpoint(self.dst, self.dst_port)
        )?;
        if let Some(p) = &self.protocol {
            write!(f, " {p}")?;
        }
        if let Some(flags) = &self.tcp_flags {
            write!(f, " {flags}")?;
        }
        if let (Some(t), Some(c)) = (self.icmp_type, self.icmp_code) {
            write!(f, " type {t} code {c}")?;
        }
        Ok(())
    }
}
