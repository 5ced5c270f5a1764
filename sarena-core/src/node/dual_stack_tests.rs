//! The node with dual-stack and IPv6-only pools: what a pod is told, and
//! all-or-nothing allocation, durably.

use std::net::IpAddr;

use super::*;
use crate::api::{AllocateRequest, Daemon, EndpointCreate, EndpointSpec, Inspect as _, PodRef};

const DUAL: &str = r#"
[[ipam.pools]]
name = "dual"
cidrs = ["10.60.0.0/24", "fd00:60::/126"]
"#;

fn req(c: &str, requested: &[&str]) -> AllocateRequest {
    AllocateRequest {
        owner: Attachment {
            container_id: c.into(),
            ifname: "eth0".into(),
        },
        pod: PodRef::default(),
        requested: requested.iter().map(|a| a.parse().unwrap()).collect(),
        pool: None,
    }
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn open(dir: &std::path::Path) -> Registry {
    Registry::open(dir, NodeConfig::from_toml_str(DUAL).unwrap()).unwrap()
}

#[tokio::test]
async fn a_dual_stack_pod_routes_ipv6_via_the_link_local_gateway_across_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let node = open(dir.path());
    let a = node.allocate(req("c1", &[])).await.unwrap();
    let shown: Vec<(String, String)> = a
        .addresses
        .iter()
        .map(|x| (x.address.to_string(), x.gateway.to_string()))
        .collect();
    assert_eq!(
        shown,
        [
            ("10.60.0.2/24".to_string(), "10.60.0.1".to_string()),
            ("fd00:60::2/126".to_string(), "fe80::1".to_string()),
        ]
    );
    let routes: Vec<String> = a.routes.iter().map(|r| r.dst.to_string()).collect();
    assert_eq!(routes, ["10.60.0.1/32", "0.0.0.0/0", "fe80::1/128", "::/0"]);
    assert_eq!(a.routes[3].gw, Some(ip("fe80::1")));
    // The pool's own IPv6 gateway stays what the pool says (the host's).
    let state = node.ipam_state().await.unwrap();
    assert_eq!(state.pools[1].gateway, ip("fd00:60::1"));
    drop(node);
    let node = open(dir.path());
    let again = node.allocate(req("c1", &[])).await.unwrap();
    assert_eq!(again.addresses, a.addresses);
    assert_eq!(again.routes, a.routes);
}

#[tokio::test]
async fn a_partial_allocation_fails_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let node = open(dir.path());
    node.allocate(req("c1", &[])).await.unwrap();
    node.allocate(req("c2", &[])).await.unwrap();
    // The /126 has no IPv6 left; IPv4 has plenty.
    let err = node.allocate(req("c3", &[])).await.unwrap_err();
    assert!(crate::error_chain(&err).contains("IPv6"), "{err}");
    // A static IPv4 request fails the same way, with nothing taken.
    assert!(node.allocate(req("c4", &["10.60.0.99"])).await.is_err());
    let check = |state: crate::api::IpamState| {
        let owners: Vec<&str> = state
            .allocations
            .iter()
            .map(|r| r.owner.container_id.as_str())
            .collect();
        assert_eq!(owners.len(), 4, "{owners:?}");
        assert!(
            owners.iter().all(|o| *o == "c1" || *o == "c2"),
            "{owners:?}"
        );
        assert_eq!(state.pools[0].allocated, 2);
        assert_eq!(state.pools[1].allocated, 2);
    };
    check(node.ipam_state().await.unwrap());
    drop(node);
    let node = open(dir.path());
    check(node.ipam_state().await.unwrap());
    // Releasing one pod gives both of its addresses back.
    let held = node.allocate(req("c1", &[])).await.unwrap();
    node.create_endpoint(EndpointCreate {
        spec: EndpointSpec {
            owner: held.owner.clone(),
            pod: PodRef::default(),
            host_ifname: "lxc1".into(),
            host_ifindex: 9,
            host_mac: "02:00:00:00:00:01".parse().unwrap(),
            pod_mac: "02:00:00:00:00:02".parse().unwrap(),
            addresses: held.addresses.iter().map(|a| a.address).collect(),
            netns: "/var/run/netns/x".into(),
            bandwidth: None,
            identity: Default::default(),
        },
    })
    .await
    .unwrap();
    node.delete_endpoint(held.owner.clone()).await.unwrap();
    let c3 = node.allocate(req("c3", &[])).await.unwrap();
    let got: Vec<IpAddr> = c3.addresses.iter().map(|a| a.address.addr()).collect();
    assert!(got.contains(&ip("fd00:60::2")), "{got:?}");
}

#[tokio::test]
async fn an_ipv6_only_pool_hands_out_one_address_and_ipv6_routes() {
    let dir = tempfile::tempdir().unwrap();
    let config = "[[ipam.pools]]\nname = \"v6\"\ncidrs = [\"fd00:61::/64\"]\n";
    let node = Registry::open(dir.path(), NodeConfig::from_toml_str(config).unwrap()).unwrap();
    let a = node.allocate(req("c1", &[])).await.unwrap();
    assert_eq!(a.addresses.len(), 1);
    assert_eq!(a.addresses[0].address.to_string(), "fd00:61::2/64");
    assert!(a.routes.iter().all(|r| r.dst.addr().is_ipv6()));
    // The embedded default stays IPv4 only.
    assert!(
        NodeConfig::default()
            .ipam
            .pools
            .iter()
            .flat_map(|p| &p.cidrs)
            .all(|c| c.addr().is_ipv4())
    );
}
