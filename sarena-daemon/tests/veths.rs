//! The real binaries on the eBPF dataplane, about the pods' links: a
//! repeated ADD keeps the address and MAC while replacing the link; DEL then
//! ADD at once works; a veth removal the daemon owes when it is killed is done
//! at its next start, with every marked link no endpoint owns; and links that
//! are not Sarena's survive start-up, GC and DEL.
//!
//! Privileged: needs root and the eBPF object embedded in the daemon. The
//! tests share the node-global gateway device and the daemon's start-up sweep
//! removes every marked link no endpoint of *its* registry owns, so they run
//! one at a time.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::IpAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use sarena_core::api::{
    AllocateRequest, Attachment, Daemon, EndpointCreate, EndpointSpec, Inspect as _, PodRef,
};
use sarena_core::links::{Links, RtnetlinkLinks, VethSpec, host_ifname};
use sarena_core::node::{NodeConfig, Registry, VethLedger};
use sarena_test_support::daemon::EbpfNode;
use sarena_test_support::{HostLinkGuard, TestNetns, require, require_root, run, succeeds, unique};

const POOL: &str = "10.247.0.0/16";
const GATEWAY: &str = "10.247.0.1";

static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn preconditions(test: &str) {
    require_root(test);
    require(
        test,
        sarena_daemon::ebpf_object::ebpf_object().is_some(),
        "the daemon was built without the eBPF object (run scripts/setup-ebpf.sh)",
    );
}

fn attachment(netns: &TestNetns) -> Attachment {
    Attachment {
        container_id: netns.name.clone(),
        ifname: "eth0".into(),
    }
}

/// The ifindex of host link `name`, if it exists.
fn ifindex(name: &str) -> Option<u32> {
    std::fs::read_to_string(format!("/sys/class/net/{name}/ifindex"))
        .ok()
        .and_then(|s| s.trim().parse().ok())
}

/// One ping from the pod to the gateway (through the new link and the
/// host stack's route to the pod).
fn reaches_gateway(netns: &TestNetns) -> bool {
    succeeds(&[
        "ip",
        "netns",
        "exec",
        &netns.name,
        "ping",
        "-n",
        "-q",
        "-c",
        "1",
        "-W",
        "2",
        GATEWAY,
    ])
}

fn address_and_mac(result: &serde_json::Value) -> (String, String) {
    let address = result["ips"][0]["address"].as_str().unwrap().to_string();
    let mac = result["interfaces"][1]["mac"].as_str().unwrap().to_string();
    (address, mac)
}

#[tokio::test]
#[ignore = "privileged: needs root and the eBPF object; run as root with --include-ignored (scripts/test.sh)"]
async fn a_repeated_add_keeps_the_address_and_mac_and_check_passes() {
    preconditions("a_repeated_add_keeps_the_address_and_mac_and_check_passes");
    let _serial = SERIAL.lock().await;
    let node = EbpfNode::start(POOL, GATEWAY, "").await;
    let netns = TestNetns::new();
    let att = attachment(&netns);
    let host = host_ifname(&att.container_id, &att.ifname);

    let first = node.cni.add(&att, &netns.path()).expect_ok("ADD").json();
    let first_index = ifindex(&host).unwrap();
    // The runtime retries ADD (no DEL between).
    let second = node
        .cni
        .add(&att, &netns.path())
        .expect_ok("repeated ADD")
        .json();
    assert_eq!(address_and_mac(&second), address_and_mac(&first));
    let second_index = ifindex(&host).unwrap();
    assert_ne!(second_index, first_index, "the link was replaced");
    node.cni
        .check(&att, &netns.path(), &second)
        .expect_ok("CHECK after the repeated ADD");
    node.cni
        .check(&att, &netns.path(), &first)
        .expect_ok("CHECK with the first result");

    let client = node.client();
    let endpoints = client.endpoints().await.unwrap();
    assert_eq!(endpoints.len(), 1, "{endpoints:?}");
    assert_eq!(endpoints[0].spec.host_ifindex, second_index);
    let state = client.ipam_state().await.unwrap();
    assert_eq!(state.allocations.len(), 1, "{state:?}");
    assert_eq!(state.allocations[0].lease_expires_at, None);
    assert!(
        reaches_gateway(&netns),
        "the new link does not carry traffic"
    );

    node.cni.del(&att, Some(&netns.path())).expect_ok("DEL");
    assert!(client.ipam_state().await.unwrap().allocations.is_empty());
}

#[tokio::test]
#[ignore = "privileged: needs root and the eBPF object; run as root with --include-ignored (scripts/test.sh)"]
async fn del_then_add_at_once_works() {
    preconditions("del_then_add_at_once_works");
    let _serial = SERIAL.lock().await;
    let node = EbpfNode::start(POOL, GATEWAY, "").await;
    let netns = TestNetns::new();
    let att = attachment(&netns);
    let host = host_ifname(&att.container_id, &att.ifname);
    for round in 0..5 {
        node.cni.add(&att, &netns.path()).expect_ok("ADD");
        node.cni.del(&att, Some(&netns.path())).expect_ok("DEL");
        // At once, while the daemon may still be removing the old veth.
        let result = node
            .cni
            .add(&att, &netns.path())
            .expect_ok("ADD right after DEL")
            .json();
        node.cni
            .check(&att, &netns.path(), &result)
            .expect_ok("CHECK");
        // Whatever the daemon's removal did meanwhile, the new link stays.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let endpoints = node.client().endpoints().await.unwrap();
        assert_eq!(endpoints.len(), 1, "round {round}: {endpoints:?}");
        assert_eq!(
            Some(endpoints[0].spec.host_ifindex),
            ifindex(&host),
            "round {round}"
        );
        assert!(reaches_gateway(&netns), "round {round}");
        node.cni.del(&att, Some(&netns.path())).expect_ok("DEL");
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while ifindex(&host).is_some() {
        assert!(Instant::now() < deadline, "{host} never went");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A marked veth pair into `netns`, as ADD's step 6 makes it.
async fn marked_veth(links: &RtnetlinkLinks, netns: &TestNetns, container: &str) -> (String, u32) {
    let spec = VethSpec {
        host_ifname: host_ifname(container, "eth0"),
        netns: netns.path(),
        pod_ifname: "eth0".into(),
        mtu: 1500,
        pod_mac: None,
        host_ipv6: false,
    };
    let pair = links.create_veth(&spec).await.unwrap();
    (pair.host_ifname, pair.host_ifindex)
}

/// A pair made by someone else, `lxc…` and all.
fn foreign_veth(name: &str) -> HostLinkGuard {
    let peer = unique("frgn");
    run(&[
        "ip", "link", "add", name, "type", "veth", "peer", "name", &peer,
    ]);
    HostLinkGuard(name.to_string())
}

/// Leaves in the daemon's state what a daemon SIGKILLed right after
/// answering a DEL leaves: the endpoint gone, its veth's removal owed.
async fn owe_a_removal(state_dir: &Path, config: &Path, host: (&str, u32)) {
    let node = Registry::open(state_dir, NodeConfig::load(config).unwrap()).unwrap();
    let owner = Attachment {
        container_id: unique("owed"),
        ifname: "eth0".into(),
    };
    let alloc = node
        .allocate(AllocateRequest {
            owner: owner.clone(),
            pod: PodRef::default(),
            requested: vec![],
            pool: None,
        })
        .await
        .unwrap();
    node.create_endpoint(EndpointCreate {
        spec: EndpointSpec {
            owner: owner.clone(),
            pod: PodRef::default(),
            host_ifname: host.0.to_string(),
            host_ifindex: host.1,
            host_mac: "02:00:00:00:00:01".parse().unwrap(),
            pod_mac: "02:00:00:00:00:02".parse().unwrap(),
            addresses: alloc.addresses.iter().map(|a| a.address).collect(),
            netns: "/var/run/netns/gone".into(),
            bandwidth: None,
            identity: Default::default(),
        },
    })
    .await
    .unwrap();
    let (deleted, endpoint) = node.delete_owing_removal(owner).await.unwrap();
    assert!(deleted && endpoint.is_some());
    assert_eq!(node.owed_removals().await.unwrap().len(), 1);
}

#[tokio::test]
#[ignore = "privileged: needs root and the eBPF object; run as root with --include-ignored (scripts/test.sh)"]
async fn owed_removals_and_unowned_links_go_at_start_up_and_foreign_links_stay() {
    preconditions("owed_removals_and_unowned_links_go_at_start_up_and_foreign_links_stay");
    let _serial = SERIAL.lock().await;
    let mut node = EbpfNode::start(POOL, GATEWAY, "").await;
    let live_ns = TestNetns::new();
    let live = attachment(&live_ns);
    let live_result = node.cni.add(&live, &live_ns.path()).expect_ok("ADD").json();
    node.kill();

    let links = RtnetlinkLinks::new().unwrap();
    let (owed_ns, orphan_ns) = (TestNetns::new(), TestNetns::new());
    let (owed_name, owed_index) = marked_veth(&links, &owed_ns, &unique("owed")).await;
    let (orphan, _) = marked_veth(&links, &orphan_ns, &unique("orphan")).await;
    owe_a_removal(
        &node.site.state_dir(),
        node.config_path(),
        (&owed_name, owed_index),
    )
    .await;
    // Another plugin's links: one named like Sarena's, one under the name
    // Sarena would give an attachment it never had.
    let foreign = unique("lxc");
    let _foreign = foreign_veth(&foreign);
    let twin = host_ifname(&unique("never"), "eth0");
    let _twin = foreign_veth(&twin);

    node.ensure_running().await;
    for (name, what) in [(&owed_name, "owed"), (&orphan, "unowned")] {
        assert_eq!(
            ifindex(name),
            None,
            "the {what} link {name} survived start-up"
        );
    }
    // Each by its own step: the owed one from the record, the orphan by the sweep.
    let log = node.log();
    assert!(
        log.contains("owed_removals_done=1") && log.contains("unowned_links_removed=1"),
        "{log}"
    );
    for name in [&foreign, &twin] {
        assert!(ifindex(name).is_some(), "{name} is not Sarena's but went");
    }
    node.cni
        .check(&live, &live_ns.path(), &live_result)
        .expect_ok("the live pod after start-up");

    // GC with nothing valid: Sarena's live link goes, the foreign ones stay.
    node.cni.gc(&[]).expect_ok("GC");
    let host = host_ifname(&live.container_id, &live.ifname);
    assert_eq!(ifindex(&host), None, "GC left Sarena's own link");
    for name in [&foreign, &twin] {
        assert!(ifindex(name).is_some(), "GC removed {name}");
    }
    // DEL of an attachment whose host name another plugin's link has:
    // success, and the link stays.
    let twin_owner = Attachment {
        container_id: "twin".into(),
        ifname: "eth0".into(),
    };
    let twin_of_del = host_ifname(&twin_owner.container_id, &twin_owner.ifname);
    let _twin_of_del = foreign_veth(&twin_of_del);
    node.cni.del(&twin_owner, None).expect_ok("DEL");
    assert!(ifindex(&twin_of_del).is_some(), "DEL removed {twin_of_del}");

    node.kill();
    let state = Registry::open(
        &node.site.state_dir(),
        NodeConfig::load(node.config_path()).unwrap(),
    )
    .unwrap();
    assert!(state.owed_removals().await.unwrap().is_empty());
    let allocated: Vec<IpAddr> = state
        .ipam_state()
        .await
        .unwrap()
        .allocations
        .iter()
        .map(|a| a.address)
        .collect();
    assert!(allocated.is_empty(), "{allocated:?}");
}
