//! eBPF host routing across nodes, against the real kernel: this node (the
//! test's netns, the eBPF dataplane on its pods and on its uplink) and
//! another node with a pod of its own (namespaces behind the uplink).
//!
//! - Pod <-> other node's pod, IPv4 and IPv6: once the other node's pod
//!   CIDRs are in the map, neither direction goes through this node's host
//!   stack (a forward-chain counter stays put; it counts without them), and
//!   the node counters show the direct path both ways.
//! - The Services rule across nodes: a connection to a Service this node
//!   translates to the other node's pod, and one from the other node's pod
//!   to a port this node translates to a local pod (NodePort, hostPort),
//!   stay on the host stack both ways, so conntrack translates the answers
//!   back; without the flow records either fails.
//! - NetworkPolicy on the direct path in: denied (counted on the pod and
//!   the node) until an entry allows the other node's pod.
//!
//! Privileged (root and the eBPF object): `#[ignore]`d unless included.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod ebpf;

use std::net::{IpAddr, Ipv4Addr};

use ebpf::peer::*;
use ebpf::policy::{ID_C, allow_tcp, connects_ns, drops, isolate};
use ebpf::{NftTable, TestDataplane};
use ipnet::IpNet;
use sarena_core::dataplane::ebpf::{DropReason, NodeCounters};
use sarena_core::dataplane::{Dataplane, NodeNetwork};
use sarena_core::links::RtnetlinkLinks;
use sarena_core::policy::{Direction, IpcacheEntry};
use sarena_test_support::{HostStack, Pod, SysctlGuard};

/// One test at a time: they share the addresses and routes of the two
/// nodes.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A node with the eBPF dataplane on two local pods, and the other node.
struct Nodes {
    t: TestDataplane,
    a: Pod,
    b: Pod,
    peer: PeerNode,
    _host: HostStack,
    _forwarding: [SysctlGuard; 2],
    _serial: tokio::sync::MutexGuard<'static, ()>,
}

async fn nodes(test: &str) -> Nodes {
    let serial = SERIAL.lock().await;
    let t = TestDataplane::open(test);
    let forwarding = [
        SysctlGuard::save("net/ipv4/ip_forward"),
        SysctlGuard::save("net/ipv6/conf/all/forwarding"),
    ];
    let host = HostStack::new();
    let links = RtnetlinkLinks::new().unwrap();
    let t = t.with_kernel_host(&host);
    t.dp.setup(&NodeNetwork {
        gateways: vec![
            LOCAL_GATEWAY4.parse().unwrap(),
            LOCAL_GATEWAY6.parse().unwrap(),
        ],
        pools: LOCAL_PODS.iter().map(|p| p.parse().unwrap()).collect(),
        masquerade: false,
        exempt: Vec::new(),
    })
    .await
    .unwrap();
    let pod = |host: u8| {
        let links = &links;
        async move {
            Pod::with_addresses(
                links,
                &[
                    (&format!("10.248.0.{host}/24"), LOCAL_GATEWAY4),
                    (&format!("fd00:248::{host:x}/64"), LOCAL_GATEWAY6),
                ],
            )
            .await
        }
    };
    let (a, b) = (pod(2).await, pod(3).await);
    t.attach(&[&a, &b]).await;
    let peer = PeerNode::new();
    t.dp.attach_network_hook(&peer.uplink).await.unwrap();
    Nodes {
        t,
        a,
        b,
        peer,
        _host: host,
        _forwarding: forwarding,
        _serial: serial,
    }
}

fn peer_pods() -> Vec<IpNet> {
    PEER_PODS.iter().map(|p| p.parse().unwrap()).collect()
}

fn counters(n: &Nodes) -> NodeCounters {
    n.t.dp.node_counters().unwrap()
}

/// A forward-chain table counting this node's host-stack forwarding to
/// and from the other node's pods (rules: v4 to, v4 from, v6 to, v6 from).
fn forward_counter() -> NftTable {
    NftTable::load(
        "inet",
        &format!(
            "chain forwarded {{\n type filter hook forward priority filter - 5; policy accept;\n \
             ip daddr {p4} counter\n ip saddr {p4} counter\n \
             ip6 daddr {p6} counter\n ip6 saddr {p6} counter\n}}\n",
            p4 = PEER_PODS[0],
            p6 = PEER_PODS[1],
        ),
    )
}

fn forwarded(table: &NftTable) -> u64 {
    nft_counts("inet", table.name()).iter().sum()
}

#[tokio::test]
#[ignore = "privileged: needs root and the eBPF object; run as root with --include-ignored (scripts/test.sh)"]
async fn pods_reach_another_nodes_pods_without_the_host_stack() {
    let n = nodes("pods_reach_another_nodes_pods_without_the_host_stack").await;
    let fwd = forward_counter();
    let (a, peer) = (&n.a, &n.peer);
    let a_ns = a.netns.path();
    let a4 = IpAddr::V4(a.ip());

    // Without the other node's CIDRs in the map: the host stack forwards.
    assert!(connects_ns(
        &a_ns,
        &peer.pod.path(),
        peer.pod4(),
        peer.pod4(),
        7001
    ));
    assert!(connects_ns(&peer.pod.path(), &a_ns, a4, a4, 7002));
    let a6 = IpAddr::V6(a.ip6());
    assert!(connects_ns(
        &a_ns,
        &peer.pod.path(),
        peer.pod6(),
        peer.pod6(),
        7012
    ));
    assert!(connects_ns(&peer.pod.path(), &a_ns, a6, a6, 7013));
    let slow = forwarded(&fwd);
    assert!(slow > 0, "the host stack forwarded nothing");
    assert_eq!(counters(&n), NodeCounters::default());

    n.t.dp.set_peer_pods(&peer_pods()).unwrap();
    sarena_test_support::run(&["ip", "neigh", "flush", "dev", &peer.uplink]);
    let mut listed = n.t.dp.peer_pods().unwrap();
    listed.sort();
    assert_eq!(listed, peer_pods());

    // Both ways, both families, started from either end (the next hop
    // unresolved first: the kernel's neighbour resolution): no packet
    // through this node's forward chain, every one on the direct paths.
    assert!(connects_ns(
        &a_ns,
        &peer.pod.path(),
        peer.pod4(),
        peer.pod4(),
        7003
    ));
    assert!(connects_ns(&peer.pod.path(), &a_ns, a4, a4, 7004));
    assert!(connects_ns(
        &a_ns,
        &peer.pod.path(),
        peer.pod6(),
        peer.pod6(),
        7005
    ));
    assert!(connects_ns(&peer.pod.path(), &a_ns, a6, a6, 7006));
    assert_eq!(forwarded(&fwd), slow, "{:?}", counters(&n));
    let c = counters(&n);
    assert!(c.to_peer_redirected + c.to_peer_neigh >= 8, "{c:?}");
    assert!(c.to_peer_neigh >= 1, "{c:?}");
    assert!(c.from_peer_redirected >= 8, "{c:?}");
    assert_eq!(c.to_peer_host_flow + c.from_peer_host_flow, 0, "{c:?}");
    assert!(n.t.counters(a).redirected_packets >= 8);

    // Gone from the map: the host stack again.
    n.t.dp.set_peer_pods(&[]).unwrap();
    assert!(n.t.dp.peer_pods().unwrap().is_empty());
    assert!(connects_ns(
        &a_ns,
        &peer.pod.path(),
        peer.pod4(),
        peer.pod4(),
        7007
    ));
    assert!(forwarded(&fwd) > slow);
}

#[tokio::test]
#[ignore = "privileged: needs root and the eBPF object; run as root with --include-ignored (scripts/test.sh)"]
async fn translated_flows_across_nodes_stay_on_the_host_stack_both_ways() {
    let n = nodes("translated_flows_across_nodes_stay_on_the_host_stack_both_ways").await;
    n.t.dp.set_peer_pods(&peer_pods()).unwrap();
    let (a, b, peer) = (&n.a, &n.b, &n.peer);
    // A Service this node translates to the other node's pod, and a port
    // of this node's translated to b (kube-proxy's and portmap's DNAT; the
    // helpers listen on the port they connect to).
    let service = Ipv4Addr::new(10, 248, 200, 10);
    let _nat = NftTable::load(
        "ip",
        &format!(
            "chain pre {{\n type nat hook prerouting priority dstnat; policy accept;\n \
             ip daddr {service} tcp dport 8080 dnat to {remote}\n \
             ip daddr {UNDERLAY4} tcp dport 30080 dnat to {b}\n}}\n",
            remote = peer.pod4(),
            b = b.ip(),
        ),
    );
    // a -> Service -> the other node's pod: the answer comes back through
    // the host stack (to be translated back), not straight into a.
    assert!(connects_ns(
        &a.netns.path(),
        &peer.pod.path(),
        peer.pod4(),
        IpAddr::V4(service),
        8080
    ));
    let c = counters(&n);
    assert!(c.from_peer_host_flow >= 2, "{c:?}");
    assert!(c.peer_flows_recorded >= 1, "{c:?}");

    // The other node's pod -> this node's port -> b: b's answer goes back
    // through the host stack, not straight to the other node.
    assert!(connects_ns(
        &peer.pod.path(),
        &b.netns.path(),
        IpAddr::V4(b.ip()),
        IpAddr::V4(UNDERLAY4),
        30080
    ));
    let c = counters(&n);
    assert!(c.to_peer_host_flow >= 2, "{c:?}");
    assert!(c.peer_flows_recorded >= 2, "{c:?}");
}

#[tokio::test]
#[ignore = "privileged: needs root and the eBPF object; run as root with --include-ignored (scripts/test.sh)"]
async fn policy_judges_other_nodes_pods_on_the_direct_path_in() {
    let n = nodes("policy_judges_other_nodes_pods_on_the_direct_path_in").await;
    n.t.dp.set_peer_pods(&peer_pods()).unwrap();
    let (b, peer) = (&n.b, &n.peer);
    let b4 = IpAddr::V4(b.ip());
    let remote = IpNet::new(peer.pod4(), 32).unwrap();
    n.t.dp
        .policy_maps(|m| {
            let entry = IpcacheEntry {
                identity: ID_C,
                flags: 2,
            };
            m.set_ipcache(remote, entry)
        })
        .unwrap();
    isolate(&n.t.dp, b, true, false);
    assert!(!connects_ns(&peer.pod.path(), &b.netns.path(), b4, b4, 80));
    assert!(drops(&n.t, b, DropReason::PolicyDeniedIngress) >= 1);
    assert!(counters(&n).from_peer_policy_denied >= 1);

    allow_tcp(&n.t.dp, b, Direction::Ingress, ID_C, 80);
    assert!(connects_ns(&peer.pod.path(), &b.netns.path(), b4, b4, 80));
    // Another port stays denied.
    assert!(!connects_ns(&peer.pod.path(), &b.netns.path(), b4, b4, 81));
}
