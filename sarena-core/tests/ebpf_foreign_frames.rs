//! What a pod may not hand the node at all, against the real kernel (issue
//! 25, point 2): ARP for anything but IPv4 over Ethernet, neighbour
//! discovery from link-local addresses that are not the pod's, and frames
//! of any EtherType but IPv4, IPv6 and ARP. Each is dropped and counted,
//! and the proof is on the host side: the host veth's neighbour table
//! gains no entry for a forged address however many the pod sends, and a
//! packet socket on the host veth receives nothing a program dropped.
//!
//! The floods are 400 forged senders (and 100 forged advertisements): enough
//! to show that what the pod sends, not a constant, sets the count of
//! entries without the checks (each one an entry), and well below the
//! kernel's `gc_thresh3` (1024 by default), which every namespace of the
//! machine shares.
//!
//! Privileged (root and the eBPF object): `#[ignore]`d unless included, see
//! `sarena_test_support::require_root`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod ebpf;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use ebpf::frames::{
    BROADCAST, ETH_P_IP, ETH_P_IPV6, HTYPE_ETHERNET, HTYPE_IEEE802, arp_request, ethernet,
};
use ebpf::frames6::{ALL_ROUTERS, ICMPV6, advertisement, frame, icmpv6, router_solicitation};
use ebpf::ipv6::dual_stack_pod;
use ebpf::raw::{HostListener, send_raw_frames};
use ebpf::{TestDataplane, host_neighbours};
use sarena_core::dataplane::ebpf::DropReason;
use sarena_core::links::{RtnetlinkLinks, link_local};
use sarena_test_support::{Pod, run};

/// How many forged senders each flood uses.
const FLOOD: u16 = 400;
/// How many forged link-local targets the pod advertises: with the
/// solicitations' sources, still below the IPv6 table's `gc_thresh2` (512),
/// past which the kernel collects entries and the count would say less.
const ADVERTISED: u16 = 100;

/// Writes the IPv6 parameter `key` of `pod`'s host veth (gone with the veth).
fn host_ipv6_conf(pod: &Pod, key: &str, value: &str) {
    let path = format!("/proc/sys/net/ipv6/conf/{}/{key}", pod.ifname());
    std::fs::write(&path, value).unwrap_or_else(|e| panic!("write {path}: {e}"));
}

#[tokio::test]
#[ignore = "privileged: needs root and the eBPF object; run as root with --include-ignored (scripts/test.sh)"]
async fn arp_other_than_ipv4_over_ethernet_is_dropped_and_teaches_the_node_nothing() {
    let test = "arp_other_than_ipv4_over_ethernet_is_dropped_and_teaches_the_node_nothing";
    let dp = TestDataplane::open(test);
    let links = RtnetlinkLinks::new().unwrap();
    let a = Pod::new(&links, "10.237.0.2/22", "10.237.0.1").await;
    // An address of the node on the pod's link, for the requests to ask
    // for: the host answers ARP for its own addresses, and learns the
    // asker's address as it does (gone with the veth).
    let node: Ipv4Addr = "10.237.0.1".parse().unwrap();
    run(&["ip", "addr", "add", "10.237.0.1/22", "dev", a.ifname()]);
    dp.attach(&[&a]).await;

    // The oracle works: the node learns the pod's own address from its
    // genuine traffic.
    assert!(
        a.ping_addr(&node.to_string(), 1),
        "the pod reaches the node"
    );
    let learned = host_neighbours(a.ifname(), "-4");
    assert!(learned.contains(&IpAddr::V4(a.ip())), "{learned:?}");

    // Requests for the node's address from forged senders in the pod's
    // subnet, with hardware type 6: the checks for Ethernet's do not apply.
    let forged: Vec<Ipv4Addr> = (0..FLOOD)
        .map(|i| Ipv4Addr::new(10, 237, 1 + (i >> 8) as u8, i as u8))
        .collect();
    let mut frames: Vec<Vec<u8>> = forged
        .iter()
        .map(|sender| arp_request(&a, HTYPE_IEEE802, ETH_P_IP, *sender, node))
        .collect();
    // IPv6 as ARP's protocol type, as itself: no such thing.
    frames.push(arp_request(&a, HTYPE_ETHERNET, ETH_P_IPV6, a.ip(), node));
    send_raw_frames(&a, frames);
    std::thread::sleep(Duration::from_millis(200));

    let learned = host_neighbours(a.ifname(), "-4");
    let taught = learned
        .iter()
        .filter(|n| matches!(n, IpAddr::V4(v4) if forged.contains(v4)))
        .count();
    assert_eq!(
        taught,
        0,
        "{taught} of {FLOOD} forged senders in the node's neighbour table ({} entries on the veth)",
        learned.len()
    );
    let c = dp.counters(&a);
    assert_eq!(
        c.dropped(DropReason::UnsupportedArp),
        u64::from(FLOOD) + 1,
        "{c:?}"
    );
    assert_eq!(c.dropped(DropReason::SpoofedArp), 0, "{c:?}");
    // Its genuine ARP still works: its gateway's entry is gone and comes back.
    a.netns.exec(&["ip", "neigh", "flush", "dev", "eth0"]);
    assert!(
        a.ping_addr(&node.to_string(), 1),
        "the pod still reaches the node"
    );
}

#[tokio::test]
#[ignore = "privileged: needs root and the eBPF object; run as root with --include-ignored (scripts/test.sh)"]
async fn neighbour_discovery_from_foreign_link_local_addresses_leaves_the_node_no_entry() {
    let test = "neighbour_discovery_from_foreign_link_local_addresses_leaves_the_node_no_entry";
    let dp = TestDataplane::open(test);
    let links = RtnetlinkLinks::new().unwrap();
    let (a, b) = (
        dual_stack_pod(&links, 2).await,
        dual_stack_pod(&links, 3).await,
    );
    dp.attach(&[&a, &b]).await;
    assert!(a.ping6(&b, 1));
    // The node as it learns most from a pod: a router (IPv6 forwarding on,
    // as on every node with IPv6 pods: router solicitations are processed,
    // each teaching the node its source), and one that also learns from
    // advertisements nobody asked for (accept_untracked_na, off by default).
    host_ipv6_conf(&a, "forwarding", "1");
    host_ipv6_conf(&a, "accept_untracked_na", "1");

    let pod_mac = a.endpoint.spec.pod_mac.octets();
    let own_ll = link_local(a.endpoint.spec.pod_mac);
    let all_nodes: Ipv6Addr = "ff02::1".parse().unwrap();
    let solicit_router = |src: Ipv6Addr| {
        let rs = router_solicitation(src, pod_mac);
        frame(&a, src, ALL_ROUTERS, ICMPV6, 255, &rs)
    };
    let advertise = |target: Ipv6Addr| {
        let mut na = advertisement(target);
        na.extend_from_slice(&[2, 1]); // target link-layer address
        na.extend_from_slice(&pod_mac);
        frame(
            &a,
            own_ll,
            all_nodes,
            ICMPV6,
            255,
            &icmpv6(own_ll, all_nodes, na),
        )
    };

    // The oracle works: the pod's own router solicitation teaches the node
    // its link-local address.
    send_raw_frames(&a, vec![solicit_router(own_ll)]);
    std::thread::sleep(Duration::from_millis(100));
    let learned = host_neighbours(a.ifname(), "-6");
    assert!(learned.contains(&IpAddr::V6(own_ll)), "{learned:?}");

    // Router solicitations from forged link-local sources, and
    // advertisements of forged link-local targets.
    let forged = |group: u16, i: u16| Ipv6Addr::new(0xfe80, 0, 0, 0, 0xbad, group, 0, i);
    let mut frames: Vec<Vec<u8>> = (0..FLOOD).map(|i| solicit_router(forged(1, i))).collect();
    frames.extend((0..ADVERTISED).map(|i| advertise(forged(2, i))));
    send_raw_frames(&a, frames);
    std::thread::sleep(Duration::from_millis(200));

    let learned = host_neighbours(a.ifname(), "-6");
    let taught: Vec<&IpAddr> = learned
        .iter()
        .filter(|n| matches!(n, IpAddr::V6(v6) if v6.segments()[4] == 0xbad))
        .collect();
    assert!(
        taught.is_empty(),
        "{} of {} forged link-local addresses in the node's neighbour table",
        taught.len(),
        FLOOD + ADVERTISED
    );
    // What the pod can make the node hold: its link-local address and its
    // own addresses, nothing more.
    assert!(learned.len() <= 2, "{learned:?}");
    let c = dp.counters(&a);
    assert_eq!(
        c.dropped(DropReason::SpoofedSourceIpv6),
        u64::from(FLOOD),
        "{c:?}"
    );
    assert_eq!(
        c.dropped(DropReason::SpoofedNdp),
        u64::from(ADVERTISED),
        "{c:?}"
    );
    // Its own neighbour discovery still works: the gateway's entry is gone
    // and comes back.
    a.netns.exec(&["ip", "-6", "neigh", "flush", "dev", "eth0"]);
    assert!(a.ping6(&b, 1), "IPv6 still flows");
    assert_eq!(dp.counters(&b).total_drops(), 0);
}

#[tokio::test]
#[ignore = "privileged: needs root and the eBPF object; run as root with --include-ignored (scripts/test.sh)"]
async fn frames_of_other_ether_types_are_dropped_before_the_host_stack() {
    let test = "frames_of_other_ether_types_are_dropped_before_the_host_stack";
    let dp = TestDataplane::open(test);
    let links = RtnetlinkLinks::new().unwrap();
    let a = Pod::new(&links, "10.236.0.2/24", "10.236.0.1").await;
    dp.attach(&[&a]).await;

    const LLDP: u16 = 0x88cc;
    const EAPOL: u16 = 0x888e;
    const PPPOE_DISCOVERY: u16 = 0x8863;
    const PPPOE_SESSION: u16 = 0x8864;
    const MPLS: u16 = 0x8847;
    const VLAN: u16 = 0x8100;
    const QINQ: u16 = 0x88a8;
    /// The local experimental EtherType, inside the VLAN tags.
    const EXPERIMENTAL: u16 = 0x88b5;
    /// What the host stack calls an 802.3 frame with an LLC header.
    const ETH_P_802_2: u16 = 0x0004;
    let listener = HostListener::new(
        a.ifname(),
        &[
            LLDP,
            EAPOL,
            PPPOE_DISCOVERY,
            PPPOE_SESSION,
            MPLS,
            EXPERIMENTAL,
            ETH_P_802_2,
            ETH_P_IP,
        ],
    );
    let host_mac = a.endpoint.spec.host_mac.octets();
    let tagged = |tpid: u16, vid: u16| {
        let mut payload = vid.to_be_bytes().to_vec();
        payload.extend_from_slice(&EXPERIMENTAL.to_be_bytes());
        payload.extend_from_slice(b"tagged");
        ethernet(&a, host_mac, tpid, &payload)
    };
    // An IPv4 header from the pod's own address to its gateway.
    let mut ipv4 = vec![0x45, 0, 0, 20, 0, 0, 0, 0, 64, 253, 0, 0];
    ipv4.extend_from_slice(&a.ip().octets());
    ipv4.extend_from_slice(&[10, 236, 0, 1]);
    let mut mpls = vec![0, 0x06, 0x41, 64]; // label 100, bottom of stack
    mpls.extend_from_slice(&ipv4);
    let mut bpdu = vec![0x42, 0x42, 0x03, 0, 0, 0, 0];
    bpdu.resize(38, 0);
    let foreign = vec![
        ethernet(
            &a,
            [0x01, 0x80, 0xc2, 0, 0, 0x0e],
            LLDP,
            &[2, 7, 4, 1, 2, 3, 4, 5, 6],
        ),
        ethernet(&a, [0x01, 0x80, 0xc2, 0, 0, 0x03], EAPOL, &[2, 1, 0, 0]),
        ethernet(&a, BROADCAST, PPPOE_DISCOVERY, &[0x11, 0x09, 0, 0, 0, 0]),
        ethernet(&a, host_mac, PPPOE_SESSION, &[0x11, 0, 0, 1, 0, 2, 0, 0x21]),
        ethernet(&a, host_mac, MPLS, &mpls),
        tagged(VLAN, 5),
        // Priority-tagged (VLAN 0): the host would take it as untagged.
        tagged(VLAN, 0),
        tagged(QINQ, 7),
        // 802.3: a length, not an EtherType (a spanning-tree BPDU).
        ethernet(&a, [0x01, 0x80, 0xc2, 0, 0, 0], bpdu.len() as u16, &bpdu),
    ];
    let sent = foreign.len() as u64;
    let mut frames = foreign;
    // The listener works: IPv4 from the pod's own address arrives.
    frames.push(ethernet(&a, host_mac, ETH_P_IP, &ipv4));
    send_raw_frames(&a, frames);
    std::thread::sleep(Duration::from_millis(200));

    let received = listener.received();
    assert!(
        received == [ETH_P_IP],
        "the host stack received (by EtherType) {received:04x?}, not only the IPv4 frame"
    );
    let c = dp.counters(&a);
    assert_eq!(c.dropped(DropReason::UnsupportedEtherType), sent, "{c:?}");
    assert_eq!(c.total_drops(), sent, "{c:?}");
}
