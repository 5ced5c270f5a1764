//! VXLAN injection on a real kernel: node `a` runs Sarena's `vxlan` peer
//! routing with `b` as its peer. Encapsulated frames whose inner packet is
//! forged from `b`'s pod CIDR to a pod of `a` are crafted and sent to `a`'s
//! UDP 8472 from `b` (delivered: the positive control), from a host on the
//! same segment that is no member (dropped), from the pod itself to its own
//! node's address (dropped), and from `b` once it left the cluster
//! (dropped). Every drop grows Sarena's counter. Over an IPv4 underlay and
//! over an IPv6 one (the inner packet is IPv4 in both).
//!
//! Layout, each a throwaway netns: `a` holds the bridge `eth0`
//! 172.31.0.11/24 or fd00:31::11/64 (the underlay); `b` (.12) and the
//! attacker (.66) hang off it by veths; the pod (10.244.0.5, fd00:99::5) is
//! behind `lxcpod` in `a`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::sync::Arc;
use std::time::Duration;

use sarena_core::cluster::rtnl::RtnetlinkPeers;
use sarena_core::cluster::{
    ClusterNode, ClusterView, KubernetesConfig, Overlay, PeerRouting, PeerSync, RoutingMode,
    SyncReport, vtep_mac,
};
use sarena_test_support::{TestNetns, block_on_in_netns, in_netns, require_root};

const POD: Ipv4Addr = Ipv4Addr::new(10, 244, 0, 5);
/// A pod of `b`, the forged inner source.
const FORGED: Ipv4Addr = Ipv4Addr::new(10, 244, 1, 7);
const POD_PORT: u16 = 9999;
/// The pod's underlay-family address when the underlay is IPv6.
const POD6: &str = "fd00:99::5";

/// The underlay's addresses: node `a`, its peer `b`, the attacker.
#[derive(Clone, Copy)]
struct Underlay {
    a: IpAddr,
    b: IpAddr,
    attacker: IpAddr,
    prefix: u8,
}

fn v4() -> Underlay {
    Underlay {
        a: "172.31.0.11".parse().unwrap(),
        b: "172.31.0.12".parse().unwrap(),
        attacker: "172.31.0.66".parse().unwrap(),
        prefix: 24,
    }
}

fn v6() -> Underlay {
    Underlay {
        a: "fd00:31::11".parse().unwrap(),
        b: "fd00:31::12".parse().unwrap(),
        attacker: "fd00:31::66".parse().unwrap(),
        prefix: 64,
    }
}

fn node(name: &str, ip: IpAddr, cidr: &str) -> ClusterNode {
    ClusterNode {
        name: name.into(),
        uid: format!("uid-{name}"),
        internal_ips: vec![ip],
        pod_cidrs: vec![cidr.parse().unwrap()],
    }
}

fn view(u: Underlay, peers: Vec<ClusterNode>) -> ClusterView {
    ClusterView {
        local_name: "a".into(),
        local: Some(node("a", u.a, "10.244.0.0/24")),
        peers,
    }
}

/// Syncs `view` in `a` the way the daemon does; the report and Sarena's
/// drop counter after it.
fn sync(a: &TestNetns, view: ClusterView) -> (SyncReport, u64) {
    block_on_in_netns(&a.path(), move || async move {
        let config = KubernetesConfig {
            enabled: true,
            routing: RoutingMode::Vxlan,
            ..KubernetesConfig::default()
        };
        let kernel = Arc::new(RtnetlinkPeers::new().unwrap());
        let peers = PeerSync::new(config, Some(1500), kernel.clone(), kernel.clone());
        let report = peers.sync(&view).await.unwrap();
        // No filter (no counter) counts as 0: the count assertions fail.
        let drops = kernel.vxlan_filter_drops().await.map_or(0, |d| d.packets);
        (report, drops)
    })
}

fn checksum(bytes: &[u8]) -> u16 {
    let mut sum: u32 = bytes
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// A VXLAN payload (VNI 1) carrying an Ethernet frame to `a`'s VTEP MAC
/// with an IPv4/UDP packet from `FORGED` to the pod, payload `token`.
fn vxlan_payload(u: Underlay, token: &[u8]) -> Vec<u8> {
    let mut udp = Vec::new();
    udp.extend_from_slice(&4242u16.to_be_bytes());
    udp.extend_from_slice(&POD_PORT.to_be_bytes());
    udp.extend_from_slice(&((8 + token.len()) as u16).to_be_bytes());
    udp.extend_from_slice(&[0, 0]); // no checksum (IPv4)
    udp.extend_from_slice(token);
    let mut ip = vec![0x45, 0, 0, 0, 0, 1, 0x40, 0, 64, 17, 0, 0];
    ip[2..4].copy_from_slice(&((20 + udp.len()) as u16).to_be_bytes());
    ip.extend_from_slice(&FORGED.octets());
    ip.extend_from_slice(&POD.octets());
    let sum = checksum(&ip);
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    let mut frame = Vec::new();
    frame.extend_from_slice(&vtep_mac(u.a).octets());
    frame.extend_from_slice(&vtep_mac(u.b).octets());
    frame.extend_from_slice(&[0x08, 0x00]);
    frame.extend_from_slice(&ip);
    frame.extend_from_slice(&udp);
    let mut vxlan = vec![0x08, 0, 0, 0, 0, 0, 1, 0];
    vxlan.extend_from_slice(&frame);
    vxlan
}

/// Sends one crafted VXLAN packet from `from` (inside `ns`) to `a`'s UDP
/// 8472, carrying `token`.
fn inject(u: Underlay, ns: &TestNetns, from: IpAddr, token: &'static [u8]) {
    in_netns(&ns.path(), move || {
        let socket = UdpSocket::bind(SocketAddr::new(from, 0)).unwrap();
        socket
            .send_to(&vxlan_payload(u, token), SocketAddr::new(u.a, 8472))
            .unwrap();
    })
    .join()
    .unwrap();
}

/// Whether the pod receives `token` when `ns` injects it from `from`.
fn delivered(
    u: Underlay,
    pod: &TestNetns,
    ns: &TestNetns,
    from: IpAddr,
    token: &'static [u8],
) -> bool {
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let listener = in_netns(&pod.path(), move || {
        let socket = UdpSocket::bind(SocketAddrV4::new(POD, POD_PORT)).unwrap();
        socket
            .set_read_timeout(Some(Duration::from_millis(1500)))
            .unwrap();
        ready_tx.send(()).unwrap();
        let mut buf = [0u8; 256];
        while let Ok((n, peer)) = socket.recv_from(&mut buf) {
            if &buf[..n] == token {
                assert_eq!(peer.ip(), std::net::IpAddr::V4(FORGED));
                return true;
            }
        }
        false
    });
    ready_rx.recv().unwrap();
    inject(u, ns, from, token);
    listener.join().unwrap()
}

/// A veth from `ns` (address `ip`) into `a`'s bridge `eth0`.
fn attach(u: Underlay, a: &TestNetns, ns: &TestNetns, end: &str, ip: IpAddr) {
    a.exec(&[
        "ip", "link", "add", end, "type", "veth", "peer", "name", "up0",
    ]);
    a.exec(&["ip", "link", "set", "up0", "netns", &ns.name]);
    a.exec(&["ip", "link", "set", end, "master", "eth0", "up"]);
    add_address(ns, ip, u.prefix, "up0");
    ns.exec(&["ip", "link", "set", "up0", "up"]);
}

/// `ip addr add IP/PREFIX dev DEV` (without duplicate address detection).
fn add_address(ns: &TestNetns, ip: IpAddr, prefix: u8, dev: &str) {
    let cidr = format!("{ip}/{prefix}");
    ns.exec(&["ip", "addr", "add", &cidr, "dev", dev, "nodad"]);
}

#[test]
#[ignore = "privileged: needs root; run as root with --include-ignored (scripts/test.sh)"]
fn only_current_peers_reach_the_vxlan_device() {
    require_root("only_current_peers_reach_the_vxlan_device");
    only_current_peers_over(v4());
}

#[test]
#[ignore = "privileged: needs root; run as root with --include-ignored (scripts/test.sh)"]
fn only_current_peers_reach_the_vxlan_device_over_ipv6() {
    require_root("only_current_peers_reach_the_vxlan_device_over_ipv6");
    only_current_peers_over(v6());
}

fn only_current_peers_over(u: Underlay) {
    let a = TestNetns::new();
    let b = TestNetns::new();
    let attacker = TestNetns::new();
    let pod = TestNetns::new();
    a.exec(&["ip", "link", "add", "eth0", "type", "bridge"]);
    add_address(&a, u.a, u.prefix, "eth0");
    a.exec(&["ip", "link", "set", "eth0", "up"]);
    a.exec(&["sysctl", "-q", "-w", "net.ipv4.ip_forward=1"]);
    attach(u, &a, &b, "vb", u.b);
    attach(u, &a, &attacker, "vx", u.attacker);
    a.exec(&[
        "ip", "link", "add", "lxcpod", "type", "veth", "peer", "name", "podeth",
    ]);
    a.exec(&["ip", "link", "set", "podeth", "netns", &pod.name]);
    pod.exec(&["ip", "link", "set", "podeth", "name", "eth0"]);
    a.exec(&["ip", "link", "set", "lxcpod", "up"]);
    a.exec(&["ip", "route", "add", "10.244.0.5/32", "dev", "lxcpod"]);
    pod.exec(&["ip", "addr", "add", "10.244.0.5/24", "dev", "eth0"]);
    pod.exec(&["ip", "link", "set", "eth0", "up"]);
    pod.exec(&["ip", "link", "set", "lo", "up"]);
    // The pod reaches its node's underlay address through its veth.
    let node_ip = u.a.to_string();
    pod.exec(&["ip", "route", "add", &node_ip, "dev", "eth0"]);
    let pod_underlay: IpAddr = if u.a.is_ipv4() {
        POD.into()
    } else {
        let host_mac = a.exec(&["cat", "/sys/class/net/lxcpod/address"]);
        add_address(&pod, POD6.parse().unwrap(), 64, "eth0");
        pod.exec(&[
            "ip",
            "-6",
            "neigh",
            "add",
            &node_ip,
            "lladdr",
            host_mac.trim(),
            "dev",
            "eth0",
        ]);
        POD6.parse().unwrap()
    };

    let peer_b = || node("b", u.b, "10.244.1.0/24");
    let (report, before) = sync(&a, view(u, vec![peer_b()]));
    assert!(report.failed.is_empty(), "{report:?}");

    assert!(
        delivered(u, &pod, &b, u.b, b"from-peer"),
        "positive control: the peer's encapsulated packet reaches the pod"
    );
    assert!(
        !delivered(u, &pod, &attacker, u.attacker, b"from-attacker"),
        "a host that is no member of the cluster injected a packet into the overlay"
    );
    assert!(
        !delivered(u, &pod, &pod, pod_underlay, b"from-pod"),
        "a local pod injected a packet into its own node's overlay"
    );
    let (_, after) = sync(&a, view(u, vec![peer_b()]));
    assert!(after >= before + 2, "drops counted: {before} -> {after}");

    // b leaves the cluster: its packets are dropped too.
    let (report, before) = sync(&a, view(u, vec![]));
    assert!(report.failed.is_empty(), "{report:?}");
    assert!(
        !delivered(u, &pod, &b, u.b, b"from-former-peer"),
        "a node that left the cluster still injects into the overlay"
    );
    let (_, after) = sync(&a, view(u, vec![]));
    assert!(after > before, "drops counted: {before} -> {after}");
}
