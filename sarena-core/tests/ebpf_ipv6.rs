//! IPv6 and dual-stack pods on the eBPF programs, against the real kernel:
//! pods configured as an ADD would (`fe80::1` as the IPv6 gateway, no DAD),
//! the programs attached, no host route and no gateway address anywhere on
//! the host, so every pod ↔ pod frame that arrives went through the
//! programs and every neighbour advertisement the pods get came from them.
//!
//! Privileged (root and the eBPF object): `#[ignore]`d unless included, see
//! `sarena_test_support::require_root`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod ebpf;

use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use ebpf::NftTable;
use ebpf::ipv6::{
    GATEWAY4, GATEWAY6, POOL_GATEWAY6, assert_usable_at_once, dual_stack_pod, ipv6_pod,
};
use sarena_core::dataplane::ebpf::AyaDataplane;
use sarena_core::dataplane::{Dataplane, KernelDataplane, NodeNetwork};
use sarena_core::links::RtnetlinkLinks;
use sarena_test_support::{
    HostStack, PinDir, Pod, SysctlGuard, require_ebpf_object, require_root, run, tcp_exchange,
    tcp_exchange_at, tcp_exchange_to,
};

/// The host has no route through either pod's veth, in either family
/// (but the link-local prefix every IPv6 interface has): only the programs
/// can carry pod ↔ pod traffic.
fn assert_no_host_routes(pods: &[&Pod]) {
    for pod in pods {
        let routes = run(&["ip", "route", "show", "table", "all", "dev", pod.ifname()]);
        let routes6 = run(&[
            "ip",
            "-6",
            "route",
            "show",
            "table",
            "all",
            "dev",
            pod.ifname(),
        ]);
        let ours: Vec<&str> = routes
            .lines()
            .chain(routes6.lines())
            .filter(|l| !l.starts_with("fe80::/64") && !l.contains("table local"))
            .filter(|l| !l.starts_with("multicast") && !l.starts_with("local fe80"))
            .collect();
        assert!(
            ours.is_empty(),
            "host routes via {}: {ours:?}",
            pod.ifname()
        );
    }
}

#[tokio::test]
#[ignore = "privileged: needs root and the eBPF object; run as root with --include-ignored (scripts/test.sh)"]
async fn dual_stack_pods_ping_and_talk_tcp_over_both_families_through_the_programs() {
    let test = "dual_stack_pods_ping_and_talk_tcp_over_both_families_through_the_programs";
    require_root(test);
    let object = require_ebpf_object(test);
    let pins = PinDir::new();
    let links = RtnetlinkLinks::new().unwrap();
    let (a, b) = (
        dual_stack_pod(&links, 2).await,
        dual_stack_pod(&links, 3).await,
    );
    assert_usable_at_once(&a);
    assert_no_host_routes(&[&a, &b]);
    assert!(!a.ping6(&b, 1), "pods talk IPv6 without the dataplane?");

    let dp = AyaDataplane::open(&object, &pins.0).unwrap();
    dp.attach(&a.endpoint).await.unwrap();
    dp.attach(&b.endpoint).await.unwrap();
    assert_eq!(dp.ipv6_endpoint_entries().unwrap().len(), 2);
    assert_eq!(dp.endpoint_entries().unwrap().len(), 2);
    let veth = dp.veth_entry(a.endpoint.spec.host_ifindex).unwrap();
    assert_eq!(veth.host_mac, a.endpoint.spec.host_mac.octets());

    assert!(a.ping6(&b, 3), "a → b over IPv6");
    assert!(b.ping6(&a, 3), "b → a over IPv6");
    assert!(a.ping(&b, 3), "a → b over IPv4");
    let v6 = IpAddr::V6(b.ip6());
    assert_eq!(tcp_exchange_to(&a, &b, v6, 4 << 20), 4 << 20);
    assert_eq!(tcp_exchange(&a, &b, 1 << 20), 1 << 20);
    assert_no_host_routes(&[&a, &b]);

    let ca = dp.counters(a.endpoint.spec.host_ifindex).unwrap().unwrap();
    let cb = dp.counters(b.endpoint.spec.host_ifindex).unwrap().unwrap();
    // IPv6: 3 + 3 echoes from a (requests, then replies), 4 MiB of TCP;
    // IPv4: 3 echoes, 1 MiB.
    assert!(ca.ipv6_redirected_packets >= 6, "{ca:?}");
    assert!(cb.ipv6_redirected_packets >= 6, "{cb:?}");
    assert!(
        ca.redirected_packets >= ca.ipv6_redirected_packets + 3,
        "IPv4 redirected too: {ca:?}"
    );
    assert!(
        ca.ipv6_from_pod_packets >= ca.ipv6_redirected_packets,
        "{ca:?}"
    );
    assert!(ca.from_pod_bytes >= 5 << 20, "{ca:?}");
    assert!(cb.to_pod_bytes >= 5 << 20, "{cb:?}");
    assert!(ca.ndp_replies >= 1 && cb.ndp_replies >= 1, "{ca:?} {cb:?}");
    assert!(ca.arp_replies >= 1, "{ca:?}");
    assert_eq!(ca.total_drops() + cb.total_drops(), 0, "{ca:?} {cb:?}");

    // The gateway fe80::1 exists nowhere on the host: the program answered
    // for it, with the host end's MAC.
    let neigh = a
        .netns
        .exec(&["ip", "-6", "neigh", "show", GATEWAY6, "dev", "eth0"]);
    assert!(
        neigh.contains(&a.endpoint.spec.host_mac.to_string()),
        "{neigh}"
    );
    assert!(neigh.contains("router"), "advertised as a router: {neigh}");
    assert!(
        !run(&["ip", "-o", "-6", "addr", "show", "dev", a.ifname()])
            .contains(&format!(" {GATEWAY6}/")),
        "the gateway address exists on the host veth; the test proves nothing"
    );
}

#[tokio::test]
#[ignore = "privileged: needs root and the eBPF object; run as root with --include-ignored (scripts/test.sh)"]
async fn ipv6_only_pods_talk_and_detach_removes_their_entries() {
    let test = "ipv6_only_pods_talk_and_detach_removes_their_entries";
    require_root(test);
    let object = require_ebpf_object(test);
    let pins = PinDir::new();
    let links = RtnetlinkLinks::new().unwrap();
    let (a, b) = (ipv6_pod(&links, 0x12).await, ipv6_pod(&links, 0x13).await);
    assert_usable_at_once(&b);
    let dp = AyaDataplane::open(&object, &pins.0).unwrap();
    dp.attach(&a.endpoint).await.unwrap();
    dp.attach(&b.endpoint).await.unwrap();
    assert!(dp.endpoint_entries().unwrap().is_empty(), "no IPv4 entry");
    assert!(a.ping6(&b, 2) && b.ping6(&a, 2));
    let v6 = IpAddr::V6(b.ip6());
    assert_eq!(tcp_exchange_to(&a, &b, v6, 1 << 20), 1 << 20);
    let ca = dp.counters(a.endpoint.spec.host_ifindex).unwrap().unwrap();
    assert_eq!(
        ca.redirected_packets, ca.ipv6_redirected_packets,
        "IPv6 only: {ca:?}"
    );
    assert!(ca.ipv6_redirected_packets >= 4, "{ca:?}");

    dp.detach(&b.endpoint).await.unwrap();
    let entries = dp.ipv6_endpoint_entries().unwrap();
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_eq!(entries[0].0, a.ip6());
    assert!(dp.veth_entry(b.endpoint.spec.host_ifindex).is_none());
    assert!(dp.counters(b.endpoint.spec.host_ifindex).unwrap().is_none());
    assert!(!a.ping6(&b, 1), "b reachable after detach");
    dp.detach(&a.endpoint).await.unwrap();
    assert!(dp.ipv6_endpoint_entries().unwrap().is_empty());
    assert!(dp.veth_entry(a.endpoint.spec.host_ifindex).is_none());
}

#[tokio::test]
#[ignore = "privileged: needs root and the eBPF object; run as root with --include-ignored (scripts/test.sh)"]
async fn an_ipv6_flow_the_host_stack_translated_stays_on_the_host_stack() {
    let test = "an_ipv6_flow_the_host_stack_translated_stays_on_the_host_stack";
    require_root(test);
    let object = require_ebpf_object(test);
    // The host stack forwards IPv6 between the pods (set-up turns it on).
    let _forwarding = SysctlGuard::save("net/ipv6/conf/all/forwarding");
    let pins = PinDir::new();
    let host = HostStack::new();
    let links = RtnetlinkLinks::new().unwrap();
    let kernel = KernelDataplane::with_names(host.names.clone())
        .unwrap()
        .without_antispoof();
    let dp = AyaDataplane::open(&object, &pins.0)
        .unwrap()
        .with_host_stack(Arc::new(kernel));
    dp.setup(&NodeNetwork {
        gateways: vec![GATEWAY4.parse().unwrap(), POOL_GATEWAY6.parse().unwrap()],
        pools: vec![
            "10.249.0.0/24".parse().unwrap(),
            "fd00:249::/64".parse().unwrap(),
        ],
        masquerade: false,
        exempt: Vec::new(),
    })
    .await
    .unwrap();
    let (a, b) = (ipv6_pod(&links, 0x22).await, ipv6_pod(&links, 0x23).await);
    dp.attach(&a.endpoint).await.unwrap();
    dp.attach(&b.endpoint).await.unwrap();

    // A Service in kube-proxy's shape: its address translated to b's by the
    // host stack (DNAT in prerouting), which a's connection goes through.
    let service: Ipv6Addr = "fd00:ffff:249::10".parse().unwrap();
    let _table = NftTable::load(
        "ip6",
        &format!(
            "chain pre {{\n type nat hook prerouting priority dstnat; policy accept;\n \
             ip6 daddr {service} tcp dport 80 dnat to {b}\n}}\n",
            b = b.ip6(),
        ),
    );

    // Direct pod -> pod still takes the fast path.
    assert!(a.ping6(&b, 2));
    let before = dp.counters(b.endpoint.spec.host_ifindex).unwrap().unwrap();
    // Port 80 in b's own netns.
    let listen = SocketAddr::from((b.ip6(), 80));
    let through = SocketAddr::from((service, 80));
    assert_eq!(
        tcp_exchange_at(&a, &b, listen, Some(through), 1 << 20),
        1 << 20
    );
    let after = dp.counters(b.endpoint.spec.host_ifindex).unwrap().unwrap();
    assert!(
        after.host_flows_recorded > before.host_flows_recorded,
        "to_container recorded the translated flow: {after:?}"
    );
    assert!(
        after.host_stack_flow_packets > before.host_stack_flow_packets,
        "b's answers went back through the host stack: {after:?}"
    );
    assert_eq!(
        after.ipv6_redirected_packets, before.ipv6_redirected_packets,
        "none of the Service's packets was redirected: {after:?}"
    );
    let ca = dp.counters(a.endpoint.spec.host_ifindex).unwrap().unwrap();
    assert!(ca.ipv6_redirected_packets >= 2, "{ca:?}");
    // The pod reaches the host, whose pool gateway address it routes to via
    // fe80::1 (now also on its host veth).
    assert!(a.ping_addr(POOL_GATEWAY6, 1), "pod -> host over IPv6");
    let on_veth = run(&["ip", "-o", "-6", "addr", "show", "dev", a.ifname()]);
    assert!(on_veth.contains(&format!(" {GATEWAY6}/64")), "{on_veth}");
}
