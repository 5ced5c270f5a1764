//! Dual-stack pods through the whole ADD/CHECK/DEL sequence on a real
//! kernel, forwarded by the kernel dataplane: the plugin's sequences over
//! an in-process node (a dual-stack pool) and RtnetlinkLinks, the kernel
//! dataplane under unique names.
//!
//! Privileged (root): `#[ignore]`d unless included, see
//! `sarena_test_support::require_root`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod ebpf;

use std::net::{IpAddr, Ipv6Addr};
use std::process::Command;
use std::sync::Arc;

use ebpf::frames6::{
    ALL_ROUTERS, ICMPV6, advertisement, frame_between, icmpv6, router_solicitation,
};
use ebpf::host_neighbours;
use ebpf::raw::send_raw_frames_in;
use sarena_core::api::{Attachment, Inspect as _, PodRef};
use sarena_core::cni::{CniResult, Version};
use sarena_core::dataplane::Dataplane;
use sarena_core::links::{RtnetlinkLinks, host_ifname, link_local};
use sarena_core::node::{NodeConfig, Registry, WithDataplane};
use sarena_core::plugin::{AddRequest, CheckRequest, DelRequest, Plugin, PluginError};
use sarena_test_support::{HostStack, SysctlGuard, TestNetns, require_root, run, unique};

const CONFIG: &str = r#"
[[ipam.pools]]
name = "dual"
cidrs = ["10.248.0.0/24", "fd00:248::/64"]
"#;

/// How many router solicitations from forged link-local sources the pod
/// sends: without the check each is an entry in the node's neighbour table
/// (whose `gc_thresh3`, 1024 by default, every namespace shares).
const FORGED_SOLICITATIONS: u16 = 200;

/// True when `to` answers within 4 s (retrying every second).
fn ping(netns: &TestNetns, to: &str) -> bool {
    ping_from(netns, to, &[])
}

fn ping_from(netns: &TestNetns, to: &str, extra: &[&str]) -> bool {
    Command::new("ip")
        .args(["netns", "exec", &netns.name, "ping", "-c", "1", "-w", "4"])
        .args(extra)
        .arg(to)
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

struct Setup {
    plugin: Plugin,
    node: Registry,
    host: HostStack,
    _forwarding: SysctlGuard,
    _state: tempfile::TempDir,
}

async fn setup() -> Setup {
    let forwarding = SysctlGuard::save("net/ipv6/conf/all/forwarding");
    let state = tempfile::tempdir().unwrap();
    let config = NodeConfig::from_toml_str(CONFIG).unwrap();
    let host = HostStack::new();
    let kernel = Arc::new(host.dataplane.clone());
    kernel.setup(&config.node_network().unwrap()).await.unwrap();
    let node = Registry::open(state.path(), config).unwrap();
    let daemon = WithDataplane::new(Arc::new(node.clone()), kernel);
    let plugin = Plugin::new(Arc::new(daemon), Arc::new(RtnetlinkLinks::new().unwrap()));
    Setup {
        plugin,
        node,
        host,
        _forwarding: forwarding,
        _state: state,
    }
}

fn attachment() -> Attachment {
    Attachment {
        container_id: unique("ctr"),
        ifname: "eth0".into(),
    }
}

async fn add(plugin: &Plugin, att: &Attachment, netns: &TestNetns) -> CniResult {
    plugin
        .add(&AddRequest {
            attachment: att.clone(),
            netns: netns.path(),
            pod: PodRef::default(),
            requested_ips: vec![],
            requested_mac: None,
            version: Version::V1_1_0,
            bandwidth: None,
            chain_check: None,
        })
        .await
        .unwrap()
}

async fn check(
    plugin: &Plugin,
    att: &Attachment,
    netns: &TestNetns,
    prev: &CniResult,
) -> Result<(), PluginError> {
    plugin
        .check(&CheckRequest {
            attachment: att.clone(),
            netns: netns.path(),
            prev_result: prev.clone(),
            version: Version::V1_1_0,
            bandwidth: None,
        })
        .await
}

/// The packets counted by the anti-spoofing rule of the kernel dataplane's
/// `table` whose text contains `rule` (the last one when several do).
fn dropped_by(table: &str, rule: &str) -> u64 {
    let chain = run(&["nft", "list", "chain", "inet", table, "antispoof"]);
    let line = chain
        .lines()
        .rfind(|l| l.contains(rule) && l.contains("drop"))
        .unwrap_or_else(|| panic!("no rule {rule:?} in {chain}"));
    let after = line.split("counter packets ").nth(1).unwrap();
    after.split(' ').next().unwrap().parse().unwrap()
}

/// The result's address of the family `v4`, without its prefix.
fn address(result: &CniResult, v4: bool) -> String {
    let ip = result
        .ips
        .iter()
        .find(|ip| ip.address.addr().is_ipv4() == v4)
        .unwrap();
    ip.address.addr().to_string()
}

#[tokio::test]
#[ignore = "privileged: needs root; run as root with --include-ignored (scripts/test.sh)"]
async fn dual_stack_pods_add_talk_check_and_del_on_the_kernel_dataplane() {
    require_root("dual_stack_pods_add_talk_check_and_del_on_the_kernel_dataplane");
    let s = setup().await;
    let (na, nb) = (TestNetns::new(), TestNetns::new());
    let (aa, ab) = (attachment(), attachment());
    let ra = add(&s.plugin, &aa, &na).await;
    let rb = add(&s.plugin, &ab, &nb).await;

    // One address of each family, on the pod interface (index 1), with the
    // gateway each routes through.
    assert_eq!(ra.ips.len(), 2, "{ra:?}");
    assert!(ra.ips[0].address.addr().is_ipv4() && ra.ips[1].address.addr().is_ipv6());
    assert!(ra.ips.iter().all(|ip| ip.interface == Some(1)), "{ra:?}");
    assert_eq!(ra.ips[0].gateway, Some("10.248.0.1".parse().unwrap()));
    assert_eq!(ra.ips[1].gateway, Some("fe80::1".parse().unwrap()));
    assert_eq!(ra.ips[1].address.to_string(), "fd00:248::2/64");
    let default6 = ra
        .routes
        .iter()
        .find(|r| r.dst.to_string() == "::/0")
        .unwrap();
    assert_eq!(default6.gw, Some("fe80::1".parse().unwrap()));
    let addrs = na.exec(&["ip", "-6", "addr", "show", "dev", "eth0"]);
    assert!(
        addrs.contains("fd00:248::2/64") && !addrs.contains("tentative"),
        "{addrs}"
    );

    // Both families, both ways, and pod <-> host, through host routes.
    let (a4, a6, b4, b6) = (
        address(&ra, true),
        address(&ra, false),
        address(&rb, true),
        address(&rb, false),
    );
    assert!(ping(&na, &b6), "a -> b over IPv6");
    assert!(ping(&nb, &a6), "b -> a over IPv6");
    assert!(ping(&na, &b4), "a -> b over IPv4");
    assert!(
        ping(&na, "fd00:248::1"),
        "a -> the host's pool gateway address"
    );
    let routes = run(&["ip", "-6", "route", "show", "proto", "90"]);
    assert!(
        routes.contains(&format!("{a6} dev")) && routes.contains(&format!("{b6} dev")),
        "{routes}"
    );
    let host_pinged = Command::new("ping")
        .args(["-c", "1", "-w", "4", &a6])
        .status()
        .unwrap();
    assert!(host_pinged.success(), "host -> a over IPv6");

    // A forged IPv6 source, and an advertisement of another pod's address,
    // are dropped by the anti-spoofing rules.
    let table = &s.host.names.nft_table;
    let forged = dropped_by(table, "counter");
    let claims = dropped_by(table, "nd-neighbor-advert");
    let spare = "fd00:248::99/128";
    na.exec(&["ip", "-6", "addr", "add", spare, "dev", "eth0", "nodad"]);
    let delivered = ping_from(&na, &b6, &["-I", "fd00:248::99", "-w", "1"]);
    na.exec(&["ip", "-6", "addr", "del", spare, "dev", "eth0"]);
    assert!(!delivered, "forged source delivered");
    assert!(
        dropped_by(table, "counter") > forged,
        "not dropped by the rules"
    );
    let macs = (
        ra.interfaces[1].mac.as_ref().unwrap().parse().unwrap(),
        ra.interfaces[0].mac.as_ref().unwrap().parse().unwrap(),
    );
    let from: std::net::Ipv6Addr = a6.parse().unwrap();
    let all_nodes = "ff02::1".parse().unwrap();
    let claim = icmpv6(from, all_nodes, advertisement(b6.parse().unwrap()));
    let own = icmpv6(from, all_nodes, advertisement(from));
    send_raw_frames_in(
        &na.path(),
        vec![
            frame_between(macs, from, all_nodes, ICMPV6, 255, &claim),
            frame_between(macs, from, all_nodes, ICMPV6, 255, &own),
        ],
    );
    let now = dropped_by(table, "nd-neighbor-advert");
    assert_eq!(now, claims + 1, "the claim alone dropped");

    // Router solicitations from forged link-local sources (the node is a
    // router: IPv6 forwarding on) teach the node nothing, where each would
    // be one more entry in its neighbour table; its own teaches it its
    // link-local address.
    let own_ll = link_local(macs.0);
    let forged: Vec<Ipv6Addr> = (0..FORGED_SOLICITATIONS)
        .map(|i| Ipv6Addr::new(0xfe80, 0, 0, 0, 0xbad, 0, 0, i))
        .collect();
    let before = dropped_by(table, "counter");
    let solicit = |src: Ipv6Addr| {
        let rs = router_solicitation(src, macs.0.octets());
        frame_between(macs, src, ALL_ROUTERS, ICMPV6, 255, &rs)
    };
    send_raw_frames_in(
        &na.path(),
        forged
            .iter()
            .chain([&own_ll])
            .map(|src| solicit(*src))
            .collect(),
    );
    let learned = host_neighbours(&host_ifname(&aa.container_id, &aa.ifname), "-6");
    let taught = learned
        .iter()
        .filter(|n| matches!(n, IpAddr::V6(v6) if forged.contains(v6)))
        .count();
    assert_eq!(
        taught, 0,
        "{taught} of {FORGED_SOLICITATIONS} forged link-local sources learned"
    );
    assert!(learned.contains(&IpAddr::V6(own_ll)), "{learned:?}");
    assert_eq!(
        dropped_by(table, "counter"),
        before + u64::from(FORGED_SOLICITATIONS)
    );

    check(&s.plugin, &aa, &na, &ra).await.unwrap();
    check(&s.plugin, &ab, &nb, &rb).await.unwrap();
    // CHECK notices a lost IPv6 address, and a lost IPv6 default route.
    na.exec(&[
        "ip",
        "-6",
        "addr",
        "del",
        &format!("{a6}/64"),
        "dev",
        "eth0",
    ]);
    let err = check(&s.plugin, &aa, &na, &ra).await.unwrap_err();
    assert!(err.to_string().contains(&a6), "{err}");
    nb.exec(&["ip", "-6", "route", "del", "default", "dev", "eth0"]);
    let err = check(&s.plugin, &ab, &nb, &rb).await.unwrap_err();
    assert!(err.to_string().contains("::/0"), "{err}");
    // IPv4 is still whole: the failure was IPv6's alone.
    assert!(ping(&nb, &a4));

    // DEL leaves nothing: no host route, no veth, no allocation.
    for (att, netns) in [(&aa, &na), (&ab, &nb)] {
        s.plugin
            .del(&DelRequest {
                attachment: att.clone(),
                netns: Some(netns.path()),
            })
            .await
            .unwrap();
        let host = host_ifname(&att.container_id, &att.ifname);
        assert!(!run(&["ip", "-o", "link"]).contains(&host), "{host} left");
    }
    let routes = run(&["ip", "-6", "route", "show", "proto", "90"]);
    for ip in [&a6, &b6] {
        assert!(
            !routes.contains(&format!("{ip} ")),
            "route to {ip} left: {routes}"
        );
    }
    let routes4 = run(&["ip", "-4", "route", "show", "proto", "90"]);
    assert!(!routes4.contains(&format!("{a4} ")) && !routes4.contains(&format!("{b4} ")));
    let ipam = s.node.ipam_state().await.unwrap();
    assert!(ipam.allocations.is_empty(), "{:?}", ipam.allocations);
}
