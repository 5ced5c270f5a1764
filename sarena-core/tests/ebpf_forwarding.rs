//! What the eBPF programs carry and what they drop, against the real kernel:
//! two pods in throwaway netns, veths from RtnetlinkLinks, the programs
//! attached as tc filters, maps pinned under a unique directory. No host
//! routes to the pods exist, so every pod ↔ pod frame that arrives went
//! through the programs.
//!
//! Privileged (root and the eBPF object): `#[ignore]`d unless included, see
//! `sarena_test_support::require_root`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod ebpf;

use ebpf::raw::send_raw_frames;
use ebpf::{GATEWAY, pod};
use sarena_core::dataplane::ebpf::AyaDataplane;
use sarena_core::dataplane::{Dataplane, KernelDataplane, NodeNetwork};
use sarena_core::links::RtnetlinkLinks;
use sarena_test_support::{
    HostStack, PinDir, Pod, require_ebpf_object, require_root, run, tc_programs, tcp_exchange,
};

fn node() -> NodeNetwork {
    NodeNetwork {
        gateways: vec![GATEWAY.parse().unwrap()],
        pools: vec!["10.251.0.0/24".parse().unwrap()],
        masquerade: false,
        exempt: Vec::new(),
    }
}

/// The host has no route through either pod's veth: only the programs can
/// carry pod ↔ pod traffic.
fn assert_no_host_routes(pods: &[&Pod]) {
    for pod in pods {
        let routes = run(&[
            "ip",
            "-4",
            "route",
            "show",
            "table",
            "all",
            "dev",
            pod.ifname(),
        ]);
        assert!(
            routes.trim().is_empty(),
            "host routes via {}: {routes}",
            pod.ifname()
        );
    }
}

#[tokio::test]
#[ignore = "privileged: needs root and the eBPF object; run as root with --include-ignored (scripts/test.sh)"]
async fn pods_ping_and_talk_tcp_through_the_programs_alone() {
    require_root("pods_ping_and_talk_tcp_through_the_programs_alone");
    let object = require_ebpf_object("pods_ping_and_talk_tcp_through_the_programs_alone");
    let pins = PinDir::new();
    let links = RtnetlinkLinks::new().unwrap();
    let (a, b) = (pod(&links, 2).await, pod(&links, 3).await);

    // Without the programs, nothing carries pod ↔ pod traffic.
    assert_no_host_routes(&[&a, &b]);
    assert!(!a.ping(&b, 1), "pods talk without the dataplane?");

    let dp = AyaDataplane::open(&object, &pins.0).unwrap();
    dp.setup(&node()).await.unwrap();
    dp.attach(&a.endpoint).await.unwrap();
    dp.attach(&b.endpoint).await.unwrap();
    // attach is idempotent: no second link.
    dp.attach(&a.endpoint).await.unwrap();
    assert_eq!(tc_programs(a.ifname()), (1, 1));
    assert_eq!(tc_programs(b.ifname()), (1, 1));

    assert!(a.ping(&b, 3), "a → b");
    assert!(b.ping(&a, 3), "b → a");
    assert_eq!(tcp_exchange(&a, &b, 4 << 20), 4 << 20);
    assert_no_host_routes(&[&a, &b]);

    let ca = dp.counters(a.endpoint.spec.host_ifindex).unwrap().unwrap();
    let cb = dp.counters(b.endpoint.spec.host_ifindex).unwrap().unwrap();
    assert!(ca.redirected_packets >= 3 + 3, "{ca:?}");
    assert!(cb.redirected_packets >= 3, "{cb:?}");
    assert!(cb.to_pod_packets >= ca.redirected_packets, "{ca:?} {cb:?}");
    assert!(cb.to_pod_bytes >= 4 << 20, "{cb:?}");
    assert!(ca.from_pod_bytes >= 4 << 20, "{ca:?}");
    assert!(ca.arp_replies >= 1 && cb.arp_replies >= 1, "{ca:?} {cb:?}");
    assert_eq!(ca.total_drops() + cb.total_drops(), 0, "{ca:?} {cb:?}");

    // ARP for the peer (on-link /24) and for the gateway, which exists on no
    // host interface, were answered with the host end's MAC by the program.
    let neigh = a.netns.exec(&["ip", "neigh", "show", "dev", "eth0"]);
    let peer_line = neigh
        .lines()
        .find(|l| l.starts_with(&format!("{} ", b.ip())));
    assert!(
        peer_line.is_some_and(|l| l.contains(&a.endpoint.spec.host_mac.to_string())),
        "{neigh}"
    );
    let before = dp.counters(a.endpoint.spec.host_ifindex).unwrap().unwrap();
    // TTL 1: the host stack drops the echo instead of forwarding it anywhere.
    let _ = std::process::Command::new("ip")
        .args([
            "netns",
            "exec",
            &a.netns.name,
            "ping",
            "-c",
            "1",
            "-t",
            "1",
            "-W",
            "1",
            GATEWAY,
        ])
        .output();
    let neigh = a
        .netns
        .exec(&["ip", "neigh", "show", GATEWAY, "dev", "eth0"]);
    assert!(
        neigh.contains(&a.endpoint.spec.host_mac.to_string()),
        "{neigh}"
    );
    let after = dp.counters(a.endpoint.spec.host_ifindex).unwrap().unwrap();
    assert!(
        after.arp_replies > before.arp_replies,
        "{before:?} {after:?}"
    );
    assert!(
        !run(&["ip", "-o", "-4", "addr"]).contains(&format!(" {GATEWAY}/")),
        "the gateway address exists on the host; the test proves nothing"
    );
}

#[tokio::test]
#[ignore = "privileged: needs root and the eBPF object; run as root with --include-ignored (scripts/test.sh)"]
async fn malformed_frames_are_dropped_and_counted() {
    require_root("malformed_frames_are_dropped_and_counted");
    let object = require_ebpf_object("malformed_frames_are_dropped_and_counted");
    let pins = PinDir::new();
    let links = RtnetlinkLinks::new().unwrap();
    let (a, b) = (pod(&links, 2).await, pod(&links, 3).await);
    let dp = AyaDataplane::open(&object, &pins.0).unwrap();
    dp.attach(&a.endpoint).await.unwrap();
    dp.attach(&b.endpoint).await.unwrap();

    let host_mac = a.endpoint.spec.host_mac.octets();
    let pod_mac = a.endpoint.spec.pod_mac.octets();
    let eth = |ether_type: [u8; 2]| {
        let mut f = Vec::new();
        f.extend_from_slice(&host_mac);
        f.extend_from_slice(&pod_mac);
        f.extend_from_slice(&ether_type);
        f
    };
    let mut truncated_ip = eth([0x08, 0x00]);
    truncated_ip.extend_from_slice(&[0x45, 0, 0, 20, 0, 0]);
    let mut bad_version = eth([0x08, 0x00]);
    let mut header = [0u8; 20];
    header[0] = 0x65; // version 6 in an IPv4 ethertype
    header[8] = 64;
    header[16..20].copy_from_slice(&b.ip().octets());
    bad_version.extend_from_slice(&header);
    let mut short_ihl = bad_version.clone();
    short_ihl[14] = 0x44; // header length 16 bytes
    let mut truncated_arp = eth([0x08, 0x06]);
    truncated_arp.extend_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
    let mut bad_arp_lengths = eth([0x08, 0x06]);
    bad_arp_lengths.extend_from_slice(&[0, 1, 8, 0, 8, 4, 0, 1]);
    bad_arp_lengths.extend_from_slice(&[0u8; 24]);
    // (A frame shorter than an Ethernet header cannot be sent: the kernel
    // refuses it before any program sees it.)
    send_raw_frames(
        &a,
        vec![
            truncated_ip,
            bad_version,
            short_ihl,
            truncated_arp,
            bad_arp_lengths,
        ],
    );

    let c = dp.counters(a.endpoint.spec.host_ifindex).unwrap().unwrap();
    assert_eq!(
        c.drops[..4],
        [0, 3, 2, 0],
        "drops by reason (ethernet, ipv4, arp, rewrite): {c:?}"
    );
    assert_eq!(c.redirected_packets, 0, "{c:?}");
    // Nothing was forwarded, and traffic still flows.
    assert!(a.ping(&b, 1));
}

#[tokio::test]
#[ignore = "privileged: needs root and the eBPF object; run as root with --include-ignored (scripts/test.sh)"]
async fn with_the_kernel_dataplane_as_host_stack_pods_also_reach_the_host() {
    let test = "with_the_kernel_dataplane_as_host_stack_pods_also_reach_the_host";
    require_root(test);
    let object = require_ebpf_object(test);
    let gateway = "10.254.0.1";
    let pins = PinDir::new();
    let host = HostStack::new();
    let links = RtnetlinkLinks::new().unwrap();
    let a = Pod::in_subnet(&links, gateway, 2).await;
    let b = Pod::in_subnet(&links, gateway, 3).await;
    let kernel = KernelDataplane::with_names(host.names.clone()).unwrap();
    let dp = AyaDataplane::open(&object, &pins.0)
        .unwrap()
        .with_host_stack(std::sync::Arc::new(kernel));
    dp.setup(&NodeNetwork {
        gateways: vec![gateway.parse().unwrap()],
        pools: vec!["10.254.0.0/24".parse().unwrap()],
        masquerade: false,
        exempt: Vec::new(),
    })
    .await
    .unwrap();
    dp.attach(&a.endpoint).await.unwrap();
    dp.attach(&b.endpoint).await.unwrap();

    // The host routes exist now, yet pod ↔ pod still takes the eBPF path.
    assert!(a.ping(&b, 2));
    let ca = dp.counters(a.endpoint.spec.host_ifindex).unwrap().unwrap();
    assert!(ca.redirected_packets >= 2, "{ca:?}");
    // The gateway is the host: answered through the host stack, and the
    // reply comes back through to_container.
    let before = dp.counters(a.endpoint.spec.host_ifindex).unwrap().unwrap();
    assert!(a.ping_addr(gateway, 2), "pod -> gateway (host)");
    let after = dp.counters(a.endpoint.spec.host_ifindex).unwrap().unwrap();
    assert!(
        after.to_pod_packets >= before.to_pod_packets + 2,
        "{after:?}"
    );
    assert_eq!(after.redirected_packets, before.redirected_packets);

    dp.detach(&a.endpoint).await.unwrap();
    dp.detach(&b.endpoint).await.unwrap();
    assert!(!a.ping(&b, 1));
}
