use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::*;
use crate::policy::{Decision, EndpointPolicy, IpcacheEntry, RuleId};
use ipnet::IpNet;
use sarena_common::policy::IDENTITY_HOST;

fn n(s: &str) -> IpNet {
    s.parse().unwrap()
}

fn policy(entries: &[(&str, Identity)]) -> CompiledPolicy {
    let mut c = CompiledPolicy::default();
    for (prefix, identity) in entries {
        c.ipcache.insert(
            n(prefix),
            IpcacheEntry {
                identity: *identity,
                flags: 0,
            },
        );
    }
    c
}

#[test]
fn segments_cover_the_family_once_with_the_longest_prefix_identity() {
    let c = policy(&[
        ("10.0.0.0/8", 300),
        ("10.1.0.0/16", 301),
        ("10.1.2.3/32", 302),
        ("10.2.0.0/16", 300),
        ("fd00::/64", 303),
    ]);
    let s = segments(&c, true);
    let text: Vec<String> = s
        .iter()
        .map(|(r, id)| format!("{} {id}", r.render()))
        .collect();
    assert_eq!(
        text,
        [
            "0.0.0.0-9.255.255.255 2",
            "10.0.0.0-10.0.255.255 300",
            "10.1.0.0-10.1.2.2 301",
            "10.1.2.3 302",
            "10.1.2.4-10.1.255.255 301",
            "10.2.0.0-10.255.255.255 300",
            "11.0.0.0-255.255.255.255 2",
        ]
    );
    let s6 = segments(&c, false);
    assert_eq!(s6.len(), 3, "{s6:?}");
    assert_eq!(s6[1].0.render(), "fd00::-fd00::ffff:ffff:ffff:ffff");
}

fn key(direction: Direction, peer: Identity, proto: u8, port: u16, bits: u8) -> EntryKey {
    EntryKey {
        direction,
        peer,
        proto,
        port,
        port_bits: bits,
    }
}

/// Whether `allowed` lets `addr` use `proto`/`port`.
fn admits(allowed: &Allowed, addr: u128, proto: u8, port: u16) -> bool {
    if allowed.any.iter().any(|r| r.start <= addr && addr <= r.end) {
        return true;
    }
    allowed.ports.get(&proto).is_some_and(|list| {
        list.iter().any(|(r, ports)| {
            r.start <= addr
                && addr <= r.end
                && ports.iter().any(|(lo, hi)| *lo <= port && port <= *hi)
        })
    })
}

/// No two elements of a set overlap (the kernel may refuse them).
fn assert_disjoint(allowed: &Allowed) {
    for w in allowed.any.windows(2) {
        assert!(w[0].end < w[1].start, "{w:?}");
    }
    for list in allowed.ports.values() {
        for w in list.windows(2) {
            assert!(w[0].0.end < w[1].0.start, "{w:?}");
        }
        for (_, ports) in list {
            for p in ports.windows(2) {
                assert!(p[0].1 < p[1].0, "{p:?}");
            }
        }
    }
}

#[test]
fn any_peer_and_own_identity_entries_are_unioned_without_overlap() {
    let c = policy(&[("10.0.0.0/8", 300), ("10.1.0.0/16", 301)]);
    let s = segments(&c, true);
    let entries = [
        key(Direction::Ingress, 0, 6, 80, 16),
        key(Direction::Ingress, 301, 6, 0, 0),
        key(Direction::Ingress, 300, 17, 1024, 6),
        key(Direction::Egress, 300, 0, 0, 0),
    ];
    let a = allowed(&s, &entries, Direction::Ingress);
    assert_disjoint(&a);
    assert!(a.any.is_empty());
    let ip = |s: &str| number(s.parse().unwrap());
    assert!(admits(&a, ip("192.0.2.1"), 6, 80));
    assert!(!admits(&a, ip("192.0.2.1"), 6, 81));
    assert!(admits(&a, ip("10.1.0.9"), 6, 81));
    assert!(admits(&a, ip("10.9.0.9"), 17, 2047));
    assert!(!admits(&a, ip("10.9.0.9"), 17, 2048));
    let e = allowed(&s, &entries, Direction::Egress);
    assert_eq!(e.any.len(), 2, "10/8 around 10.1/16: {e:?}");
}

/// Random ipcaches and entries: the ranges admit exactly what the
/// programs' decision ([`CompiledPolicy::decide_for`]) allows.
#[test]
fn the_ranges_decide_like_the_programs() {
    let mut rng = StdRng::seed_from_u64(26);
    for round in 0..200 {
        let mut c = CompiledPolicy::default();
        for _ in 0..rng.random_range(0..8) {
            let len = rng.random_range(8..=32u8);
            let addr =
                std::net::Ipv4Addr::new(10, rng.random_range(0..4), rng.random(), rng.random());
            let net = IpNet::new(IpAddr::V4(addr), len).unwrap().trunc();
            let identity = [IDENTITY_HOST, 300, 301, 302][rng.random_range(0..4)];
            c.ipcache.insert(net, IpcacheEntry { identity, flags: 0 });
        }
        let mut ep = EndpointPolicy {
            ingress_isolated: true,
            ..Default::default()
        };
        for i in 0..rng.random_range(0..6) {
            let peer = [0, 2, 300, 301, 302][rng.random_range(0..5)];
            let proto = [0, 6, 17][rng.random_range(0..3)];
            let (port, bits) = if proto == 0 {
                (0, 0)
            } else {
                let bits = rng.random_range(0..=16u8);
                let mask = if bits == 0 {
                    0
                } else {
                    u16::MAX << (16 - bits)
                };
                (rng.random_range(0..4096u16) & mask, bits)
            };
            let k = key(Direction::Ingress, peer, proto, port, bits);
            ep.entries.insert(k, RuleId(i));
        }
        let s = segments(&c, true);
        let a = allowed(&s, ep.entries.keys(), Direction::Ingress);
        assert_disjoint(&a);
        for _ in 0..300 {
            let addr = std::net::Ipv4Addr::new(
                [9, 10, 10, 10][rng.random_range(0..4)],
                rng.random_range(0..4),
                rng.random(),
                rng.random(),
            );
            let proto = [1, 6, 17][rng.random_range(0..3)];
            let port: u16 = rng.random_range(0..4096);
            let decision = c.decide_for(&ep, Direction::Ingress, IpAddr::V4(addr), proto, port);
            if decision == Decision::Host {
                continue;
            }
            assert_eq!(
                admits(&a, u32::from(addr) as u128, proto, port),
                decision.allows(),
                "round {round}: {addr} {proto}/{port} {decision:?}\n{c:?}\n{ep:?}\n{a:?}"
            );
        }
    }
}
