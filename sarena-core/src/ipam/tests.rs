//! Allocator and pool-configuration tests.

use std::collections::HashSet;
use std::net::IpAddr;

use super::*;

pub(super) fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

pub(super) fn pool(name: &str, cidrs: &[&str], ns: &[&str]) -> PoolConfig {
    PoolConfig {
        name: name.into(),
        cidrs: cidrs.iter().map(|c| c.parse().unwrap()).collect(),
        gateways: vec![],
        reserved: vec![],
        namespaces: ns.iter().map(|s| s.to_string()).collect(),
    }
}

pub(super) fn alloc(pools: Vec<PoolConfig>) -> Allocator {
    Allocator::new(&IpamConfig { pools }).unwrap()
}

fn field_of(err: PoolConfigError) -> String {
    err.field
}

#[test]
fn exhausts_a_slash_29_without_gateway_then_errors() {
    let mut a = alloc(vec![pool("p", &["10.0.0.0/29"], &[])]);
    let mut got = HashSet::new();
    for _ in 0..5 {
        let out = a.allocate("p", &[]).unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].gateway, ip("10.0.0.1"));
        assert_eq!(out[0].address.prefix_len(), 29);
        assert!(got.insert(out[0].address.addr()));
    }
    let expect: HashSet<IpAddr> = (2..=6).map(|i| ip(&format!("10.0.0.{i}"))).collect();
    assert_eq!(
        got, expect,
        "network .0, gateway .1 and broadcast .7 are never handed out"
    );
    let err = a.allocate("p", &[]).unwrap_err();
    assert_eq!(
        err,
        IpamError::Exhausted {
            pool: "p".into(),
            family: "IPv4"
        }
    );
    assert_eq!(a.pool_states()[0].allocated, 5);
    assert_eq!(a.pool_states()[0].capacity, 5);
}

#[test]
fn reserved_ranges_and_explicit_gateway_are_never_given() {
    let mut cfg = pool("p", &["10.0.0.0/28"], &[]);
    cfg.gateways = vec![ip("10.0.0.14")];
    cfg.reserved = vec![
        "10.0.0.1-10.0.0.4".into(),
        "10.0.0.8/30".into(),
        "10.0.0.13".into(),
    ];
    let mut a = alloc(vec![cfg]);
    let mut got = Vec::new();
    while let Ok(out) = a.allocate("p", &[]) {
        assert_eq!(out[0].gateway, ip("10.0.0.14"));
        got.push(out[0].address.addr());
    }
    let expect: Vec<IpAddr> = [5, 6, 7, 12]
        .iter()
        .map(|i| ip(&format!("10.0.0.{i}")))
        .collect();
    assert_eq!(got, expect);
    assert_eq!(a.unusable(ip("10.0.0.14")), Some(Unusable::Gateway));
    assert_eq!(a.unusable(ip("10.0.0.9")), Some(Unusable::Reserved));
    assert_eq!(a.unusable(ip("10.0.0.15")), Some(Unusable::Broadcast));
}

#[test]
fn released_address_is_reused_only_after_the_rest() {
    let mut a = alloc(vec![pool("p", &["10.0.0.0/29"], &[])]);
    let first = a.allocate("p", &[]).unwrap()[0].address.addr();
    assert_eq!(first, ip("10.0.0.2"));
    assert!(a.release(first));
    assert!(!a.release(first), "double release is a no-op");
    let next: Vec<IpAddr> = (0..4)
        .map(|_| a.allocate("p", &[]).unwrap()[0].address.addr())
        .collect();
    assert!(!next.contains(&first));
    assert_eq!(
        a.allocate("p", &[]).unwrap()[0].address.addr(),
        first,
        "reused after wrap"
    );
}

#[test]
fn dual_stack_gives_one_address_per_family_and_v6_slash_64_works() {
    let mut a = alloc(vec![pool("p", &["10.1.0.0/24", "fd00:1::/64"], &[])]);
    let out = a.allocate("p", &[]).unwrap();
    assert_eq!(out.len(), 2);
    assert_eq!(out[0].address.to_string(), "10.1.0.2/24");
    assert_eq!(out[1].address.to_string(), "fd00:1::2/64");
    assert_eq!(out[1].gateway, ip("fd00:1::1"));
    let states = a.pool_states();
    assert_eq!(
        states[1].capacity,
        u64::MAX - 1,
        "2^64 minus anycast and gateway"
    );
    let req = ip("fd00:1::ffff:ffff:ffff:fffe");
    let out = a.allocate("p", &[req]).unwrap();
    assert_eq!(out[1].address.addr(), req);
    assert_eq!(
        out[0].address.to_string(),
        "10.1.0.3/24",
        "other family allocated dynamically"
    );
    assert_eq!(
        a.allocate("p", &[req]).unwrap_err(),
        IpamError::InUse { address: req }
    );
    assert!(
        a.is_free(ip("10.1.0.4")),
        "failed request rolled back the IPv4 it took"
    );
}

#[test]
fn v6_only_pool_and_ipv6_network_address() {
    let mut a = alloc(vec![pool("p", &["fd00:2::/126"], &[])]);
    let got: Vec<String> = (0..2)
        .map(|_| a.allocate("p", &[]).unwrap()[0].address.to_string())
        .collect();
    assert_eq!(got, vec!["fd00:2::2/126", "fd00:2::3/126"]);
    assert!(matches!(
        a.allocate("p", &[]),
        Err(IpamError::Exhausted { family: "IPv6", .. })
    ));
    let err = a.allocate("p", &[ip("fd00:2::")]).unwrap_err();
    assert!(matches!(
        err,
        IpamError::Unusable {
            reason: "the network address",
            ..
        }
    ));
}

#[test]
fn static_requests_are_checked() {
    let mut a = alloc(vec![
        pool("d", &["10.0.0.0/24"], &[]),
        pool("t", &["10.9.0.0/24"], &["team"]),
    ]);
    let gw = a.allocate("d", &[ip("10.0.0.1")]).unwrap_err();
    assert!(matches!(
        gw,
        IpamError::Unusable {
            reason: "the gateway",
            ..
        }
    ));
    let bc = a.allocate("d", &[ip("10.0.0.255")]).unwrap_err();
    assert!(matches!(
        bc,
        IpamError::Unusable {
            reason: "the broadcast address",
            ..
        }
    ));
    let other = a.allocate("d", &[ip("10.9.0.7")]).unwrap_err();
    assert_eq!(
        other,
        IpamError::NotInPool {
            address: ip("10.9.0.7"),
            pool: "d".into()
        }
    );
    let nowhere = a.allocate("d", &[ip("192.168.0.1")]).unwrap_err();
    assert_eq!(
        nowhere,
        IpamError::OutsidePools {
            address: ip("192.168.0.1")
        }
    );
    let dup = a
        .allocate("d", &[ip("10.0.0.5"), ip("10.0.0.6")])
        .unwrap_err();
    assert!(matches!(dup, IpamError::DuplicateFamily { .. }));
    assert_eq!(
        a.allocate("d", &[ip("10.0.0.200")]).unwrap()[0]
            .address
            .to_string(),
        "10.0.0.200/24"
    );
    assert!(!a.is_free(ip("10.0.0.200")));
    assert!(a.is_free(ip("10.0.0.5")));
}

#[test]
fn pool_selection_by_name_address_namespace_default() {
    let a = alloc(vec![
        pool("d", &["10.0.0.0/24"], &[]),
        pool("t", &["10.9.0.0/24"], &["team", "ops"]),
    ]);
    assert_eq!(a.select_pool(None, None, &[]).unwrap(), "d");
    assert_eq!(a.select_pool(None, Some("ops"), &[]).unwrap(), "t");
    assert_eq!(a.select_pool(None, Some("other"), &[]).unwrap(), "d");
    assert_eq!(a.select_pool(Some("d"), Some("ops"), &[]).unwrap(), "d");
    assert_eq!(a.select_pool(None, None, &[ip("10.9.0.3")]).unwrap(), "t");
    let unknown = a.select_pool(Some("nope"), None, &[]).unwrap_err();
    assert_eq!(
        unknown,
        IpamError::UnknownPool {
            pool: "nope".into()
        }
    );
}

#[test]
fn mark_allocated_rebuilds_and_detects() {
    let mut a = alloc(vec![pool("p", &["10.0.0.0/29"], &[])]);
    a.mark_allocated(ip("10.0.0.2")).unwrap();
    assert_eq!(
        a.mark_allocated(ip("10.0.0.2")),
        Err(IpamError::InUse {
            address: ip("10.0.0.2")
        })
    );
    assert!(matches!(
        a.mark_allocated(ip("10.0.0.1")),
        Err(IpamError::Unusable { .. })
    ));
    assert!(matches!(
        a.mark_allocated(ip("10.5.0.1")),
        Err(IpamError::OutsidePools { .. })
    ));
    assert_eq!(
        a.allocate("p", &[]).unwrap()[0].address.addr(),
        ip("10.0.0.3")
    );
    assert!(
        !a.release(ip("10.0.0.1")),
        "the gateway is never put in the free set"
    );
}

#[test]
fn slash_31_and_32_have_no_network_or_broadcast() {
    let mut cfg = pool("p", &["10.0.0.0/31", "10.0.1.5/32"], &[]);
    cfg.gateways = vec![ip("10.0.0.0"), ip("10.0.1.5")];
    let err = Allocator::new(&IpamConfig {
        pools: vec![cfg.clone()],
    })
    .unwrap_err();
    assert_eq!(
        field_of(err),
        "ipam.pools[0].cidrs[1]",
        "a /32 that is its own gateway is empty"
    );
    cfg.cidrs.pop();
    cfg.gateways.pop();
    let mut a = alloc(vec![cfg]);
    assert_eq!(
        a.allocate("p", &[]).unwrap()[0].address.to_string(),
        "10.0.0.1/31"
    );
}

#[test]
fn config_errors_name_the_field() {
    let cases: Vec<(Vec<PoolConfig>, &str)> = vec![
        (vec![], "ipam.pools"),
        (vec![pool("", &["10.0.0.0/24"], &[])], "ipam.pools[0].name"),
        (vec![pool("a", &[], &[])], "ipam.pools[0].cidrs"),
        (
            vec![pool("a", &["10.0.0.1/24"], &[])],
            "ipam.pools[0].cidrs[0]",
        ),
        (
            vec![pool("a", &["10.0.0.0/24", "10.0.0.128/25"], &[])],
            "ipam.pools[0].cidrs[1]",
        ),
        (
            vec![
                pool("a", &["10.0.0.0/24"], &[]),
                pool("a", &["10.1.0.0/24"], &["x"]),
            ],
            "ipam.pools[1].name",
        ),
        (
            vec![
                pool("a", &["10.0.0.0/24"], &[]),
                pool("b", &["10.1.0.0/24"], &[]),
            ],
            "ipam.pools[1].namespaces",
        ),
        (
            vec![pool("a", &["10.0.0.0/24"], &["x"])],
            "ipam.pools[*].namespaces",
        ),
        (
            vec![
                pool("a", &["10.0.0.0/24"], &[]),
                pool("b", &["10.1.0.0/24"], &["x", "x"]),
            ],
            "ipam.pools[1].namespaces[1]",
        ),
        (
            vec![
                pool("a", &["10.0.0.0/24"], &[]),
                pool("b", &["10.0.0.0/16"], &["x"]),
            ],
            "ipam.pools[1].cidrs[0]",
        ),
    ];
    for (pools, field) in cases {
        let err = Allocator::new(&IpamConfig { pools }).unwrap_err();
        assert_eq!(field_of(err), field);
    }
    let mut bad_gw = pool("a", &["10.0.0.0/24"], &[]);
    bad_gw.gateways = vec![ip("10.0.0.255")];
    assert_eq!(
        field_of(
            Allocator::new(&IpamConfig {
                pools: vec![bad_gw]
            })
            .unwrap_err()
        ),
        "ipam.pools[0].gateways[0]"
    );
    for (i, r) in [
        "10.0.0.9-10.0.0.3",
        "10.0.0.1-fd00::1",
        "x",
        "192.168.0.0/24",
    ]
    .iter()
    .enumerate()
    {
        let mut p = pool("a", &["10.0.0.0/24"], &[]);
        p.reserved = vec!["10.0.0.200".into(), r.to_string()];
        let err = Allocator::new(&IpamConfig { pools: vec![p] }).unwrap_err();
        assert_eq!(field_of(err), "ipam.pools[0].reserved[1]", "case {i}: {r}");
    }
}
