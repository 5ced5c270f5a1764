//! After the chaos: settle what a runtime would settle, then check that
//! nothing was lost, nothing is owned twice and nothing is left behind.

use sarena_core::api::Inspect as _;
use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr};

use ipnet::IpNet;
use sarena_core::api::Attachment;
use sarena_core::delqueue::DeleteQueue;
use sarena_core::links::{Links, RtnetlinkLinks, host_ifname};
use sarena_core::node::{NodeConfig, Registry, VethLedger};
use sarena_test_support::daemon::EbpfNode;
use sarena_test_support::{run, succeeds, tc_program_ids};

use super::POOL;
use super::pods::{Pod, PodState};

/// The ifindex of host link `name`, if it exists.
fn ifindex(name: &str) -> Option<u32> {
    std::fs::read_to_string(format!("/sys/class/net/{name}/ifindex"))
        .ok()
        .and_then(|s| s.trim().parse().ok())
}

fn live(pods: &[Pod]) -> BTreeMap<Attachment, IpNet> {
    pods.iter()
        .filter_map(|p| match &p.state {
            PodState::Live { address, .. } => Some((p.att.clone(), address.parse().unwrap())),
            _ => None,
        })
        .collect()
}

/// DELs the pods whose fate is unknown (a runtime does), restarts the daemon
/// (it replays the deletion queue and repairs at start-up), runs GC with the
/// live attachments, and checks every invariant.
pub async fn settle_and_verify(node: &mut EbpfNode, pods: &mut [Pod]) {
    node.ensure_running().await;
    for pod in pods.iter_mut() {
        if matches!(pod.state, PodState::Unknown) {
            let del = node.cni.del(&pod.att, Some(&pod.netns));
            assert!(del.ok, "final DEL of {}: {del:?}", pod.name);
            pod.state = PodState::Absent;
        }
    }
    node.kill();
    node.ensure_running().await;
    let live = live(pods);
    eprintln!("chaos: {} pods live at the end", live.len());
    let queue = DeleteQueue::new(node.cni.queue_dir());
    assert!(queue.is_empty().unwrap(), "queue: {:?}", queue.pending());
    // Already before GC: the DELs and the start-up repair left nothing.
    registry_matches(node, &live).await;
    links_match(pods, &live).await;
    routes_match(&live);
    // GC with the true live set changes nothing, then.
    let valid: Vec<Attachment> = live.keys().cloned().collect();
    let gc = node.cni.gc(&valid);
    assert!(gc.ok, "GC: {gc:?}");
    registry_matches(node, &live).await;
    links_match(pods, &live).await;
    routes_match(&live);
    reachable(pods, &live);
    node.kill();
    pins_match(node, &live).await;
}

/// IPAM and the endpoints: exactly the live pods, each with its address.
async fn registry_matches(node: &EbpfNode, live: &BTreeMap<Attachment, IpNet>) {
    let client = node.client();
    let state = client.ipam_state().await.unwrap();
    let mut by_address: BTreeMap<IpAddr, &Attachment> = BTreeMap::new();
    for record in &state.allocations {
        if let Some(other) = by_address.insert(record.address, &record.owner) {
            panic!(
                "{} owned by {other:?} and {:?}",
                record.address, record.owner
            );
        }
    }
    let owners: BTreeSet<&Attachment> = state.allocations.iter().map(|r| &r.owner).collect();
    assert_eq!(owners, live.keys().collect(), "allocations vs live pods");
    for record in &state.allocations {
        assert_eq!(
            record.address,
            live[&record.owner].addr(),
            "{:?}",
            record.owner
        );
        assert_eq!(record.lease_expires_at, None, "{:?} leased", record.owner);
    }
    let allocated: u64 = state.pools.iter().map(|p| p.allocated).sum();
    assert_eq!(allocated, live.len() as u64, "pool counters");
    let endpoints = client.endpoints().await.unwrap();
    let owners: BTreeSet<&Attachment> = endpoints.iter().map(|e| &e.spec.owner).collect();
    assert_eq!(owners, live.keys().collect(), "endpoints vs live pods");
    for endpoint in &endpoints {
        assert_eq!(
            ifindex(&endpoint.spec.host_ifname),
            Some(endpoint.spec.host_ifindex),
            "{:?}",
            endpoint.spec.owner
        );
        assert_eq!(endpoint.spec.addresses, vec![live[&endpoint.spec.owner]]);
    }
}

/// Sarena's host links are the live pods' (each with both filters); only live
/// pods have an interface in their netns.
async fn links_match(pods: &[Pod], live: &BTreeMap<Attachment, IpNet>) {
    let links = RtnetlinkLinks::new().unwrap();
    let marked: BTreeSet<String> = links
        .list_host_links()
        .await
        .unwrap()
        .into_iter()
        .map(|l| l.ifname)
        .collect();
    let wanted: BTreeSet<String> = live
        .keys()
        .map(|a| host_ifname(&a.container_id, &a.ifname))
        .collect();
    assert_eq!(marked, wanted, "Sarena's host links vs live pods");
    for host in &wanted {
        let (ingress, egress) = tc_program_ids(host);
        assert_eq!((ingress.len(), egress.len()), (1, 1), "filters on {host}");
    }
    for pod in pods {
        let inside = run(&["ip", "netns", "exec", &pod.name, "ip", "-o", "link", "show"]);
        let has_eth0 = inside.lines().any(|l| l.contains(" eth0@"));
        assert_eq!(
            has_eth0,
            live.contains_key(&pod.att),
            "{}: {inside}",
            pod.name
        );
    }
}

/// The host stack's routes to the pool (proto 90): one per live pod, via its veth.
fn routes_match(live: &BTreeMap<Attachment, IpNet>) {
    let pool: ipnet::Ipv4Net = POOL.parse().unwrap();
    let shown = run(&["ip", "-4", "-o", "route", "show", "proto", "90"]);
    let mut found = BTreeMap::new();
    for line in shown.lines() {
        let mut words = line.split_whitespace();
        let Some(Ok(dst)) = words.next().map(str::parse::<Ipv4Addr>) else {
            continue;
        };
        if !pool.contains(&dst) {
            continue;
        }
        let dev = line
            .split(" dev ")
            .nth(1)
            .and_then(|r| r.split_whitespace().next());
        assert!(
            found.insert(dst, dev.unwrap().to_string()).is_none(),
            "{line}"
        );
    }
    let wanted: BTreeMap<Ipv4Addr, String> = live
        .iter()
        .map(|(a, net)| {
            let IpAddr::V4(v4) = net.addr() else {
                panic!("{net}")
            };
            (v4, host_ifname(&a.container_id, &a.ifname))
        })
        .collect();
    assert_eq!(found, wanted, "host routes to the pods");
}

/// Every live pod reaches the next one (a ring).
fn reachable(pods: &[Pod], live: &BTreeMap<Attachment, IpNet>) {
    let alive: Vec<&Pod> = pods.iter().filter(|p| live.contains_key(&p.att)).collect();
    if alive.len() < 2 {
        return;
    }
    for (i, from) in alive.iter().enumerate() {
        let to = alive[(i + 1) % alive.len()];
        let address = live[&to.att].addr().to_string();
        assert!(
            succeeds(&[
                "ip", "netns", "exec", &from.name, "ping", "-n", "-q", "-c", "3", "-i", "0.2",
                "-W", "1", &address,
            ]),
            "{} cannot reach {} ({address})",
            from.name,
            to.name
        );
    }
}

/// With the daemon stopped: no veth removal owed, the endpoint map holds the
/// live pods only, and nothing but the maps is pinned.
async fn pins_match(node: &EbpfNode, live: &BTreeMap<Attachment, IpNet>) {
    let config = NodeConfig::load(node.config_path()).unwrap();
    let state = Registry::open(&node.site.state_dir(), config).unwrap();
    assert!(
        state.owed_removals().await.unwrap().is_empty(),
        "owed removals"
    );
    let endpoints = state.endpoints().await.unwrap();
    let object = sarena_daemon::ebpf_object::ebpf_object().unwrap();
    let pins = node.pins(object);
    let entries = pins.endpoint_entries().unwrap();
    let mapped: BTreeMap<IpAddr, u32> = entries
        .iter()
        .map(|(ip, info)| (IpAddr::V4(*ip), info.ifindex))
        .collect();
    let wanted: BTreeMap<IpAddr, u32> = endpoints
        .iter()
        .map(|e| (e.spec.addresses[0].addr(), e.spec.host_ifindex))
        .collect();
    assert_eq!(mapped, wanted, "endpoint map entries");
    assert_eq!(wanted.len(), live.len());
    for endpoint in &endpoints {
        assert!(pins.counters(endpoint.spec.host_ifindex).unwrap().is_some());
    }
    assert!(pins.pinned_links().unwrap().is_empty(), "tcx links pinned");
    let top: BTreeSet<String> = std::fs::read_dir(&node.pin_dir.0)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        top.iter().all(|n| n == "maps" || n == "links"),
        "pinned: {top:?}"
    );
    let links_dir = node.pin_dir.0.join("links");
    assert_eq!(std::fs::read_dir(links_dir).unwrap().count(), 0);
}
