//! NetworkPolicy's deferred egress decision, against the real kernel: a
//! pod isolated for egress connects to a Service address (in the ipcache
//! as translated), which the host stack DNATs to another pod. Its packets
//! are not judged by `from_container` (the Service address is not the
//! peer), but marked, and judged by `to_container` against the backend
//! after translation.
//!
//! Privileged (root and the eBPF object): `#[ignore]`d unless included.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod ebpf;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use ebpf::policy::*;
use ebpf::{NftTable, TestDataplane};
use sarena_core::dataplane::ebpf::DropReason;
use sarena_core::dataplane::{Dataplane, NodeNetwork};
use sarena_core::links::RtnetlinkLinks;
use sarena_core::policy::{Direction, EntryKey, IpcacheEntry};
use sarena_test_support::{
    HostLinkGuard, HostStack, SysctlGuard, run, succeeds, tc_programs, tcp_exchange_at,
};

/// `sarena_common::policy::IPCACHE_F_TRANSLATED`.
const IPCACHE_F_TRANSLATED: u32 = 1;

#[tokio::test]
#[ignore = "privileged: needs root and the eBPF object; run as root with --include-ignored (scripts/test.sh)"]
async fn egress_to_a_service_is_judged_after_translation() {
    let test = "egress_to_a_service_is_judged_after_translation";
    let t = TestDataplane::open(test);
    let _forwarding = SysctlGuard::save("net/ipv4/ip_forward");
    let host = HostStack::new();
    let links = RtnetlinkLinks::new().unwrap();
    let t = t.with_kernel_host(&host);
    t.dp.setup(&NodeNetwork {
        gateways: vec!["10.246.0.1".parse().unwrap()],
        pools: vec!["10.246.0.0/24".parse().unwrap()],
        masquerade: false,
        exempt: Vec::new(),
    })
    .await
    .unwrap();
    let (a, b) = (pod(&links, 0x22).await, pod(&links, 0x23).await);
    t.attach(&[&a, &b]).await;
    identify(&t.dp, &a, ID_A);
    identify(&t.dp, &b, ID_B);

    // A Service in kube-proxy's shape: DNAT in prerouting to b:80.
    let service = Ipv4Addr::new(10, 246, 200, 10);
    let _table = NftTable::load(
        "ip",
        &format!(
            "chain pre {{\n type nat hook prerouting priority dstnat; policy accept;\n \
             ip daddr {service} tcp dport 80 dnat to {b}\n}}\n",
            b = b.ip(),
        ),
    );
    t.dp.policy_maps(|m| {
        let entry = IpcacheEntry {
            identity: 400,
            flags: IPCACHE_F_TRANSLATED,
        };
        m.set_ipcache(format!("{service}/32").parse().unwrap(), entry)
    })
    .unwrap();
    let listen = SocketAddr::from((b.ip(), 80));
    let through = SocketAddr::from((service, 80));
    // Not isolated: the Service works.
    assert_eq!(tcp_exchange_at(&a, &b, listen, Some(through), 1000), 1000);

    // Isolated for egress, allowed to b on port 80 (not to the Service's
    // identity): judged after translation, allowed.
    allow_tcp(&t.dp, &a, Direction::Egress, ID_B, 80);
    isolate(&t.dp, &a, false, true);
    assert_eq!(tcp_exchange_at(&a, &b, listen, Some(through), 1000), 1000);
    assert_eq!(drops(&t, &a, DropReason::PolicyDeniedEgress), 0);

    // Without the entry, the same connection dies on a's egress, after
    // translation, counted on a.
    let key = EntryKey {
        direction: Direction::Egress,
        peer: ID_B,
        proto: 6,
        port: 80,
        port_bits: 16,
    };
    t.dp.policy_maps(|m| m.remove_entry(a.endpoint.spec.host_ifindex, &key))
        .unwrap();
    assert!(!connects_at(&a, &b, v4(&b), IpAddr::V4(service), 80));
    assert!(drops(&t, &a, DropReason::PolicyDeniedEgress) >= 1);
    assert_eq!(drops(&t, &b, DropReason::PolicyDeniedIngress), 0);

    // Direct to b (no translation), it is denied in from_container too.
    assert!(!connects(&a, &b, v4(&b), 80));
    isolate(&t.dp, &a, false, false);
    assert!(
        connects_at(&a, &b, v4(&b), IpAddr::V4(service), 80),
        "the denial was the programs'"
    );
}

#[tokio::test]
#[ignore = "privileged: needs root and the eBPF object; run as root with --include-ignored (scripts/test.sh)"]
async fn network_hooks_attach_once_and_detach_only_themselves() {
    let t = TestDataplane::open("network_hooks_attach_once_and_detach_only_themselves");
    let (name, _guard) = test_device();
    let egress = || run(&["tc", "filter", "show", "dev", &name, "egress"]);
    let ingress = || run(&["tc", "filter", "show", "dev", &name, "ingress"]);

    t.dp.attach_network_hook(&name).await.unwrap();
    t.dp.attach_network_hook(&name).await.unwrap();
    assert_eq!(tc_programs(&name), (1, 1), "{}{}", ingress(), egress());
    assert!(egress().contains("to_network"), "{}", egress());
    assert!(ingress().contains("from_network"), "{}", ingress());
    // A reconcile (a restart, a new session) keeps them: they belong to
    // the node's device, not to an endpoint it does not know.
    t.dp.reconcile(&[]).await.unwrap();
    assert_eq!(tc_programs(&name), (1, 1), "{}{}", ingress(), egress());
    t.dp.detach_network_hook(&name).await.unwrap();
    assert_eq!(tc_programs(&name), (0, 0), "{}{}", ingress(), egress());
    t.dp.detach_network_hook(&name).await.unwrap();
    // A missing device: nothing to detach, nothing to attach to.
    assert!(t.dp.detach_network_hook("srnosuchdev0").await.is_ok());
    assert!(t.dp.attach_network_hook("srnosuchdev0").await.is_err());
}

/// A veth pair of the test's own in the host netns (gone on drop): one
/// end's name and its guard.
fn test_device() -> (String, HostLinkGuard) {
    let name = sarena_test_support::unique("srup");
    let peer = sarena_test_support::unique("srpe");
    let guard = HostLinkGuard(name.clone());
    assert!(succeeds(&[
        "ip", "link", "add", &name, "type", "veth", "peer", "name", &peer
    ]));
    (name, guard)
}

/// The program ids of the tc filters on `dev` (ingress, egress).
fn filter_ids(dev: &str) -> (String, String) {
    let ids = |hook| {
        let listing = run(&["tc", "filter", "show", "dev", dev, hook]);
        listing
            .split(" id ")
            .skip(1)
            .filter_map(|rest| rest.split_whitespace().next())
            .collect::<Vec<_>>()
            .join(",")
    };
    (ids("ingress"), ids("egress"))
}

#[tokio::test]
#[ignore = "privileged: needs root and the eBPF object; run as root with --include-ignored (scripts/test.sh)"]
async fn another_loads_network_hooks_are_replaced_not_kept() {
    // Two loads of the same programs on their own pins: the same code
    // (tag), other maps. The second must not keep the first's filters,
    // which would go on reading the first's endpoints and peers.
    let first = TestDataplane::open("another_loads_network_hooks_first");
    let second = TestDataplane::open("another_loads_network_hooks_second");
    let (name, _guard) = test_device();
    first.dp.attach_network_hook(&name).await.unwrap();
    let of_first = filter_ids(&name);
    assert!(
        !of_first.0.is_empty() && !of_first.1.is_empty(),
        "{of_first:?}"
    );
    second.dp.attach_network_hook(&name).await.unwrap();
    let of_second = filter_ids(&name);
    assert_eq!(tc_programs(&name), (1, 1));
    assert_ne!(
        of_second.0, of_first.0,
        "from_network of the first load kept"
    );
    assert_ne!(of_second.1, of_first.1, "to_network of the first load kept");
    // Its own filters it keeps.
    second.dp.attach_network_hook(&name).await.unwrap();
    assert_eq!(filter_ids(&name), of_second);
    second.dp.detach_network_hook(&name).await.unwrap();
    assert_eq!(tc_programs(&name), (0, 0));
}
