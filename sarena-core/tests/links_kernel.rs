//! RtnetlinkLinks against the real kernel, in throwaway network namespaces.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::IpAddr;

use ipnet::IpNet;
use sarena_core::api::RouteSpec;
use sarena_core::links::{Links, PodIfaceConfig, RtnetlinkLinks, VethSpec, host_ifname};
use sarena_test_support::{HostLinkGuard, TestNetns, require_root, run, unique};

fn spec(netns: &TestNetns, container: &str) -> VethSpec {
    VethSpec {
        host_ifname: host_ifname(container, "eth0"),
        netns: netns.path(),
        pod_ifname: "eth0".into(),
        mtu: 1450,
        pod_mac: None,
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
    assert!(
        links
            .list_host_links()
            .await
            .unwrap()
            .contains(&spec.host_ifname)
    );
    let host = run(&["ip", "-o", "link", "show", &spec.host_ifname]);
    assert!(host.contains("mtu 1450") && host.contains("UP"), "{host}");
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
        inside.contains("mtu 1450") && inside.contains(&pair.pod_mac.to_string()),
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
    // A repeated ADD of the same attachment finds its host name taken and recreates it.
    let first = links.host_link_index(&sa.host_ifname).await.unwrap();
    links.remove_pod_link(&sa.netns, "eth0").await.unwrap();
    let stale_peer = unique("stale");
    run(&[
        "ip",
        "link",
        "add",
        &sa.host_ifname,
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
