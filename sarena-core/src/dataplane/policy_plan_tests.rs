use std::net::IpAddr;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::*;
use crate::policy::Direction;

const INGRESS: u32 = sarena_common::policy::ENDPOINT_F_INGRESS_ISOLATED;

fn net(s: &str) -> IpNet {
    s.parse().unwrap()
}

fn entry(peer: u32, port: u16) -> EntryKey {
    EntryKey {
        direction: Direction::Ingress,
        peer,
        proto: 6,
        port,
        port_bits: 16,
    }
}

/// Whether the held tables let a TCP packet from `src` into endpoint
/// `ifindex` on `port`: the lookups the programs make (longest prefix for
/// the source, then the entry for its identity or any peer).
fn allows(t: &PolicyTables, ifindex: u32, src: IpAddr, port: u16) -> bool {
    let Some(ep) = t.endpoints.get(&ifindex) else {
        return true;
    };
    if ep.isolation & INGRESS == 0 {
        return true;
    }
    let identity = t
        .ipcache
        .iter()
        .filter(|(p, _)| p.contains(&src))
        .max_by_key(|(p, _)| p.prefix_len())
        .map_or(2, |(_, e)| e.identity);
    [identity, 0]
        .iter()
        .any(|&peer| ep.entries.contains_key(&entry(peer, port)))
}

fn random_tables(rng: &mut StdRng, base: u32) -> PolicyTables {
    let mut t = PolicyTables::default();
    for i in 0..4u8 {
        if rng.random_bool(0.7) {
            t.ipcache.insert(
                net(&format!("10.0.0.{i}/32")),
                IpcacheEntry {
                    identity: base + u32::from(rng.random_range(0..3u8)),
                    flags: 0,
                },
            );
        }
    }
    for ifindex in 1..=3 {
        let mut ep = EndpointTables {
            isolation: if rng.random_bool(0.6) { INGRESS } else { 0 },
            ..Default::default()
        };
        for _ in 0..rng.random_range(0..4) {
            let peer = if rng.random_bool(0.2) {
                0
            } else {
                base + u32::from(rng.random_range(0..3u8))
            };
            let port = [80, 443][rng.random_range(0..2usize)];
            ep.entries.insert(entry(peer, port), RuleId(rng.random()));
        }
        t.endpoints.insert(ifindex, ep);
    }
    t
}

#[test]
fn no_intermediate_state_allows_what_neither_end_allows() {
    let mut rng = StdRng::seed_from_u64(26);
    for case in 0..2000 {
        // After a restart identities are renumbered (disjoint ranges, any
        // change); within a run an identity keeps its meaning, so an update
        // changes the policy (entries, isolation) or the addresses'
        // identities, one at a time as the engine sees them.
        let old = random_tables(&mut rng, 256);
        let mut new = random_tables(&mut rng, if case % 3 == 0 { 512 } else { 256 });
        match case % 3 {
            1 => new.ipcache = old.ipcache.clone(),
            2 => new.endpoints = old.endpoints.clone(),
            _ => {}
        }
        let ops = plan(&old, &new);
        let mut held = old.clone();
        for op in &ops {
            held.record(op);
            for ifindex in 1..=3 {
                for i in 0..5u8 {
                    let src: IpAddr = format!("10.0.0.{i}").parse().unwrap();
                    for port in [80, 443] {
                        if allows(&held, ifindex, src, port) {
                            assert!(
                                allows(&old, ifindex, src, port)
                                    || allows(&new, ifindex, src, port),
                                "case {case}: after {op:?}, {src}:{port} into {ifindex} is allowed by neither state"
                            );
                        }
                    }
                }
            }
        }
        assert_eq!(held, new, "case {case}: the plan reaches the wanted state");
    }
}

#[test]
fn nothing_to_do_when_the_state_is_already_held() {
    let mut rng = StdRng::seed_from_u64(7);
    let t = random_tables(&mut rng, 256);
    assert!(plan(&t, &t).is_empty());
}

#[test]
fn entries_come_before_isolation_and_addresses_before_removals() {
    let mut old = PolicyTables::default();
    old.ipcache.insert(
        net("10.0.0.1/32"),
        IpcacheEntry {
            identity: 300,
            flags: 0,
        },
    );
    old.endpoints.insert(
        1,
        EndpointTables {
            isolation: INGRESS,
            entries: [(entry(300, 80), RuleId(1))].into(),
        },
    );
    let mut new = PolicyTables::default();
    new.ipcache.insert(
        net("10.0.0.1/32"),
        IpcacheEntry {
            identity: 600,
            flags: 0,
        },
    );
    new.endpoints.insert(
        1,
        EndpointTables {
            isolation: INGRESS,
            entries: [(entry(600, 80), RuleId(1))].into(),
        },
    );
    new.endpoints.insert(
        2,
        EndpointTables {
            isolation: INGRESS,
            entries: [(entry(600, 443), RuleId(2))].into(),
        },
    );
    let ops = plan(&old, &new);
    let kinds: Vec<&str> = ops
        .iter()
        .map(|op| match op {
            PolicyOp::SetEntry { .. } => "set-entry",
            PolicyOp::SetIsolation { .. } => "isolate",
            PolicyOp::SetIpcache { .. } => "set-address",
            PolicyOp::RemoveEntry { .. } => "remove-entry",
            PolicyOp::RemoveIpcache { .. } => "remove-address",
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "set-entry",
            "set-entry",
            "isolate",
            "set-address",
            "remove-entry"
        ]
    );
}

#[test]
fn an_endpoint_left_out_of_the_wanted_state_is_not_touched() {
    let mut old = PolicyTables::default();
    old.endpoints.insert(
        9,
        EndpointTables {
            isolation: INGRESS,
            entries: [(entry(0, 80), RuleId(1))].into(),
        },
    );
    assert!(plan(&old, &PolicyTables::default()).is_empty());
}
