//! Peer routing on a real kernel, in a throwaway netns: native routes and
//! the VXLAN overlay as `ip`/`bridge`/`nft` report them (with the filter in
//! front of the device), kept in sync as peers come, move and go, never
//! touching anyone else's routes or tables.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use sarena_core::cluster::rtnl::RtnetlinkPeers;
use sarena_core::cluster::{
    ClusterNode, ClusterView, KubernetesConfig, PeerRouting, PeerSync, RoutingMode, SyncReport,
    vtep_mac,
};
use sarena_test_support::{TestNetns, block_on_in_netns, require_root};

fn node(name: &str, ip: &str, cidrs: &[&str]) -> ClusterNode {
    ClusterNode {
        name: name.into(),
        uid: format!("uid-{name}"),
        internal_ips: vec![ip.parse().unwrap()],
        pod_cidrs: cidrs.iter().map(|c| c.parse().unwrap()).collect(),
    }
}

fn view(peers: Vec<ClusterNode>) -> ClusterView {
    ClusterView {
        local_name: "a".into(),
        local: Some(node("a", "172.31.0.11", &["10.244.0.0/24"])),
        peers,
    }
}

/// A netns with `eth0` 172.31.0.11/24 (a veth whose peer stays inside too).
fn underlay_netns() -> TestNetns {
    let ns = TestNetns::new();
    ns.exec(&[
        "ip", "link", "add", "eth0", "type", "veth", "peer", "name", "eth0p",
    ]);
    ns.exec(&["ip", "addr", "add", "172.31.0.11/24", "dev", "eth0"]);
    ns.exec(&["ip", "link", "set", "eth0", "up"]);
    ns.exec(&["ip", "link", "set", "eth0p", "up"]);
    ns
}

/// Syncs each view with a fresh `PeerSync` per call of `fresh` (a daemon
/// restart), inside `ns`; the reports.
fn sync_all(
    ns: &TestNetns,
    routing: RoutingMode,
    views: Vec<(bool, ClusterView)>,
) -> Vec<SyncReport> {
    block_on_in_netns(&ns.path(), move || async move {
        let config = KubernetesConfig {
            enabled: true,
            routing,
            ..KubernetesConfig::default()
        };
        let make = || {
            let kernel = Arc::new(RtnetlinkPeers::new().unwrap());
            PeerSync::new(config.clone(), Some(1500), kernel.clone(), kernel)
        };
        let mut peers = make();
        let mut reports = Vec::new();
        for (fresh, view) in views {
            if fresh {
                peers = make();
            }
            reports.push(peers.sync(&view).await.unwrap());
        }
        reports
    })
}

fn lines(out: String) -> Vec<String> {
    let mut lines: Vec<String> = out
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|l| !l.is_empty())
        .collect();
    lines.sort();
    lines
}

#[test]
#[ignore = "privileged: needs root; run as root with --include-ignored (scripts/test.sh)"]
fn native_routes_follow_the_peers_and_leave_other_routes_alone() {
    require_root("native_routes_follow_the_peers_and_leave_other_routes_alone");
    let ns = underlay_netns();
    // Someone else's route and a pod route of the kernel dataplane (proto 90).
    ns.exec(&["ip", "route", "add", "10.9.0.0/24", "via", "172.31.0.99"]);
    ns.exec(&[
        "ip",
        "route",
        "add",
        "10.244.0.5/32",
        "dev",
        "eth0",
        "proto",
        "90",
    ]);
    let b = node("b", "172.31.0.12", &["10.244.1.0/24"]);
    let c = node("c", "172.31.0.13", &["10.244.2.0/24"]);
    let reports = sync_all(
        &ns,
        RoutingMode::Native,
        vec![(false, view(vec![b.clone(), c.clone()]))],
    );
    assert_eq!(reports[0].changed.len(), 2, "{:?}", reports[0]);
    assert_eq!(
        lines(ns.exec(&["ip", "route", "show", "proto", "91"])),
        [
            "10.244.1.0/24 via 172.31.0.12 dev eth0",
            "10.244.2.0/24 via 172.31.0.13 dev eth0"
        ]
    );
    // A restarted daemon changes nothing; c moves, b goes.
    let moved = node("c", "172.31.0.42", &["10.244.2.0/24"]);
    let reports = sync_all(
        &ns,
        RoutingMode::Native,
        vec![(true, view(vec![b, c])), (false, view(vec![moved]))],
    );
    assert_eq!(reports[0], SyncReport::default(), "restart: nothing to do");
    assert_eq!(reports[1].removed.len(), 1, "{:?}", reports[1]);
    assert_eq!(
        lines(ns.exec(&["ip", "route", "show", "proto", "91"])),
        ["10.244.2.0/24 via 172.31.0.42 dev eth0"]
    );
    sync_all(&ns, RoutingMode::Native, vec![(false, view(vec![]))]);
    assert!(lines(ns.exec(&["ip", "route", "show", "proto", "91"])).is_empty());
    assert_eq!(
        lines(ns.exec(&["ip", "route", "show", "10.9.0.0/24"])),
        ["10.9.0.0/24 via 172.31.0.99 dev eth0"]
    );
    assert_eq!(
        lines(ns.exec(&["ip", "route", "show", "proto", "90"])),
        ["10.244.0.5 dev eth0 scope link"]
    );
}

#[test]
#[ignore = "privileged: needs root; run as root with --include-ignored (scripts/test.sh)"]
fn the_vxlan_overlay_holds_one_fdb_entry_neighbour_and_route_per_peer() {
    require_root("the_vxlan_overlay_holds_one_fdb_entry_neighbour_and_route_per_peer");
    let ns = underlay_netns();
    ns.exec(&[
        "ip",
        "addr",
        "add",
        "fd00:31::11/64",
        "dev",
        "eth0",
        "nodad",
    ]);
    let mut b = node("b", "172.31.0.12", &["10.244.1.0/24", "fd00:10:244:1::/64"]);
    b.internal_ips.push("fd00:31::12".parse().unwrap());
    let c = node("c", "172.31.0.13", &["10.244.2.0/24"]);
    ns.exec(&[
        "nft",
        "add table inet other; add chain inet other input { type filter hook input priority 0; }",
    ]);
    // Native first: the switch to vxlan replaces gateway routes by onlink
    // ones, which the kernel does not do in place for IPv6.
    let reports = sync_all(
        &ns,
        RoutingMode::Native,
        vec![(false, view(vec![b.clone(), c.clone()]))],
    );
    assert_eq!(reports[0].changed.len(), 3, "{:?}", reports[0]);
    let reports = sync_all(
        &ns,
        RoutingMode::Vxlan,
        vec![(true, view(vec![b.clone(), c.clone()]))],
    );
    assert!(reports[0].failed.is_empty(), "{:?}", reports[0]);
    // The filter in front of the device: Sarena's own table, the peers'
    // underlay addresses in its sets; someone else's table untouched.
    let filter = ns.exec(&["nft", "list", "table", "inet", "sarena_vxlan"]);
    assert!(
        filter.contains("172.31.0.12") && filter.contains("172.31.0.13"),
        "{filter}"
    );
    assert!(
        filter.contains("udp dport 8472 counter name \"dropped\" drop"),
        "{filter}"
    );
    let link = ns.exec(&["ip", "-d", "link", "show", "sarena.vxlan"]);
    assert!(link.contains("mtu 1450"), "{link}");
    assert!(
        link.contains(&vtep_mac("172.31.0.11".parse().unwrap()).to_string()),
        "{link}"
    );
    assert!(
        link.contains("vxlan id 1 local 172.31.0.11 dev eth0 srcport 0 0 dstport 8472"),
        "{link}"
    );
    assert!(link.contains("nolearning"), "{link}");
    let addrs = ns.exec(&["ip", "addr", "show", "dev", "sarena.vxlan"]);
    assert!(addrs.contains("inet 10.244.0.0/32"), "{addrs}");
    let b_mac = vtep_mac("172.31.0.12".parse().unwrap()).to_string();
    let c_mac = vtep_mac("172.31.0.13".parse().unwrap()).to_string();
    let fdb = ns.exec(&["bridge", "fdb", "show", "dev", "sarena.vxlan"]);
    assert!(
        fdb.contains(&format!("{b_mac} dst 172.31.0.12 self permanent")),
        "{fdb}"
    );
    assert!(
        fdb.contains(&format!("{c_mac} dst 172.31.0.13 self permanent")),
        "{fdb}"
    );
    let neigh = lines(ns.exec(&[
        "ip",
        "neigh",
        "show",
        "dev",
        "sarena.vxlan",
        "nud",
        "permanent",
    ]));
    assert_eq!(
        neigh,
        [
            format!("10.244.1.0 lladdr {b_mac} PERMANENT"),
            format!("10.244.2.0 lladdr {c_mac} PERMANENT"),
            format!("fd00:10:244:1:: lladdr {b_mac} PERMANENT"),
        ]
    );
    assert_eq!(
        lines(ns.exec(&["ip", "route", "show", "proto", "91"])),
        [
            "10.244.1.0/24 via 10.244.1.0 dev sarena.vxlan onlink",
            "10.244.2.0/24 via 10.244.2.0 dev sarena.vxlan onlink"
        ]
    );
    let routes6 = lines(ns.exec(&["ip", "-6", "route", "show", "proto", "91"]));
    assert_eq!(routes6.len(), 1, "{routes6:?}");
    assert!(
        routes6[0].starts_with("fd00:10:244:1::/64 via fd00:10:244:1:: dev sarena.vxlan"),
        "{routes6:?}"
    );

    // Restart: nothing to do; then c goes: its route, neighbour and FDB entry too.
    let reports = sync_all(
        &ns,
        RoutingMode::Vxlan,
        vec![(true, view(vec![b.clone(), c])), (false, view(vec![b]))],
    );
    assert_eq!(reports[0], SyncReport::default(), "restart: nothing to do");
    assert_eq!(reports[1].removed.len(), 3, "{:?}", reports[1]);
    let fdb = ns.exec(&["bridge", "fdb", "show", "dev", "sarena.vxlan"]);
    assert!(!fdb.contains(&c_mac), "{fdb}");
    assert!(
        !ns.exec(&["ip", "route", "show", "proto", "91"])
            .contains("10.244.2.0")
    );
    assert!(
        !ns.exec(&["ip", "neigh", "show", "dev", "sarena.vxlan"])
            .contains("10.244.2.0")
    );

    // Native routing removes the overlay and its routes.
    let reports = sync_all(&ns, RoutingMode::Native, vec![(true, view(vec![]))]);
    assert!(
        reports[0]
            .removed
            .contains(&"device sarena.vxlan".to_string()),
        "{:?}",
        reports[0]
    );
    assert!(!sarena_test_support::succeeds(&[
        "ip",
        "netns",
        "exec",
        &ns.name,
        "ip",
        "link",
        "show",
        "sarena.vxlan"
    ]));
    assert!(lines(ns.exec(&["ip", "-6", "route", "show", "proto", "91"])).is_empty());
    // ... and the filter with it; the other table stays.
    let tables = ns.exec(&["nft", "list", "tables"]);
    assert!(!tables.contains("sarena_vxlan"), "{tables}");
    assert!(tables.contains("table inet other"), "{tables}");
}
