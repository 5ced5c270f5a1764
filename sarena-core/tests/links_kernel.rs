//! RtnetlinkLinks against the real kernel, in throwaway network namespaces.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::IpAddr;

use ipnet::IpNet;
use sarena_core::api::RouteSpec;
use sarena_core::links::{
    HostLink, LINK_GROUP, LinkError, Links, PodIfaceConfig, RtnetlinkLinks, VethSpec, host_ifname,
};
use sarena_test_support::{HostLinkGuard, TestNetns, require_root, run, unique};

fn spec(netns: &TestNetns, container: &str) -> VethSpec {
    VethSpec {
        host_ifname: host_ifname(container, "eth0"),
        netns: netns.path(),
        pod_ifname: "eth0".into(),
        mtu: 1450,
        pod_mac: None,
        host_ipv6: false,
    }
}

fn pod_config() -> PodIfaceConfig {
    let gw: IpAddr = "10.250.0.1".parse().unwrap();
    PodIfaceConfig {
        addresses: vec!["10.250.0.7/24".parse().unwrap()],
        routes: vec![
            RouteSpec {
                dst: "10.250.0.1/32".parse().unwrap(),
                gw: None,
                mtu: None,
            },
            RouteSpec {
                dst: "0.0.0.0/0".parse().unwrap(),
                gw: Some(gw),
                mtu: Some(1450),
            },
        ],
    }
}

#[tokio::test]
#[ignore = "privileged: needs root; run as root with --include-ignored (scripts/test.sh)"]
async fn veth_pair_is_created_configured_inspected_and_removed() {
    require_root("veth_pair_is_created_configured_inspected_and_removed");
    let netns = TestNetns::new();
    let container = unique("ctr");
    let spec = spec(&netns, &container);
    let _guard = HostLinkGuard(spec.host_ifname.clone());
    let links = RtnetlinkLinks::new().unwrap();

    let pair = links.create_veth(&spec).await.unwrap();
    assert_eq!(pair.host_ifname.len(), 15);
    assert_eq!(
        links.host_link_index(&spec.host_ifname).await.unwrap(),
        Some(pair.host_ifindex)
    );
    assert!(links.list_host_links().await.unwrap().contains(&HostLink {
        ifname: spec.host_ifname.clone(),
        ifindex: pair.host_ifindex
    }));
    let host = run(&["ip", "-o", "link", "show", &spec.host_ifname]);
    assert!(host.contains("mtu 1450") && host.contains("UP"), "{host}");
    // Both ends are born marked.
    let group = format!("group {LINK_GROUP}");
    assert!(host.contains(&group), "{host}");
    assert!(host.contains(&pair.host_mac.to_string()), "{host}");
    let rp = std::fs::read_to_string(format!(
        "/proc/sys/net/ipv4/conf/{}/rp_filter",
        spec.host_ifname
    ))
    .unwrap();
    assert_eq!(rp.trim(), "0");
    // The peer was born in the pod netns: the host has no link with its MAC.
    assert!(
        !run(&["ip", "-o", "link"]).contains(&pair.pod_mac.to_string()),
        "peer leaked into host netns"
    );
    let inside = netns.exec(&["ip", "-o", "link", "show", "eth0"]);
    assert!(
        inside.contains("mtu 1450")
            && inside.contains(&pair.pod_mac.to_string())
            && inside.contains(&group),
        "{inside}"
    );

    links
        .configure_pod(&spec.netns, "eth0", &pod_config())
        .await
        .unwrap();
    let state = links
        .inspect_pod(&spec.netns, "eth0")
        .await
        .unwrap()
        .expect("eth0 exists");
    assert!(state.up);
    assert_eq!(state.mac, pair.pod_mac);
    assert_eq!(
        state.addresses,
        vec!["10.250.0.7/24".parse::<IpNet>().unwrap()]
    );
    for route in pod_config().routes {
        assert!(
            state.routes.contains(&route),
            "missing {route:?} in {:?}",
            state.routes
        );
    }
    // The carrier is up (both ends). The pod has no IPv6 address: IPv6 is
    // off on the host end, so none of its routes joined the host's table
    // (the kernel walks that table at every link event).
    assert!(run(&["ip", "-o", "link", "show", &spec.host_ifname]).contains("LOWER_UP"));
    assert_eq!(host_ipv6_conf(&spec.host_ifname, "disable_ipv6"), "1");
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert_eq!(host_ipv6_routes(&spec.host_ifname), "");
    // Configuring again is harmless (ADD retried by the runtime).
    links
        .configure_pod(&spec.netns, "eth0", &pod_config())
        .await
        .unwrap();

    assert!(links.remove_pod_link(&spec.netns, "eth0").await.unwrap());
    assert!(!links.remove_pod_link(&spec.netns, "eth0").await.unwrap());
    assert_eq!(
        links.host_link_index(&spec.host_ifname).await.unwrap(),
        None,
        "peer deletion removes the host end"
    );
    assert!(!links.remove_host_link(&spec.host_ifname).await.unwrap());
    assert_eq!(links.inspect_pod(&spec.netns, "eth0").await.unwrap(), None);
}

fn host_ipv6_conf(ifname: &str, key: &str) -> String {
    sarena_core::sysctl::read(&sarena_core::sysctl::ipv6_conf(ifname, key))
        .unwrap()
        .trim()
        .to_string()
}

fn host_ipv6_routes(ifname: &str) -> String {
    let addresses = run(&["ip", "-6", "addr", "show", "dev", ifname]);
    let routes = run(&["ip", "-6", "route", "show", "table", "all", "dev", ifname]);
    format!("{}{}", addresses.trim(), routes.trim())
}

#[tokio::test]
#[ignore = "privileged: needs root; run as root with --include-ignored (scripts/test.sh)"]
async fn a_pod_with_ipv6_keeps_it_on_the_host_end_without_the_kernel_s_link_local_address() {
    require_root(
        "a_pod_with_ipv6_keeps_it_on_the_host_end_without_the_kernel_s_link_local_address",
    );
    let netns = TestNetns::new();
    let container = unique("ctr6");
    let spec = VethSpec {
        host_ipv6: true,
        ..spec(&netns, &container)
    };
    let _guard = HostLinkGuard(spec.host_ifname.clone());
    let links = RtnetlinkLinks::new().unwrap();
    links.create_veth(&spec).await.unwrap();
    let mut config = pod_config();
    config.addresses.push("fd00:250::7/64".parse().unwrap());
    links
        .configure_pod(&spec.netns, "eth0", &config)
        .await
        .unwrap();
    let host = run(&["ip", "-d", "link", "show", &spec.host_ifname]);
    assert!(
        host.contains("LOWER_UP") && host.contains("addrgenmode none"),
        "{host}"
    );
    assert_eq!(host_ipv6_conf(&spec.host_ifname, "disable_ipv6"), "0");
    std::thread::sleep(std::time::Duration::from_millis(200));
    // No address of the kernel's, so no fe80 route: only ff00::/8 is left.
    let v6 = host_ipv6_routes(&spec.host_ifname);
    assert!(!v6.contains("fe80") && !v6.contains("inet6"), "{v6}");
    assert!(links.remove_pod_link(&spec.netns, "eth0").await.unwrap());
}

#[tokio::test]
#[ignore = "privileged: needs root; run as root with --include-ignored (scripts/test.sh)"]
async fn two_pods_named_eth0_and_a_stale_host_link_are_fine() {
    require_root("two_pods_named_eth0_and_a_stale_host_link_are_fine");
    let (a, b) = (TestNetns::new(), TestNetns::new());
    let (ca, cb) = (unique("ctra"), unique("ctrb"));
    let (sa, sb) = (spec(&a, &ca), spec(&b, &cb));
    let _ga = HostLinkGuard(sa.host_ifname.clone());
    let _gb = HostLinkGuard(sb.host_ifname.clone());
    let links = RtnetlinkLinks::new().unwrap();
    links.create_veth(&sa).await.unwrap();
    links.create_veth(&sb).await.unwrap();
    // A repeated ADD of the same attachment finds its host name taken (by a
    // link of Sarena's, as a half-done earlier ADD leaves it) and recreates it.
    let first = links.host_link_index(&sa.host_ifname).await.unwrap();
    links.remove_pod_link(&sa.netns, "eth0").await.unwrap();
    let stale_peer = unique("stale");
    let group = LINK_GROUP.to_string();
    run(&[
        "ip",
        "link",
        "add",
        &sa.host_ifname,
        "group",
        &group,
        "type",
        "veth",
        "peer",
        "name",
        &stale_peer,
    ]);
    let again = links.create_veth(&sa).await.unwrap();
    assert_ne!(Some(again.host_ifindex), first);
    assert!(a.exec(&["ip", "-o", "link"]).contains("eth0"));
    assert!(b.exec(&["ip", "-o", "link"]).contains("eth0"));

    // The pod name taken in the pod netns (not removed first): an error naming
    // it, and the host link is left to whoever owns it.
    let cc = unique("ctrc");
    let sc = VethSpec {
        netns: a.path(),
        ..spec(&a, &cc)
    };
    let _gc = HostLinkGuard(sc.host_ifname.clone());
    let err = links.create_veth(&sc).await.unwrap_err();
    assert!(
        err.to_string()
            .contains("eth0 already exists in the pod netns"),
        "{err}"
    );
    assert_eq!(links.host_link_index(&sc.host_ifname).await.unwrap(), None);
}

#[tokio::test]
#[ignore = "privileged: needs root; run as root with --include-ignored (scripts/test.sh)"]
async fn missing_netns_is_a_netns_error() {
    require_root("missing_netns_is_a_netns_error");
    let links = RtnetlinkLinks::new().unwrap();
    let err = links
        .remove_pod_link(
            std::path::Path::new("/var/run/netns/sarena-does-not-exist"),
            "eth0",
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, sarena_core::links::LinkError::Netns { .. }),
        "{err:?}"
    );
}

/// The inode of the calling thread's network namespace.
fn thread_netns() -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/thread-self/ns/net").unwrap().ino()
}

/// Pod-netns sockets on either runtime flavour: the operations land in the
/// pod netns and the calling thread ends where it started.
async fn pod_side_works_and_the_thread_stays_home(test: &str) {
    require_root(test);
    let home = thread_netns();
    let netns = TestNetns::new();
    let container = unique("ctr");
    let spec = spec(&netns, &container);
    let _guard = HostLinkGuard(spec.host_ifname.clone());
    let links = RtnetlinkLinks::new().unwrap();
    links.create_veth(&spec).await.unwrap();
    links
        .configure_pod(&spec.netns, "eth0", &pod_config())
        .await
        .unwrap();
    assert_eq!(thread_netns(), home, "the thread was left in another netns");
    assert!(
        netns
            .exec(&["ip", "-o", "addr", "show", "eth0"])
            .contains("10.250.0.7/24")
    );
    assert!(links.remove_pod_link(&spec.netns, "eth0").await.unwrap());
    assert_eq!(thread_netns(), home);
}

#[tokio::test]
#[ignore = "privileged: needs root; run as root with --include-ignored (scripts/test.sh)"]
async fn pod_side_on_a_current_thread_runtime() {
    pod_side_works_and_the_thread_stays_home("pod_side_on_a_current_thread_runtime").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "privileged: needs root; run as root with --include-ignored (scripts/test.sh)"]
async fn pod_side_on_a_multi_thread_runtime() {
    pod_side_works_and_the_thread_stays_home("pod_side_on_a_multi_thread_runtime").await;
}

#[tokio::test]
#[ignore = "privileged: needs root; run as root with --include-ignored (scripts/test.sh)"]
async fn links_that_are_not_sarenas_are_never_removed_or_listed() {
    require_root("links_that_are_not_sarenas_are_never_removed_or_listed");
    let netns = TestNetns::new();
    let container = unique("ctr");
    let spec = spec(&netns, &container);
    let _guard = HostLinkGuard(spec.host_ifname.clone());
    let links = RtnetlinkLinks::new().unwrap();
    // Another plugin's pair under Sarena's host name, its peer as the pod's eth0.
    run(&[
        "ip",
        "link",
        "add",
        &spec.host_ifname,
        "type",
        "veth",
        "peer",
        "name",
        "eth0",
        "netns",
        &netns.name,
    ]);
    let index = links
        .host_link_index(&spec.host_ifname)
        .await
        .unwrap()
        .unwrap();
    assert!(
        !links
            .list_host_links()
            .await
            .unwrap()
            .iter()
            .any(|l| l.ifname == spec.host_ifname),
        "an unmarked link is not Sarena's"
    );
    let not_ours = |e: LinkError| matches!(e, LinkError::NotOurs { group: 0, .. });
    assert!(not_ours(
        links.remove_host_link(&spec.host_ifname).await.unwrap_err()
    ));
    assert!(not_ours(
        links
            .remove_host_link_index(index, &spec.host_ifname)
            .await
            .unwrap_err()
    ));
    assert!(not_ours(
        links
            .remove_pod_link(&spec.netns, "eth0")
            .await
            .unwrap_err()
    ));
    // Creating over it is refused too, and it is still there.
    assert!(not_ours(links.create_veth(&spec).await.unwrap_err()));
    assert_eq!(
        links.host_link_index(&spec.host_ifname).await.unwrap(),
        Some(index)
    );
    assert!(netns.exec(&["ip", "-o", "link"]).contains("eth0"));
}

/// The number of open netlink sockets of this process.
fn netlink_sockets() -> usize {
    let inodes: std::collections::HashSet<String> = std::fs::read_to_string("/proc/net/netlink")
        .unwrap()
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().last().map(str::to_string))
        .collect();
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.unwrap().path()).ok())
        .filter_map(|t| {
            let t = t.to_string_lossy().into_owned();
            t.strip_prefix("socket:[")?
                .strip_suffix(']')
                .map(str::to_string)
        })
        .filter(|inode| inodes.contains(inode))
        .count()
}

#[tokio::test]
#[ignore = "privileged: needs root; run as root with --include-ignored (scripts/test.sh)"]
async fn pod_netns_sockets_are_bounded_and_released() {
    require_root("pod_netns_sockets_are_bounded_and_released");
    let links = RtnetlinkLinks::new().unwrap().with_pod_handle_capacity(3);
    let before = netlink_sockets();
    let namespaces: Vec<TestNetns> = (0..5).map(|_| TestNetns::new()).collect();
    for netns in &namespaces {
        assert_eq!(
            links.inspect_pod(&netns.path(), "eth0").await.unwrap(),
            None
        );
    }
    assert_eq!(links.pod_handles(), 3, "bounded by the capacity");
    for netns in &namespaces {
        links.release_netns(&netns.path());
    }
    assert_eq!(links.pod_handles(), 0);
    // The sockets are closed once their connection tasks notice.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while netlink_sockets() > before {
        assert!(
            std::time::Instant::now() < deadline,
            "pod sockets still open: {} > {before}",
            netlink_sockets()
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test]
#[ignore = "privileged: needs root; run as root with --include-ignored (scripts/test.sh)"]
async fn a_netns_path_reused_for_another_namespace_gets_a_new_socket() {
    require_root("a_netns_path_reused_for_another_namespace_gets_a_new_socket");
    let links = RtnetlinkLinks::new().unwrap();
    let netns = TestNetns::new();
    assert_eq!(
        links.inspect_pod(&netns.path(), "eth0").await.unwrap(),
        None
    );
    // The runtime deletes the namespace and makes a new one under the same name.
    run(&["ip", "netns", "del", &netns.name]);
    run(&["ip", "netns", "add", &netns.name]);
    netns.exec(&[
        "ip", "link", "add", "eth0", "type", "veth", "peer", "name", "eth1",
    ]);
    let found = links.inspect_pod(&netns.path(), "eth0").await.unwrap();
    assert!(
        found.is_some(),
        "the cached socket of the old namespace was used"
    );
    assert_eq!(links.pod_handles(), 1);
}
