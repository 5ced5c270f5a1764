//! The real binaries end to end on the eBPF dataplane: `sarena-daemon` in
//! `ebpf` mode (unique state dir, socket, pin dir and pool), two pods in
//! throwaway netns added by the real `sarena-cni` plugin, then:
//! - SIGKILL of the daemon during a continuous ping between the pods and a
//!   restart on the same state and pins: at most one ping lost, and registry,
//!   pinned maps and tc filters agree afterwards;
//! - with the host's per-pod routes removed, pod ↔ pod traffic still flows
//!   (only the programs can carry it);
//! - DEL through the plugin removes map entries, links and allocations.
//!
//! Privileged: needs root and the eBPF object embedded in the daemon (built
//! with the eBPF toolchain, scripts/setup-ebpf.sh). The tests are `#[ignore]`d
//! unless included (`--include-ignored`, as scripts/test.sh does as root);
//! included without them, they fail.
//!
//! The node and pod fixture lives in `ebpf_node/` (shared with
//! `operator_ebpf.rs`). The plugin is the `sarena-cni` binary next to the daemon's
//! (`target/<profile>/`); `cargo test --workspace` builds it (sarena-cni has
//! integration tests of its own). When it is missing, the test builds it.
//!
//! The kernel host stack uses the node-global device `sarena_host`: the tests
//! run one at a time, and each removes the device at the end if it did not
//! exist before (otherwise only its gateway address).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use sarena_core::api::Inspect as _;
use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr};
use std::process::Command;
use std::time::Duration;

use sarena_core::api::Endpoint;
use sarena_test_support::{ping_summary, run, succeeds, tc_program_ids};

mod ebpf_node;

use ebpf_node::{GATEWAY, Node, Pod, SERIAL, preconditions};

fn v4(endpoint: &Endpoint) -> Vec<Ipv4Addr> {
    endpoint
        .spec
        .addresses
        .iter()
        .filter_map(|a| match a.addr() {
            IpAddr::V4(v4) => Some(v4),
            IpAddr::V6(_) => None,
        })
        .collect()
}

/// Sarena's host routes (`proto 90`) to `ip`.
fn host_routes(ip: Ipv4Addr) -> String {
    run(&[
        "ip",
        "-4",
        "route",
        "show",
        "proto",
        "90",
        "match",
        &ip.to_string(),
    ])
    .lines()
    .filter(|l| l.starts_with(&format!("{ip} ")))
    .collect::<Vec<_>>()
    .join("\n")
}

/// Registry, endpoint map and tc filters describe exactly
/// `pods`, each pod's veth with one program per direction; the IPAM holds
/// exactly the pods' addresses.
async fn assert_consistent(node: &Node, pods: &[&Pod]) -> Vec<Endpoint> {
    let client = node.site.client();
    let mut endpoints = client.endpoints().await.unwrap();
    endpoints.sort_by(|a, b| a.spec.owner.container_id.cmp(&b.spec.owner.container_id));
    let ids: BTreeSet<&str> = endpoints
        .iter()
        .map(|e| e.spec.owner.container_id.as_str())
        .collect();
    let want: BTreeSet<&str> = pods.iter().map(|p| p.id()).collect();
    assert_eq!(ids, want, "registry");
    let registered: BTreeSet<Ipv4Addr> = endpoints.iter().flat_map(v4).collect();
    let pod_ips: BTreeSet<Ipv4Addr> = pods.iter().map(|p| p.ip).collect();
    assert_eq!(registered, pod_ips, "registry addresses");

    let allocated: BTreeSet<IpAddr> = client
        .ipam_state()
        .await
        .unwrap()
        .allocations
        .iter()
        .map(|r| r.address)
        .collect();
    let want_allocated: BTreeSet<IpAddr> = pod_ips.iter().map(|ip| IpAddr::V4(*ip)).collect();
    assert_eq!(allocated, want_allocated, "IPAM allocations");

    let pins = node.pins();
    let entries = pins.endpoint_entries().unwrap();
    let mapped: Vec<Ipv4Addr> = entries.iter().map(|(ip, _)| *ip).collect();
    assert_eq!(
        mapped,
        pod_ips.iter().copied().collect::<Vec<_>>(),
        "endpoint map entries"
    );
    for endpoint in &endpoints {
        for ip in v4(endpoint) {
            let (_, info) = entries.iter().find(|(a, _)| *a == ip).unwrap();
            assert_eq!(info.ifindex, endpoint.spec.host_ifindex, "{ip}: {info:?}");
        }
        let attached = pins.attachments(endpoint.spec.host_ifindex).await.unwrap();
        let names: Vec<&str> = attached.iter().map(|a| a.program.as_str()).collect();
        assert_eq!(
            names,
            ["from_container", "to_container"],
            "filters on {}",
            endpoint.spec.host_ifname
        );
        let (ingress, egress) = tc_program_ids(&endpoint.spec.host_ifname);
        assert_eq!(
            (ingress.len(), egress.len()),
            (1, 1),
            "tc programs on {}",
            endpoint.spec.host_ifname
        );
        assert!(
            pins.counters(endpoint.spec.host_ifindex).unwrap().is_some(),
            "no counters for {}",
            endpoint.spec.host_ifname
        );
    }
    assert!(pins.pinned_links().unwrap().is_empty(), "tcx links pinned");
    endpoints
}

/// DEL both pods through the plugin: no map entries, links, routes,
/// endpoints or allocations remain.
async fn delete_and_assert_clean(node: &Node, pods: &[&Pod], endpoints: &[Endpoint]) {
    for pod in pods {
        node.del_pod(pod);
    }
    let client = node.site.client();
    assert!(client.endpoints().await.unwrap().is_empty(), "endpoints");
    let ipam = client.ipam_state().await.unwrap();
    assert!(ipam.allocations.is_empty(), "{:?}", ipam.allocations);
    let pins = node.pins();
    assert!(pins.endpoint_entries().unwrap().is_empty(), "map entries");
    assert!(pins.pinned_links().unwrap().is_empty(), "pinned links");
    for endpoint in endpoints {
        assert!(pins.counters(endpoint.spec.host_ifindex).unwrap().is_none());
        // The daemon removes the veth right after answering DEL.
        let exists = || succeeds(&["ip", "link", "show", &endpoint.spec.host_ifname]);
        for _ in 0..40 {
            if !exists() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(!exists(), "{} still exists", endpoint.spec.host_ifname);
        assert_eq!(tc_program_ids(&endpoint.spec.host_ifname), (vec![], vec![]));
    }
    for pod in pods {
        assert_eq!(host_routes(pod.ip), "", "host route to {}", pod.ip);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "privileged: needs root and the eBPF object; run as root with --include-ignored (scripts/test.sh)"]
async fn sigkill_during_ping_loses_at_most_one_and_restart_reconciles() {
    let test = "sigkill_during_ping_loses_at_most_one_and_restart_reconciles";
    preconditions(test);
    let _serial = SERIAL.lock().await;
    let mut node = Node::start().await;
    let (a, b) = (node.add_pod(), node.add_pod());
    assert!(a.pings(&b, 2), "a → b before the restart");
    let endpoints = assert_consistent(&node, &[&a, &b]).await;
    let programs_before: Vec<_> = endpoints
        .iter()
        .map(|e| tc_program_ids(&e.spec.host_ifname))
        .collect();
    let redirected_before = node
        .pins()
        .counters(endpoints[0].spec.host_ifindex)
        .unwrap()
        .unwrap()
        .redirected_packets;

    // 200 pings, one every 50 ms (10 s); the daemon dies 2 s in and is
    // restarted on the same state dir and pins at once.
    let (netns, to) = (a.id().to_owned(), b.ip.to_string());
    let pinger = std::thread::spawn(move || {
        let out = Command::new("ip")
            .args(["netns", "exec", &netns, "ping", "-n", "-q", "-W", "1"])
            .args(["-i", "0.05", "-c", "200", &to])
            .output()
            .unwrap();
        ping_summary(&out)
    });
    tokio::time::sleep(Duration::from_secs(2)).await;
    node.daemon().kill();
    let log_len = node.log().len();
    node.daemon = Some(node.spawn().await);
    let (sent, received) = tokio::task::spawn_blocking(move || pinger.join().unwrap())
        .await
        .unwrap();
    eprintln!("ping across SIGKILL + restart: {received}/{sent} answered");
    assert_eq!(sent, 200);
    assert!(received + 1 >= sent, "{received}/{sent} pings answered");

    // The restarted daemon re-opened what was there: nothing attached,
    // nothing removed, the same programs on the veths, the counters kept.
    let restart_log = node.log()[log_len..].to_owned();
    let ready = restart_log
        .lines()
        .find(|l| l.contains("dataplane ready"))
        .unwrap_or_else(|| panic!("no 'dataplane ready' after the restart:\n{restart_log}"));
    assert!(
        ready.contains("attached=0")
            && ready.contains("removed=0")
            && ready.contains("endpoints=2"),
        "{ready}"
    );
    let endpoints_after = assert_consistent(&node, &[&a, &b]).await;
    assert_eq!(
        endpoints_after, endpoints,
        "registry changed across the restart"
    );
    let programs_after: Vec<_> = endpoints
        .iter()
        .map(|e| tc_program_ids(&e.spec.host_ifname))
        .collect();
    assert_eq!(programs_after, programs_before, "programs re-attached");
    let redirected_after = node
        .pins()
        .counters(endpoints[0].spec.host_ifindex)
        .unwrap()
        .unwrap()
        .redirected_packets;
    assert!(
        redirected_after >= redirected_before + u64::from(received),
        "{redirected_before} → {redirected_after}"
    );
    // The host stack's routes are still (or again) there.
    for pod in [&a, &b] {
        assert_ne!(host_routes(pod.ip), "", "no host route to {}", pod.ip);
    }
    assert!(a.pings(&b, 2) && b.pings(&a, 2), "after the restart");

    delete_and_assert_clean(&node, &[&a, &b], &endpoints).await;
    // A restart after the deletes finds nothing to reconcile either.
    node.daemon().kill();
    node.daemon = Some(node.spawn().await);
    assert_consistent(&node, &[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "privileged: needs root and the eBPF object; run as root with --include-ignored (scripts/test.sh)"]
async fn pods_talk_through_the_programs_without_host_routes() {
    let test = "pods_talk_through_the_programs_without_host_routes";
    preconditions(test);
    let _serial = SERIAL.lock().await;
    let node = Node::start().await;
    let (a, b) = (node.add_pod(), node.add_pod());
    let endpoints = assert_consistent(&node, &[&a, &b]).await;

    for pod in [&a, &b] {
        let route = host_routes(pod.ip);
        assert_ne!(route, "", "no host route to {}", pod.ip);
        run(&[
            "ip",
            "-4",
            "route",
            "del",
            &format!("{}/32", pod.ip),
            "proto",
            "90",
        ]);
        assert_eq!(host_routes(pod.ip), "", "route to {} not removed", pod.ip);
    }
    // The host stack cannot reach the pods any more: the gateway (a host
    // address) no longer answers...
    let (_, received) = a.ping(GATEWAY, 1, "0.2");
    assert_eq!(received, 0, "the host still routes to {}", a.ip);
    // ...yet the pods reach each other, through the programs.
    let pins = node.pins();
    let before = pins
        .counters(endpoints[0].spec.host_ifindex)
        .unwrap()
        .unwrap();
    assert!(a.pings(&b, 3), "a → b without host routes");
    assert!(b.pings(&a, 3), "b → a without host routes");
    let after = pins
        .counters(endpoints[0].spec.host_ifindex)
        .unwrap()
        .unwrap();
    assert!(
        after.redirected_packets >= before.redirected_packets + 3,
        "{before:?} {after:?}"
    );
    assert!(
        after.to_pod_packets >= before.to_pod_packets + 3,
        "{before:?} {after:?}"
    );

    delete_and_assert_clean(&node, &[&a, &b], &endpoints).await;
}
