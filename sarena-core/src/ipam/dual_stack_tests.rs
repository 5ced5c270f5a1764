//! Dual-stack and IPv6-only pools: one address per family, all or nothing.

use super::tests::{alloc, ip, pool};
use super::*;

fn addresses(got: &[crate::api::AllocatedAddress]) -> Vec<String> {
    got.iter().map(|a| a.address.to_string()).collect()
}

#[test]
fn an_exhausted_ipv6_cidr_fails_the_allocation_and_gives_the_ipv4_back() {
    // A /126 has two addresses to hand out besides the anycast and the gateway.
    let mut a = alloc(vec![pool("p", &["10.3.0.0/24", "fd00:3::/126"], &[])]);
    for _ in 0..2 {
        assert_eq!(a.allocate("p", &[]).unwrap().len(), 2);
    }
    let err = a.allocate("p", &[]).unwrap_err();
    assert_eq!(
        err,
        IpamError::Exhausted {
            pool: "p".into(),
            family: "IPv6"
        }
    );
    assert!(a.is_free(ip("10.3.0.4")), "the IPv4 it took was released");
    let states = a.pool_states();
    assert_eq!((states[0].allocated, states[1].allocated), (2, 2));
}

#[test]
fn an_exhausted_ipv4_cidr_takes_no_ipv6() {
    // A /30: network, gateway, one address, broadcast.
    let mut a = alloc(vec![pool("p", &["10.4.0.0/30", "fd00:4::/64"], &[])]);
    assert_eq!(
        addresses(&a.allocate("p", &[]).unwrap()),
        ["10.4.0.2/30", "fd00:4::2/64"]
    );
    assert!(matches!(
        a.allocate("p", &[]),
        Err(IpamError::Exhausted { family: "IPv4", .. })
    ));
    assert!(a.is_free(ip("fd00:4::3")));
    assert_eq!(a.pool_states()[1].allocated, 1);
}

#[test]
fn static_requests_name_either_family_or_both() {
    let mut a = alloc(vec![pool("p", &["10.5.0.0/24", "fd00:5::/64"], &[])]);
    // Both, in any order: the answer has IPv4 first.
    let got = a
        .allocate("p", &[ip("fd00:5::50"), ip("10.5.0.50")])
        .unwrap();
    assert_eq!(addresses(&got), ["10.5.0.50/24", "fd00:5::50/64"]);
    // IPv4 alone: IPv6 comes from the pool.
    let got = a.allocate("p", &[ip("10.5.0.60")]).unwrap();
    assert_eq!(addresses(&got), ["10.5.0.60/24", "fd00:5::2/64"]);
    // Two of one family is an error.
    let dup = a.allocate("p", &[ip("fd00:5::7"), ip("fd00:5::8")]);
    assert!(matches!(dup, Err(IpamError::DuplicateFamily { .. })));
    // An IPv6 in use fails the request and leaves its IPv4 free.
    let err = a.allocate("p", &[ip("fd00:5::50")]).unwrap_err();
    assert_eq!(
        err,
        IpamError::InUse {
            address: ip("fd00:5::50")
        }
    );
    assert!(a.is_free(ip("10.5.0.2")));
    // A static request for a family the pool does not serve.
    let mut ipv6_only = alloc(vec![pool("v6", &["fd00:6::/64"], &[])]);
    assert!(matches!(
        ipv6_only.allocate("v6", &[ip("10.6.0.5")]),
        Err(IpamError::OutsidePools { .. })
    ));
}

#[test]
fn per_namespace_dual_stack_pools_and_an_ipv6_only_default() {
    let mut a = alloc(vec![
        pool("default", &["fd00:10::/64"], &[]),
        pool("team", &["10.11.0.0/24", "fd00:11::/64"], &["team"]),
    ]);
    let team = a.select_pool(None, Some("team"), &[]).unwrap().to_owned();
    let got = a.allocate(&team, &[]).unwrap();
    assert_eq!(addresses(&got), ["10.11.0.2/24", "fd00:11::2/64"]);
    assert_eq!(got[1].gateway, ip("fd00:11::1"));
    assert!(got.iter().all(|g| g.pool == "team"));
    let default = a.select_pool(None, Some("other"), &[]).unwrap().to_owned();
    let got = a.allocate(&default, &[]).unwrap();
    assert_eq!(addresses(&got), ["fd00:10::2/64"]);
    // A static IPv6 address picks its pool.
    assert_eq!(
        a.select_pool(None, None, &[ip("fd00:11::9")]).unwrap(),
        "team"
    );
    // Released together.
    assert!(a.release(ip("10.11.0.2")) && a.release(ip("fd00:11::2")));
    assert!(a.is_free(ip("10.11.0.2")) && a.is_free(ip("fd00:11::2")));
}
