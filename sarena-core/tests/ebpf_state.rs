//! The eBPF dataplane's state against the real kernel: what attach and
//! detach leave in the pinned maps and on the veths, pins that outlive the
//! loader, and reconcile repairing drift (also from an earlier version's
//! tcx links). Pods in throwaway netns, maps pinned under a unique directory.
//!
//! Privileged (root and the eBPF object): `#[ignore]`d unless included, see
//! `sarena_test_support::require_root`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod ebpf;

use std::net::Ipv4Addr;
use std::time::Duration;

use ebpf::pod;
use sarena_core::dataplane::Dataplane;
use sarena_core::dataplane::ebpf::{AyaDataplane, EndpointInfo, EndpointKey};
use sarena_core::links::RtnetlinkLinks;
use sarena_test_support::{
    PinDir, background_ping, require_ebpf_object, require_root, tc_programs,
};

#[tokio::test]
#[ignore = "privileged: needs root and the eBPF object; run as root with --include-ignored (scripts/test.sh)"]
async fn detach_removes_entries_counters_and_links() {
    require_root("detach_removes_entries_counters_and_links");
    let object = require_ebpf_object("detach_removes_entries_counters_and_links");
    let pins = PinDir::new();
    let links = RtnetlinkLinks::new().unwrap();
    let (a, b) = (pod(&links, 2).await, pod(&links, 3).await);
    let dp = AyaDataplane::open(&object, &pins.0).unwrap();
    dp.attach(&a.endpoint).await.unwrap();
    dp.attach(&b.endpoint).await.unwrap();
    assert!(a.ping(&b, 1));
    assert_eq!(dp.endpoint_entries().unwrap().len(), 2);

    dp.detach(&b.endpoint).await.unwrap();
    let entries = dp.endpoint_entries().unwrap();
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_eq!(entries[0].0, a.ip());
    assert!(dp.counters(b.endpoint.spec.host_ifindex).unwrap().is_none());
    assert!(dp.pinned_links().unwrap().is_empty(), "tcx links pinned");
    assert_eq!(tc_programs(b.ifname()), (0, 0));
    assert_eq!(tc_programs(a.ifname()), (1, 1));
    assert!(!a.ping(&b, 1), "b still reachable after detach");
    // Detach is idempotent.
    dp.detach(&b.endpoint).await.unwrap();

    dp.detach(&a.endpoint).await.unwrap();
    assert!(dp.endpoint_entries().unwrap().is_empty());
    assert!(dp.pinned_links().unwrap().is_empty());
    assert_eq!(tc_programs(a.ifname()), (0, 0));
}

#[tokio::test]
#[ignore = "privileged: needs root and the eBPF object; run as root with --include-ignored (scripts/test.sh)"]
async fn detach_takes_the_flows_tables_out_later_but_never_from_an_endpoint_attached_again() {
    let test = "detach_takes_the_flows_tables_out_later_but_never_from_an_endpoint_attached_again";
    require_root(test);
    let object = require_ebpf_object(test);
    let pins = PinDir::new();
    let links = RtnetlinkLinks::new().unwrap();
    let mut pods = Vec::new();
    for host in 2..6 {
        pods.push(pod(&links, host).await);
    }
    let dp = AyaDataplane::open(&object, &pins.0).unwrap();
    let tables = |pod: &sarena_test_support::Pod| {
        let ifindex = pod.endpoint.spec.host_ifindex;
        let host = dp.host_flows(ifindex).unwrap().is_some();
        let policy = dp.policy_maps(|m| m.answerable_flows(ifindex)).unwrap();
        (host, policy.is_some())
    };
    for pod in &pods {
        dp.attach(&pod.endpoint).await.unwrap();
    }
    let (a, others) = pods.split_first().unwrap();
    assert_eq!(tables(a), (true, true), "attach gives both tables");

    // The others detached first keep the worker busy (a grace period or
    // two each), so a's removal is still queued when a is attached again:
    // the attach claims the tables back, and the removal must not run.
    for round in 0..3 {
        for pod in others.iter().chain([a]) {
            dp.detach(&pod.endpoint).await.unwrap();
        }
        dp.attach(&a.endpoint).await.unwrap();
        dp.wait_for_flow_table_removals();
        assert_eq!(tables(a), (true, true), "round {round}");
        for pod in others {
            assert_eq!(tables(pod), (false, false), "round {round}");
            dp.attach(&pod.endpoint).await.unwrap();
        }
    }
    assert!(a.ping(&others[0], 1));

    // Detached for good: its tables go, the others' stay.
    dp.detach(&a.endpoint).await.unwrap();
    dp.wait_for_flow_table_removals();
    assert_eq!(tables(a), (false, false));
    assert_eq!(tables(&others[0]), (true, true));
}

#[tokio::test]
#[ignore = "privileged: needs root and the eBPF object; run as root with --include-ignored (scripts/test.sh)"]
async fn pins_survive_the_loader_and_reconcile_repairs_drift() {
    require_root("pins_survive_the_loader_and_reconcile_repairs_drift");
    let object = require_ebpf_object("pins_survive_the_loader_and_reconcile_repairs_drift");
    let pins = PinDir::new();
    let links = RtnetlinkLinks::new().unwrap();
    let (a, b) = (pod(&links, 2).await, pod(&links, 3).await);
    let both = [a.endpoint.clone(), b.endpoint.clone()];
    let dp = AyaDataplane::open(&object, &pins.0).unwrap();
    dp.attach(&a.endpoint).await.unwrap();
    dp.attach(&b.endpoint).await.unwrap();
    assert!(a.ping(&b, 1));

    // "Restart": the loader goes away and comes back while pods keep pinging.
    let pinger = background_ping(&a, &b, 60, "0.05");
    std::thread::sleep(Duration::from_millis(500));
    drop(dp);
    std::thread::sleep(Duration::from_millis(500));
    let dp = AyaDataplane::open(&object, &pins.0).unwrap();
    let report = dp.reconcile(&both).await.unwrap();
    assert!(
        report.attached.is_empty() && report.removed.is_empty(),
        "{report:?}"
    );
    let (sent, received) = pinger.join().unwrap();
    assert!(
        sent >= 60 && received + 1 >= sent,
        "{received}/{sent} pings answered"
    );
    assert_eq!(tc_programs(a.ifname()), (1, 1), "duplicate attachment");
    assert_eq!(tc_programs(b.ifname()), (1, 1), "duplicate attachment");
    // The counters kept counting across the restart (same pinned map).
    let ca = dp.counters(a.endpoint.spec.host_ifindex).unwrap().unwrap();
    assert!(ca.redirected_packets >= 60, "{ca:?}");

    // Drift 1: the registry lost b (stale pins, entries and counters).
    let report = dp
        .reconcile(std::slice::from_ref(&a.endpoint))
        .await
        .unwrap();
    assert_eq!(
        report.removed,
        vec![b.ip().to_string(), b.endpoint.spec.host_ifname.clone()],
        "{report:?}"
    );
    assert_eq!(tc_programs(b.ifname()), (0, 0));
    assert!(dp.counters(b.endpoint.spec.host_ifindex).unwrap().is_none());
    assert!(!a.ping(&b, 1));

    // Drift 2: an entry for an address nobody owns, and b back in the
    // registry but missing from the dataplane.
    let stale: Ipv4Addr = "10.251.0.99".parse().unwrap();
    {
        let data = aya::maps::MapData::from_pin(pins.0.join("maps/SARENA_ENDPOINTS")).unwrap();
        let mut map: aya::maps::HashMap<_, EndpointKey, EndpointInfo> =
            aya::maps::HashMap::try_from(aya::maps::Map::HashMap(data)).unwrap();
        map.insert(EndpointKey::new(stale.octets()), EndpointInfo::default(), 0)
            .unwrap();
    }
    let report = dp.reconcile(&both).await.unwrap();
    assert_eq!(
        report.attached,
        vec![b.endpoint.spec.host_ifname.clone()],
        "{report:?}"
    );
    assert_eq!(report.removed, vec![stale.to_string()], "{report:?}");
    let addrs: Vec<Ipv4Addr> = dp
        .endpoint_entries()
        .unwrap()
        .into_iter()
        .map(|(a, _)| a)
        .collect();
    assert_eq!(addrs, vec![a.ip(), b.ip()]);
    assert_eq!(tc_programs(a.ifname()), (1, 1));
    assert_eq!(tc_programs(b.ifname()), (1, 1));
    assert!(a.ping(&b, 2));

    // A reconcile with nothing to do changes nothing.
    let report = dp.reconcile(&both).await.unwrap();
    assert!(
        report.attached.is_empty() && report.removed.is_empty(),
        "{report:?}"
    );
}

/// An upgrade from a version that attached with pinned tcx links: reconcile
/// puts the tc filters in place, then detaches and unpins the old links, and
/// the pods keep talking.
#[tokio::test]
#[ignore = "privileged: needs root and the eBPF object; run as root with --include-ignored (scripts/test.sh)"]
async fn reconcile_replaces_the_tcx_links_of_an_earlier_version() {
    use aya::programs::links::{FdLink, LinkOrder};
    use aya::programs::tc::{SchedClassifier, TcAttachOptions};
    use sarena_core::dataplane::ebpf::{Direction, PinnedAttachment, pins};

    let test = "reconcile_replaces_the_tcx_links_of_an_earlier_version";
    require_root(test);
    let object = require_ebpf_object(test);
    let pins_dir = PinDir::new();
    let links = RtnetlinkLinks::new().unwrap();
    let (a, b) = (pod(&links, 2).await, pod(&links, 3).await);
    let both = [a.endpoint.clone(), b.endpoint.clone()];

    // What the earlier version left: the maps pinned, entries written, and
    // each program attached by tcx with its link pinned under links/.
    let dp = AyaDataplane::open(&object, &pins_dir.0).unwrap();
    dp.reconcile(&[]).await.unwrap();
    let mut old = aya::EbpfLoader::new()
        .default_map_pin_directory(pins::maps_dir(&pins_dir.0))
        .load(&object)
        .unwrap();
    std::fs::create_dir_all(pins::links_dir(&pins_dir.0)).unwrap();
    for pod in [&a, &b] {
        for direction in Direction::ALL {
            let prog: &mut SchedClassifier = old
                .program_mut(direction.program())
                .unwrap()
                .try_into()
                .unwrap();
            if prog.fd().is_err() {
                prog.load().unwrap();
            }
            let attach_type = match direction {
                Direction::Ingress => aya::programs::TcAttachType::Ingress,
                Direction::Egress => aya::programs::TcAttachType::Egress,
            };
            let id = prog
                .attach_with_options(
                    pod.ifname(),
                    attach_type,
                    TcAttachOptions::TcxOrder(LinkOrder::default()),
                )
                .unwrap();
            let link = FdLink::try_from(prog.take_link(id).unwrap()).unwrap();
            let pin = PinnedAttachment {
                ifindex: pod.endpoint.spec.host_ifindex,
                ifname: pod.ifname().to_owned(),
                direction,
            };
            link.pin(pins::links_dir(&pins_dir.0).join(pin.file_name()))
                .unwrap();
        }
    }
    drop(old);
    assert_eq!(dp.pinned_links().unwrap().len(), 4);

    let report = dp.reconcile(&both).await.unwrap();
    assert_eq!(report.attached.len(), 2, "{report:?}");
    assert!(dp.pinned_links().unwrap().is_empty(), "tcx links left");
    for pod in [&a, &b] {
        assert_eq!(tc_programs(pod.ifname()), (1, 1), "{}", pod.ifname());
        let tcx = |t| {
            SchedClassifier::query_tcx(pod.ifname(), t)
                .map(|(_, progs)| progs.len())
                .unwrap_or(0)
        };
        assert_eq!(
            (
                tcx(aya::programs::TcAttachType::Ingress),
                tcx(aya::programs::TcAttachType::Egress)
            ),
            (0, 0),
            "tcx programs left on {}",
            pod.ifname()
        );
    }
    assert!(a.ping(&b, 2));
}
