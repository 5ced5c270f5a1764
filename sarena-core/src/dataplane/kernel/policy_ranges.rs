//! The compiled policy as disjoint ranges, the shape nftables interval
//! sets take: the ipcache's longest-prefix table flattened into address
//! ranges that each carry one identity, and an endpoint's allow entries
//! turned into (address range, port ranges) elements that never overlap
//! (the kernel refuses some overlapping elements of a concatenated
//! interval set, and accepts others).

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::policy::{CompiledPolicy, Direction, EntryKey, Identity};

/// Addresses of one family from `start` to `end`, both included (IPv4 in
/// the low 32 bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct AddrRange {
    /// IPv4 (else IPv6).
    pub v4: bool,
    /// The first address.
    pub start: u128,
    /// The last address.
    pub end: u128,
}

impl AddrRange {
    /// `A` or `A-B`, as nftables reads an element.
    pub(crate) fn render(&self) -> String {
        let addr = |n: u128| -> IpAddr {
            if self.v4 {
                IpAddr::V4(Ipv4Addr::from(n as u32))
            } else {
                IpAddr::V6(Ipv6Addr::from(n))
            }
        };
        if self.start == self.end {
            addr(self.start).to_string()
        } else {
            format!("{}-{}", addr(self.start), addr(self.end))
        }
    }
}

/// Ports from `.0` to `.1`, both included.
pub(crate) type PortRange = (u16, u16);

/// The highest address of the family.
fn max_of(v4: bool) -> u128 {
    if v4 { u32::MAX as u128 } else { u128::MAX }
}

fn number(addr: IpAddr) -> u128 {
    match addr {
        IpAddr::V4(a) => u32::from(a) as u128,
        IpAddr::V6(a) => u128::from(a),
    }
}

fn address(v4: bool, n: u128) -> IpAddr {
    if v4 {
        IpAddr::V4(Ipv4Addr::from(n as u32))
    } else {
        IpAddr::V6(Ipv6Addr::from(n))
    }
}

/// Every address of the family, once, as ranges with the identity the
/// programs' LPM lookup gives it ([`CompiledPolicy::identity_of`]);
/// neighbours with the same identity merged.
pub(crate) fn segments(compiled: &CompiledPolicy, v4: bool) -> Vec<(AddrRange, Identity)> {
    let max = max_of(v4);
    let mut points = vec![0u128];
    for prefix in compiled.ipcache.keys() {
        if matches!(prefix.addr(), IpAddr::V4(_)) != v4 {
            continue;
        }
        points.push(number(prefix.network()));
        let end = number(prefix.broadcast());
        if end < max {
            points.push(end + 1);
        }
    }
    points.sort_unstable();
    points.dedup();
    let mut out: Vec<(AddrRange, Identity)> = Vec::with_capacity(points.len());
    for (i, start) in points.iter().enumerate() {
        let end = points.get(i + 1).map_or(max, |next| next - 1);
        let identity = compiled.identity_of(address(v4, *start)).identity;
        match out.last_mut() {
            Some((last, id)) if *id == identity => last.end = end,
            _ => out.push((
                AddrRange {
                    v4,
                    start: *start,
                    end,
                },
                identity,
            )),
        }
    }
    out
}

/// What one endpoint allows in one direction of one family: the ranges
/// any protocol may use, and per protocol the ranges with their ports.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Allowed {
    /// Any protocol, any port.
    pub any: Vec<AddrRange>,
    /// Protocol → (addresses, their ports), disjoint.
    pub ports: BTreeMap<u8, Vec<(AddrRange, Vec<PortRange>)>>,
}

/// The ports `key` names.
fn port_range(key: &EntryKey) -> PortRange {
    let span: u16 = match key.port_bits {
        0 => u16::MAX,
        b if b >= 16 => 0,
        b => u16::MAX >> b,
    };
    (key.port & !span, key.port | span)
}

/// `ranges` sorted and merged where they overlap or touch.
fn merged(mut ranges: Vec<PortRange>) -> Vec<PortRange> {
    ranges.sort_unstable();
    let mut out: Vec<PortRange> = Vec::with_capacity(ranges.len());
    for (lo, hi) in ranges {
        match out.last_mut() {
            Some(last) if u32::from(lo) <= u32::from(last.1) + 1 => last.1 = last.1.max(hi),
            _ => out.push((lo, hi)),
        }
    }
    out
}

/// Appends `range` to `list`, extending the last one when they touch.
fn push_range(list: &mut Vec<AddrRange>, range: AddrRange) {
    match list.last_mut() {
        Some(last) if last.end.checked_add(1) == Some(range.start) => last.end = range.end,
        _ => list.push(range),
    }
}

/// What the entries of `direction` allow over `segments` (one family):
/// an entry for the peer identity of a segment or for any peer (0)
/// allows that segment; the union per segment, so elements never overlap.
pub(crate) fn allowed<'a>(
    segments: &[(AddrRange, Identity)],
    entries: impl IntoIterator<Item = &'a EntryKey>,
    direction: Direction,
) -> Allowed {
    // Per peer identity: whether any protocol is allowed, and per protocol the ports.
    let mut by_peer: BTreeMap<Identity, (bool, BTreeMap<u8, Vec<PortRange>>)> = BTreeMap::new();
    for key in entries.into_iter().filter(|k| k.direction == direction) {
        let peer = by_peer.entry(key.peer).or_default();
        if key.proto == 0 {
            peer.0 = true;
        } else {
            peer.1.entry(key.proto).or_default().push(port_range(key));
        }
    }
    let mut out = Allowed::default();
    if by_peer.is_empty() {
        return out;
    }
    let any_peer = by_peer.get(&0).cloned().unwrap_or_default();
    for (range, identity) in segments {
        let own = by_peer.get(identity);
        if any_peer.0 || own.is_some_and(|p| p.0) {
            push_range(&mut out.any, *range);
            continue;
        }
        let mut per_proto: BTreeMap<u8, Vec<PortRange>> = any_peer.1.clone();
        for (proto, ports) in own.map(|p| &p.1).into_iter().flatten() {
            per_proto.entry(*proto).or_default().extend(ports);
        }
        for (proto, ports) in per_proto {
            let ports = merged(ports);
            let list = out.ports.entry(proto).or_default();
            match list.last_mut() {
                Some((last, last_ports))
                    if *last_ports == ports && last.end.checked_add(1) == Some(range.start) =>
                {
                    last.end = range.end
                }
                _ => list.push((*range, ports)),
            }
        }
    }
    out
}

/// The ranges of `segments` whose identity is `identity`.
pub(crate) fn ranges_of(segments: &[(AddrRange, Identity)], identity: Identity) -> Vec<AddrRange> {
    let mut out = Vec::new();
    for (range, id) in segments {
        if *id == identity {
            push_range(&mut out, *range);
        }
    }
    out
}

#[cfg(test)]
#[path = "policy_ranges_tests.rs"]
mod tests;
