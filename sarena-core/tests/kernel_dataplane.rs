//! The kernel-routing dataplane on a real kernel: pods in throwaway netns,
//! wired by RtnetlinkLinks, forwarded by host routes.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::Command;

use sarena_core::dataplane::{
    ClusterNetworks, Dataplane, NodeNetwork, NodeUpdate, NodeUpdates, UpdateOutcome,
};
use sarena_core::links::RtnetlinkLinks;
use sarena_test_support::{HostLinkGuard, HostStack, Pod, TestNetns, require_root, run, unique};

/// Held by each test for its whole run: both own pod routes (proto 90) in
/// the host's main table, and a dataplane's `reconcile` sweeps every such
/// route its registry does not hold, the other test's pod included (as two
/// daemons in one netns would). Run side by side, the first test's
/// reconcile took the masquerade test's pod route, so the outside's NATed
/// replies found no way back to the pod.
static HOST_ROUTES: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// True when `to` answers within 4 s. ping retries every second until then:
/// a neighbour entry left incomplete by an earlier failed attempt is probed
/// only once a second, so a single 1 s try can race it under load.
fn ping(netns: &TestNetns, to: &str) -> bool {
    ping_with(netns, to, &["-c", "1", "-w", "4"])
}

/// True when `to` answers a single echo within 1 s (for "must not flow" checks).
fn ping_once(netns: &TestNetns, to: &str) -> bool {
    ping_with(netns, to, &["-c", "1", "-W", "1"])
}

fn ping_with(netns: &TestNetns, to: &str, options: &[&str]) -> bool {
    Command::new("ip")
        .args(["netns", "exec", &netns.name, "ping"])
        .args(options)
        .arg(to)
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

#[tokio::test]
#[ignore = "privileged: needs root; run as root with --include-ignored (scripts/test.sh)"]
async fn pods_reach_each_other_and_the_host_through_host_routes() {
    require_root("pods_reach_each_other_and_the_host_through_host_routes");
    let _routes = HOST_ROUTES.lock().await;
    let links = RtnetlinkLinks::new().unwrap();
    let node = HostStack::new();
    let dp = &node.dataplane;
    let network = NodeNetwork {
        gateways: vec!["10.252.0.1".parse().unwrap()],
        pools: vec!["10.252.0.0/16".parse().unwrap()],
        masquerade: false,
        exempt: Vec::new(),
    };
    dp.setup(&network).await.unwrap();
    dp.setup(&network).await.unwrap(); // idempotent
    let a = Pod::new(&links, "10.252.0.10/16", "10.252.0.1").await;
    let b = Pod::new(&links, "10.252.0.11/16", "10.252.0.1").await;

    assert!(
        !ping_once(&a.netns, "10.252.0.11"),
        "no route yet, yet traffic flowed"
    );
    dp.attach(&a.endpoint).await.unwrap();
    dp.attach(&b.endpoint).await.unwrap();
    dp.attach(&b.endpoint).await.unwrap(); // idempotent
    assert!(ping(&a.netns, "10.252.0.11"), "pod a -> pod b");
    assert!(ping(&b.netns, "10.252.0.10"), "pod b -> pod a");
    assert!(ping(&a.netns, "10.252.0.1"), "pod a -> gateway (the host)");
    let host_to_pod = Command::new("ping")
        .args(["-c", "1", "-W", "1", "10.252.0.11"])
        .output()
        .unwrap();
    assert!(host_to_pod.status.success(), "host -> pod b");
    let routes = run(&["ip", "route", "show", "proto", "90"]);
    assert!(
        routes.contains(&format!("10.252.0.10 dev {}", a.endpoint.spec.host_ifname)),
        "{routes}"
    );

    dp.detach(&b.endpoint).await.unwrap();
    dp.detach(&b.endpoint).await.unwrap(); // idempotent
    assert!(
        !ping_once(&a.netns, "10.252.0.11"),
        "detached pod still reachable"
    );
    // A stale record of another veth that had a's address: a's route stays.
    let mut stale = b.endpoint.clone();
    stale.spec.addresses = a.endpoint.spec.addresses.clone();
    dp.detach(&stale).await.unwrap();
    let routes = run(&["ip", "route", "show", "proto", "90"]);
    assert!(
        routes.contains(&format!("10.252.0.10 dev {}", a.endpoint.spec.host_ifname)),
        "a's route went with a stale record: {routes}"
    );

    // Another's veth, unmarked, with a route of Sarena's protocol: not
    // Sarena's, so reconcile leaves it.
    let foreign = HostLinkGuard(unique("fgn"));
    run(&[
        "ip",
        "link",
        "add",
        &foreign.0,
        "type",
        "veth",
        "peer",
        "name",
        &unique("fgp"),
    ]);
    run(&["ip", "link", "set", &foreign.0, "up"]);
    run(&[
        "ip",
        "route",
        "add",
        "10.252.9.9/32",
        "dev",
        &foreign.0,
        "proto",
        "90",
    ]);

    // Reconcile: b is back in the registry, a is not (stale) -> b routed, a not.
    let report = dp
        .reconcile(std::slice::from_ref(&b.endpoint))
        .await
        .unwrap();
    assert_eq!(report.attached, vec![b.endpoint.spec.host_ifname.clone()]);
    assert!(
        report.removed.contains(&"10.252.0.10/32".to_string()),
        "{report:?}"
    );
    assert!(!run(&["ip", "route", "show", "proto", "90"]).contains("10.252.0.10 "));
    assert!(
        run(&["ip", "route", "show", "proto", "90"])
            .contains(&format!("10.252.9.9 dev {}", foreign.0)),
        "reconcile removed a route on a link that is not Sarena's"
    );
    assert!(
        !report.removed.contains(&"10.252.9.9/32".to_string()),
        "{report:?}"
    );
    assert!(ping(&b.netns, "10.252.0.1"));
}

#[tokio::test]
#[ignore = "privileged: needs root; run as root with --include-ignored (scripts/test.sh)"]
async fn masquerading_lets_pods_reach_the_outside() {
    require_root("masquerading_lets_pods_reach_the_outside");
    let _routes = HOST_ROUTES.lock().await;
    let links = RtnetlinkLinks::new().unwrap();
    let node = HostStack::new();
    let dp = &node.dataplane;
    // The outside world: a netns behind a veth with 198.18.7.0/24 (our own namespace).
    let world = TestNetns::new();
    let (wh, wp) = (unique("srwh"), unique("srwp"));
    let _wguard = HostLinkGuard(wh.clone());
    run(&[
        "ip",
        "link",
        "add",
        &wh,
        "type",
        "veth",
        "peer",
        "name",
        &wp,
        "netns",
        &world.name,
    ]);
    run(&["ip", "addr", "add", "198.18.7.1/24", "dev", &wh]);
    run(&["ip", "link", "set", &wh, "up"]);
    world.exec(&["ip", "addr", "add", "198.18.7.2/24", "dev", &wp]);
    world.exec(&["ip", "link", "set", &wp, "up"]);

    let mut network = NodeNetwork {
        gateways: vec!["10.253.0.1".parse().unwrap()],
        pools: vec!["10.253.0.0/16".parse().unwrap()],
        masquerade: false,
        exempt: Vec::new(),
    };
    dp.setup(&network).await.unwrap();
    let p = Pod::new(&links, "10.253.0.5/16", "10.253.0.1").await;
    dp.attach(&p.endpoint).await.unwrap();
    assert!(
        !ping_once(&p.netns, "198.18.7.2"),
        "the world has no route back, so without masquerading this must fail"
    );
    network.masquerade = true;
    dp.setup(&network).await.unwrap();
    assert!(ping(&p.netns, "198.18.7.2"), "masqueraded pod -> outside");

    // The cluster's networks are never masqueraded: with the world among
    // them, the pod's own source goes out (and finds no way back). NAT is
    // decided per conntrack flow, so each change is checked on new flows:
    // the pod's earlier ones are forgotten first.
    let forget = || {
        let _ = Command::new("conntrack")
            .args(["-D", "-d", "198.18.7.2"])
            .output();
    };
    let world_net = ClusterNetworks {
        pod_cidrs: vec!["198.18.7.0/24".parse().unwrap()],
        node_addresses: vec![],
        peer_pod_cidrs: vec![],
    };
    let outcome = dp.apply(&NodeUpdate::ClusterNetworks(world_net)).await;
    assert_eq!(outcome.unwrap(), UpdateOutcome::Applied);
    forget();
    assert!(
        !ping_once(&p.netns, "198.18.7.2"),
        "a cluster network was masqueraded"
    );
    dp.setup(&network).await.unwrap();
    forget();
    assert!(
        !ping_once(&p.netns, "198.18.7.2"),
        "set-up forgot the cluster's networks"
    );
    let node_only = ClusterNetworks {
        pod_cidrs: vec![],
        node_addresses: vec!["198.18.7.2".parse().unwrap()],
        peer_pod_cidrs: vec![],
    };
    dp.apply(&NodeUpdate::ClusterNetworks(node_only))
        .await
        .unwrap();
    forget();
    assert!(
        !ping_once(&p.netns, "198.18.7.2"),
        "a node's address was masqueraded"
    );
    dp.apply(&NodeUpdate::ClusterNetworks(ClusterNetworks::default()))
        .await
        .unwrap();
    forget();
    assert!(
        ping(&p.netns, "198.18.7.2"),
        "the cluster shrank: masqueraded again"
    );
    // A configured exemption (`no_masquerade`) works the same.
    network.exempt = vec!["198.18.0.0/16".parse().unwrap()];
    dp.setup(&network).await.unwrap();
    forget();
    assert!(
        !ping_once(&p.netns, "198.18.7.2"),
        "a configured exemption was masqueraded"
    );
    network.exempt.clear();
    network.masquerade = false;
    dp.setup(&network).await.unwrap();
    assert!(
        !ping_once(&p.netns, "198.18.7.2"),
        "masquerading switched off again"
    );
}
