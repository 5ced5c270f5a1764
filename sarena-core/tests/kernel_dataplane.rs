//! The kernel-routing dataplane on a real kernel: pods in throwaway netns,
//! wired by RtnetlinkLinks, forwarded by host routes.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::net::IpAddr;
use std::process::Command;

use common::{HostLinkGuard, TestNetns, require_root, run, unique};
use ipnet::IpNet;
use sarena_core::api::{Attachment, Endpoint, PodRef, RouteSpec};
use sarena_core::dataplane::kernel::KernelNames;
use sarena_core::dataplane::{Dataplane, KernelDataplane, NodeNetwork};
use sarena_core::links::{Links, PodIfaceConfig, RtnetlinkLinks, VethSpec, host_ifname};

/// A pod: netns + veth + address, and its registry entry.
struct Pod {
    netns: TestNetns,
    endpoint: Endpoint,
    _host: HostLinkGuard,
}

async fn pod(links: &RtnetlinkLinks, address: &str, gateway: &str) -> Pod {
    let netns = TestNetns::new();
    let container = unique("ctr");
    let host = host_ifname(&container, "eth0");
    let guard = HostLinkGuard(host.clone());
    let spec = VethSpec {
        host_ifname: host.clone(),
        netns: netns.path(),
        pod_ifname: "eth0".into(),
        mtu: 1500,
        pod_mac: None,
    };
    let pair = links.create_veth(&spec).await.unwrap();
    let gw: IpAddr = gateway.parse().unwrap();
    let address: IpNet = address.parse().unwrap();
    let config = PodIfaceConfig {
        addresses: vec![address],
        routes: vec![
            RouteSpec {
                dst: IpNet::from(gw),
                gw: None,
                mtu: None,
            },
            RouteSpec {
                dst: "0.0.0.0/0".parse().unwrap(),
                gw: Some(gw),
                mtu: None,
            },
        ],
    };
    links
        .configure_pod(&spec.netns, "eth0", &config)
        .await
        .unwrap();
    let endpoint = Endpoint {
        owner: Attachment {
            container_id: container,
            ifname: "eth0".into(),
        },
        pod: PodRef::default(),
        host_ifname: host,
        host_ifindex: pair.host_ifindex,
        host_mac: pair.host_mac,
        pod_mac: pair.pod_mac,
        addresses: vec![address],
        netns: spec.netns.display().to_string(),
        created_at: 0,
    };
    Pod {
        netns,
        endpoint,
        _host: guard,
    }
}

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

/// Unique object names, torn down on drop.
struct Node {
    dataplane: KernelDataplane,
    names: KernelNames,
}

impl Node {
    fn new() -> Self {
        let names = KernelNames {
            gateway_device: unique("srgw"),
            gateway_peer: unique("srgp"),
            nft_table: unique("srt"),
        };
        Node {
            dataplane: KernelDataplane::with_names(names.clone()).unwrap(),
            names,
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        // The test's runtime is blocked in this drop, so tear down with a
        // fresh runtime and a fresh netlink socket.
        let names = self.names.clone();
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async { KernelDataplane::with_names(names).unwrap().teardown().await })
        })
        .join();
    }
}

#[tokio::test]
async fn pods_reach_each_other_and_the_host_through_host_routes() {
    if !require_root("pods_reach_each_other_and_the_host_through_host_routes") {
        return;
    }
    let links = RtnetlinkLinks::new().unwrap();
    let node = Node::new();
    let dp = &node.dataplane;
    let network = NodeNetwork {
        gateways: vec!["10.252.0.1".parse().unwrap()],
        pools: vec!["10.252.0.0/16".parse().unwrap()],
        masquerade: false,
    };
    dp.setup(&network).await.unwrap();
    dp.setup(&network).await.unwrap(); // idempotent
    let a = pod(&links, "10.252.0.10/16", "10.252.0.1").await;
    let b = pod(&links, "10.252.0.11/16", "10.252.0.1").await;

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
        routes.contains(&format!("10.252.0.10 dev {}", a.endpoint.host_ifname)),
        "{routes}"
    );

    dp.detach(&b.endpoint).await.unwrap();
    dp.detach(&b.endpoint).await.unwrap(); // idempotent
    assert!(
        !ping_once(&a.netns, "10.252.0.11"),
        "detached pod still reachable"
    );
    // A stale record of another veth that had a's address: a's route stays.
    let stale = Endpoint {
        addresses: a.endpoint.addresses.clone(),
        ..b.endpoint.clone()
    };
    dp.detach(&stale).await.unwrap();
    let routes = run(&["ip", "route", "show", "proto", "90"]);
    assert!(
        routes.contains(&format!("10.252.0.10 dev {}", a.endpoint.host_ifname)),
        "a's route went with a stale record: {routes}"
    );

    // Reconcile: b is back in the registry, a is not (stale) -> b routed, a not.
    let report = dp
        .reconcile(std::slice::from_ref(&b.endpoint))
        .await
        .unwrap();
    assert_eq!(report.attached, vec![b.endpoint.host_ifname.clone()]);
    assert!(
        report.removed.contains(&"10.252.0.10/32".to_string()),
        "{report:?}"
    );
    assert!(!run(&["ip", "route", "show", "proto", "90"]).contains("10.252.0.10 "));
    assert!(ping(&b.netns, "10.252.0.1"));
}

#[tokio::test]
async fn masquerading_lets_pods_reach_the_outside() {
    if !require_root("masquerading_lets_pods_reach_the_outside") {
        return;
    }
    let links = RtnetlinkLinks::new().unwrap();
    let node = Node::new();
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
    };
    dp.setup(&network).await.unwrap();
    let p = pod(&links, "10.253.0.5/16", "10.253.0.1").await;
    dp.attach(&p.endpoint).await.unwrap();
    assert!(
        !ping_once(&p.netns, "198.18.7.2"),
        "the world has no route back, so without masquerading this must fail"
    );
    network.masquerade = true;
    dp.setup(&network).await.unwrap();
    assert!(ping(&p.netns, "198.18.7.2"), "masqueraded pod -> outside");
    network.masquerade = false;
    dp.setup(&network).await.unwrap();
    assert!(
        !ping_once(&p.netns, "198.18.7.2"),
        "masquerading switched off again"
    );
}
