//! Another node, in namespaces: the node itself (a router) behind an
//! underlay veth pair whose host end is this node's uplink, and one pod of
//! its own behind it. Routes both ways, forwarding on in the node's
//! namespace (its own, gone with it). Everything is removed on drop.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use sarena_test_support::{HostLinkGuard, TestNetns, run, unique};

/// This node's pods: `10.248.0.0/24`, `fd00:248::/64`.
pub const LOCAL_GATEWAY4: &str = "10.248.0.1";
/// This node's IPv6 pod gateway.
pub const LOCAL_GATEWAY6: &str = "fd00:248::1";
/// This node's pod CIDRs.
pub const LOCAL_PODS: [&str; 2] = ["10.248.0.0/24", "fd00:248::/64"];
/// The other node's pod CIDRs (what `set_peer_pods` gets).
pub const PEER_PODS: [&str; 2] = ["10.249.1.0/24", "fd00:249:1::/64"];
/// This node's underlay address (on the uplink).
pub const UNDERLAY4: Ipv4Addr = Ipv4Addr::new(10, 249, 255, 1);

/// The other node and its pod.
pub struct PeerNode {
    /// The host end of the underlay pair: this node's uplink.
    pub uplink: String,
    /// The other node's namespace.
    pub node: TestNetns,
    /// Its pod's namespace.
    pub pod: TestNetns,
    _uplink: HostLinkGuard,
}

impl PeerNode {
    /// Builds it and the routes between the two nodes' pod CIDRs.
    pub fn new() -> PeerNode {
        let uplink = unique("srul");
        let guard = HostLinkGuard(uplink.clone());
        let node = TestNetns::new();
        let pod = TestNetns::new();
        let peer_end = unique("srup");
        // No duplicate address detection in either namespace (their own
        // settings): a tentative link-local address delays the first
        // neighbour exchange by a second.
        for ns in [&node, &pod] {
            ns.exec(&[
                "sysctl",
                "-qw",
                "net.ipv6.conf.all.accept_dad=0",
                "net.ipv6.conf.default.accept_dad=0",
            ]);
        }
        run(&[
            "ip", "link", "add", &uplink, "type", "veth", "peer", "name", &peer_end,
        ]);
        // The uplink's own setting, gone with it.
        run(&[
            "sysctl",
            "-qw",
            &format!("net.ipv6.conf.{uplink}.accept_dad=0"),
        ]);
        run(&["ip", "link", "set", &peer_end, "netns", &node.name]);
        run(&["ip", "addr", "add", "10.249.255.1/30", "dev", &uplink]);
        run(&[
            "ip",
            "-6",
            "addr",
            "add",
            "fd00:249:ff::1/64",
            "dev",
            &uplink,
            "nodad",
        ]);
        run(&["ip", "link", "set", &uplink, "up"]);
        let n = |args: &[&str]| node.exec(args);
        n(&["ip", "link", "set", "lo", "up"]);
        n(&["ip", "addr", "add", "10.249.255.2/30", "dev", &peer_end]);
        n(&[
            "ip",
            "-6",
            "addr",
            "add",
            "fd00:249:ff::2/64",
            "dev",
            &peer_end,
            "nodad",
        ]);
        n(&["ip", "link", "set", &peer_end, "up"]);
        n(&[
            "ip", "link", "add", "rp0", "type", "veth", "peer", "name", "eth0", "netns", &pod.name,
        ]);
        n(&["ip", "addr", "add", "10.249.1.1/24", "dev", "rp0"]);
        n(&[
            "ip",
            "-6",
            "addr",
            "add",
            "fd00:249:1::1/64",
            "dev",
            "rp0",
            "nodad",
        ]);
        n(&["ip", "link", "set", "rp0", "up"]);
        n(&["sysctl", "-qw", "net.ipv4.ip_forward=1"]);
        n(&["sysctl", "-qw", "net.ipv6.conf.all.forwarding=1"]);
        n(&["ip", "route", "add", LOCAL_PODS[0], "via", "10.249.255.1"]);
        n(&[
            "ip",
            "-6",
            "route",
            "add",
            LOCAL_PODS[1],
            "via",
            "fd00:249:ff::1",
        ]);
        let p = |args: &[&str]| pod.exec(args);
        p(&["ip", "link", "set", "lo", "up"]);
        p(&["ip", "addr", "add", "10.249.1.2/24", "dev", "eth0"]);
        p(&[
            "ip",
            "-6",
            "addr",
            "add",
            "fd00:249:1::2/64",
            "dev",
            "eth0",
            "nodad",
        ]);
        p(&["ip", "link", "set", "eth0", "up"]);
        p(&["ip", "route", "add", "default", "via", "10.249.1.1"]);
        p(&[
            "ip",
            "-6",
            "route",
            "add",
            "default",
            "via",
            "fd00:249:1::1",
        ]);
        // This node's routes to the other's pods (gone with the uplink).
        run(&[
            "ip",
            "route",
            "add",
            PEER_PODS[0],
            "via",
            "10.249.255.2",
            "dev",
            &uplink,
        ]);
        run(&[
            "ip",
            "-6",
            "route",
            "add",
            PEER_PODS[1],
            "via",
            "fd00:249:ff::2",
            "dev",
            &uplink,
        ]);
        PeerNode {
            uplink,
            node,
            pod,
            _uplink: guard,
        }
    }

    /// The other node's pod's IPv4 address.
    pub fn pod4(&self) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(10, 249, 1, 2))
    }

    /// Its IPv6 address.
    pub fn pod6(&self) -> IpAddr {
        IpAddr::V6(Ipv6Addr::new(0xfd00, 0x249, 1, 0, 0, 0, 0, 2))
    }
}

/// The packets an nftables table's counters saw, in the order of its rules.
pub fn nft_counts(family: &str, table: &str) -> Vec<u64> {
    let listing = run(&["nft", "list", "table", family, table]);
    listing
        .split("counter packets ")
        .skip(1)
        .filter_map(|rest| rest.split_whitespace().next()?.parse().ok())
        .collect()
}
