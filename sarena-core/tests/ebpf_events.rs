//! Drop and flow events from the eBPF programs, against the real kernel:
//! pods in throwaway netns, the events' configuration written with
//! [`AyaDataplane::set_events_config`] and the ring buffer drained with
//! [`AyaDataplane::take_event_reader`], as the daemon does. Each drop is
//! provoked for real (a policy denial, a spoofed source, a pacer's
//! overflow) and its event read back with the right fields; flow events
//! name the path a connection took; one pod's flood costs only its own
//! events; with events off, nothing is written but drops are counted; and
//! what a full policy map leaves out is denied, with its events, until
//! there is room again.
//!
//! Privileged (root and the eBPF object): `#[ignore]`d unless included.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod ebpf;

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use ebpf::TestDataplane;
use ebpf::policy::*;
use ebpf::raw::send_raw_frames;
use ebpf::shop::{db_policy, engine, k8s_pod};
use sarena_core::api::{EventKind, EventRecord, EventsSettings, FlowMode, event_record};
use sarena_core::dataplane::ebpf::BpfError;
use sarena_core::dataplane::ebpf::{AyaDataplane, Event, EventReader, events_config};
use sarena_core::links::RtnetlinkLinks;
use sarena_core::policy::{Direction, EntryKey, RuleId};
use sarena_test_support::Pod;

fn settings(drops: bool, flows: FlowMode, rate: u32, burst: u32) -> EventsSettings {
    EventsSettings {
        drops,
        flows,
        sample: 1,
        rate_per_second: rate,
        burst,
        watched: Vec::new(),
    }
}

/// Every event that comes within `wait` of the last one (the first within
/// `wait` too), as the API shows it.
async fn drain(reader: &mut EventReader, wait: Duration) -> Vec<EventRecord> {
    let mut raw: Vec<Event> = Vec::new();
    while reader.read_for(&mut raw, 4096, wait).await.unwrap() {}
    raw.iter().map(|e| event_record(e, e.time_ns)).collect()
}

fn ifindex(pod: &Pod) -> u32 {
    pod.endpoint.spec.host_ifindex
}

fn addr(pod: &Pod) -> IpAddr {
    v4(pod)
}

/// An IPv4/UDP frame from `src` to `dst`, broadcast at the Ethernet layer.
fn udp_frame(src: IpAddr, dst: IpAddr) -> Vec<u8> {
    let (IpAddr::V4(src), IpAddr::V4(dst)) = (src, dst) else {
        panic!("IPv4 only");
    };
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&[0x02, 0, 0, 0, 0, 1, 0x08, 0x00]);
    f.extend_from_slice(&[0x45, 0, 0, 28, 0, 0, 0x40, 0, 64, 17, 0, 0]);
    f.extend_from_slice(&src.octets());
    f.extend_from_slice(&dst.octets());
    f.extend_from_slice(&[0x0f, 0xa0, 0, 9, 0, 8, 0, 0]);
    f
}

fn open(test: &str) -> (TestDataplane, EventReader) {
    let t = TestDataplane::open(test);
    let reader = t.dp.take_event_reader().unwrap().unwrap();
    assert!(
        t.dp.take_event_reader().unwrap().is_none(),
        "one reader only"
    );
    (t, reader)
}

fn configure(dp: &AyaDataplane, s: &EventsSettings) {
    dp.set_events_config(events_config(s, !s.watched.is_empty()))
        .unwrap();
}

#[tokio::test]
#[ignore = "privileged: needs root and the eBPF object; run as root with --include-ignored (scripts/test.sh)"]
async fn a_policy_denial_and_a_spoofed_source_are_events_with_their_fields() {
    let (t, mut reader) = open("a_policy_denial_and_a_spoofed_source_are_events_with_their_fields");
    let links = RtnetlinkLinks::new().unwrap();
    let (a, b) = (pod(&links, 2).await, pod(&links, 3).await);
    t.attach(&[&a, &b]).await;
    configure(&t.dp, &settings(true, FlowMode::Off, 100, 200));
    identify(&t.dp, &a, ID_A);
    identify(&t.dp, &b, ID_B);
    allow_tcp(&t.dp, &b, Direction::Ingress, ID_A, 8080);
    isolate(&t.dp, &b, true, false);

    assert!(connects(&a, &b, addr(&b), 8080), "8080 is allowed");
    assert!(!connects(&a, &b, addr(&b), 8081), "8081 is not");
    let events = drain(&mut reader, Duration::from_millis(300)).await;
    let denied: Vec<&EventRecord> = events
        .iter()
        .filter(|e| e.reason.as_deref() == Some("policy_denied_ingress"))
        .collect();
    assert!(!denied.is_empty(), "no policy drop event: {events:?}");
    let e = denied[0];
    assert_eq!(e.kind, EventKind::Drop);
    assert_eq!(e.direction.as_str(), "ingress", "{e:?}");
    assert_eq!(e.ifindex, ifindex(&b), "the receiver's endpoint: {e:?}");
    assert_eq!(
        (e.packet.src, e.packet.dst),
        (Some(addr(&a)), Some(addr(&b)))
    );
    assert_eq!(e.packet.protocol.as_deref(), Some("TCP"));
    assert_eq!(e.packet.dst_port, Some(8081));
    assert_eq!(e.packet.tcp_flags.as_deref(), Some("SYN"));
    assert!(
        events.iter().all(|e| e.packet.dst_port != Some(8080)),
        "the allowed connection dropped nothing: {events:?}"
    );

    // a spoofed source from a: a's egress
    let spoofed: IpAddr = "10.251.0.250".parse().unwrap();
    send_raw_frames(&a, vec![udp_frame(spoofed, addr(&b))]);
    let events = drain(&mut reader, Duration::from_millis(300)).await;
    let e = events
        .iter()
        .find(|e| e.reason.as_deref() == Some("spoofed_source"))
        .unwrap_or_else(|| panic!("no spoofed-source event: {events:?}"));
    assert_eq!((e.direction.as_str(), e.ifindex), ("egress", ifindex(&a)));
    assert_eq!(e.packet.src, Some(spoofed));
    assert_eq!(
        (e.packet.protocol.as_deref(), e.packet.dst_port),
        (Some("UDP"), Some(9))
    );
    assert_eq!(e.packet_len, 42);

    let stats = t.dp.event_stats().unwrap();
    assert!(stats.drop_events >= 2, "{stats:?}");
    assert!(
        stats.drops[0][14] >= 1 && stats.drops[1][4] >= 1,
        "{stats:?}"
    );
}

#[tokio::test]
#[ignore = "privileged: needs root and the eBPF object; run as root with --include-ignored (scripts/test.sh)"]
async fn one_pods_flood_costs_only_its_own_events_and_off_writes_none() {
    let (t, mut reader) = open("one_pods_flood_costs_only_its_own_events_and_off_writes_none");
    let links = RtnetlinkLinks::new().unwrap();
    let (a, b) = (pod(&links, 2).await, pod(&links, 3).await);
    t.attach(&[&a, &b]).await;
    // 10 events a second, bursts of 5
    configure(&t.dp, &settings(true, FlowMode::Off, 10, 5));
    let spoofed: IpAddr = "10.251.0.250".parse().unwrap();
    send_raw_frames(&a, vec![udp_frame(spoofed, addr(&b)); 1000]);
    // right after a's flood, b's one spoofed frame is still an event
    send_raw_frames(&b, vec![udp_frame(spoofed, addr(&a))]);
    let events = drain(&mut reader, Duration::from_millis(300)).await;
    let of = |p: &Pod| events.iter().filter(|e| e.ifindex == ifindex(p)).count();
    assert!((5..=7).contains(&of(&a)), "a's events: {}", of(&a));
    assert_eq!(of(&b), 1, "b's event got through a's flood: {events:?}");
    let stats = t.dp.event_stats().unwrap();
    assert!(stats.lost_rate_limited >= 990, "{stats:?}");
    assert_eq!(stats.drops[1][4], 1001, "every drop counted: {stats:?}");

    // off: drops still counted, no event
    configure(&t.dp, &settings(false, FlowMode::Off, 10, 5));
    tokio::time::sleep(Duration::from_secs(1)).await;
    send_raw_frames(&b, vec![udp_frame(spoofed, addr(&a))]);
    assert!(
        drain(&mut reader, Duration::from_millis(300))
            .await
            .is_empty()
    );
    assert_eq!(t.dp.event_stats().unwrap().drops[1][4], 1002);
}

#[tokio::test]
#[ignore = "privileged: needs root and the eBPF object; run as root with --include-ignored (scripts/test.sh)"]
async fn flow_events_name_the_path_node_wide_or_for_a_watched_pod() {
    let (t, mut reader) = open("flow_events_name_the_path_node_wide_or_for_a_watched_pod");
    let links = RtnetlinkLinks::new().unwrap();
    let (a, b, c) = (
        pod(&links, 2).await,
        pod(&links, 3).await,
        pod(&links, 4).await,
    );
    t.attach(&[&a, &b, &c]).await;

    // node-wide, new connections: a's SYN to b, redirected into b
    configure(&t.dp, &settings(true, FlowMode::New, 0, 1));
    assert!(connects(&a, &b, addr(&b), 8080));
    let events = drain(&mut reader, Duration::from_millis(300)).await;
    let flows: Vec<&EventRecord> = events
        .iter()
        .filter(|e| e.kind == EventKind::Flow)
        .collect();
    assert_eq!(flows.len(), 1, "one new connection, one event: {flows:?}");
    let f = flows[0];
    assert_eq!(
        (f.path.as_deref(), f.direction.as_str()),
        (Some("local_pod"), "egress")
    );
    assert_eq!((f.ifindex, f.packet.dst_port), (ifindex(&a), Some(8080)));
    assert_eq!(f.packet.tcp_flags.as_deref(), Some("SYN"));
    assert!(a.ping(&b, 1));
    let events = drain(&mut reader, Duration::from_millis(300)).await;
    assert!(
        events
            .iter()
            .any(|e| e.packet.icmp_type == Some(8) && e.ifindex == ifindex(&a)),
        "the echo request opens a flow: {events:?}"
    );

    // off node-wide, c watched: only c's connections
    let mut s = settings(true, FlowMode::Off, 0, 1);
    s.watched.push(sarena_core::api::WatchedPod {
        pod: "c".into(),
        flows: FlowMode::New,
    });
    t.dp.set_flow_watch(ifindex(&c), Some(FlowMode::New))
        .unwrap();
    configure(&t.dp, &s);
    assert!(connects(&a, &b, addr(&b), 8081));
    assert!(connects(&c, &b, addr(&b), 8082));
    let events = drain(&mut reader, Duration::from_millis(300)).await;
    let flows: Vec<u32> = events
        .iter()
        .filter(|e| e.kind == EventKind::Flow)
        .map(|e| e.ifindex)
        .collect();
    assert_eq!(flows, [ifindex(&c)], "{events:?}");
    let stats = t.dp.event_stats().unwrap();
    assert!(stats.flows[1][0] >= 2, "local_pod flows counted: {stats:?}");

    // sampling every frame: the whole exchange, both ways
    t.dp.set_flow_watch(ifindex(&c), None).unwrap();
    configure(&t.dp, &settings(true, FlowMode::Sample, 0, 1));
    assert!(connects(&a, &b, addr(&b), 8083));
    let events = drain(&mut reader, Duration::from_millis(300)).await;
    assert!(
        events.iter().filter(|e| e.kind == EventKind::Flow).count() >= 4,
        "{events:?}"
    );
}

/// The host ifindex the filler entries claim: no link's (ifindexes of a
/// test machine stay far below it).
const NO_LINK: u32 = 0x7fff_0000;

/// Fills the policy map with entries of [`NO_LINK`] until the kernel
/// refuses one as full; returns how many it took.
fn fill_policy_map(dp: &AyaDataplane) -> Vec<EntryKey> {
    dp.policy_maps(|m| {
        let mut written = Vec::new();
        for peer in 1_000_000..1_000_300 {
            for port in 1..=1024 {
                let key = EntryKey {
                    direction: Direction::Ingress,
                    peer,
                    proto: 6,
                    port,
                    port_bits: 16,
                };
                match m.set_entry(NO_LINK, &key, RuleId(1)) {
                    Ok(()) => written.push(key),
                    Err(BpfError::MapFull { map, .. }) => {
                        assert_eq!(map, "SARENA_POLICY");
                        return written;
                    }
                    Err(e) => panic!("filling the policy map: {e}"),
                }
            }
        }
        panic!(
            "the policy map took {} entries and is not full",
            written.len()
        )
    })
}

#[tokio::test]
#[ignore = "privileged: needs root and the eBPF object; run as root with --include-ignored (scripts/test.sh)"]
async fn what_a_full_policy_map_leaves_out_is_denied_with_its_events_until_there_is_room() {
    let (t, mut reader) =
        open("what_a_full_policy_map_leaves_out_is_denied_with_its_events_until_there_is_room");
    let links = RtnetlinkLinks::new().unwrap();
    let (mut web, mut db) = (pod(&links, 2).await, pod(&links, 3).await);
    let pods = [
        k8s_pod(&mut web, "web", "web"),
        k8s_pod(&mut db, "db", "db"),
    ];
    t.attach(&[&web, &db]).await;
    configure(&t.dp, &settings(true, FlowMode::Off, 100, 200));
    let db_addr = addr(&db);

    let filler = fill_policy_map(&t.dp);
    assert!(filler.len() >= 100_000, "{} entries", filler.len());
    // The daemon's update: db isolated, web allowed on 8080; the allow
    // entry does not fit, the isolation does (what is missing is denied).
    let mut e = engine(&pods, &[db_policy()]);
    let applied = t.dp.apply_policy(Arc::new(e.compile()));
    assert!(applied.failed >= 1, "{applied:?}");
    assert_eq!(applied.full_maps, vec!["SARENA_POLICY"], "{applied:?}");
    assert!(
        !connects(&web, &db, db_addr, 8080),
        "allowed, but its entry is not in the full map"
    );
    let events = drain(&mut reader, Duration::from_millis(300)).await;
    let denied = events
        .iter()
        .find(|e| {
            e.reason.as_deref() == Some("policy_denied_ingress") && e.packet.dst_port == Some(8080)
        })
        .unwrap_or_else(|| panic!("no policy drop of web -> db:8080: {events:?}"));
    assert_eq!(denied.ifindex, ifindex(&db), "{denied:?}");
    assert_eq!(denied.packet.src, Some(addr(&web)), "{denied:?}");
    assert_eq!(denied.packet.tcp_flags.as_deref(), Some("SYN"));

    // Room again: the next update writes what was missing.
    t.dp.policy_maps(|m| {
        for key in filler.iter().take(1024) {
            m.remove_entry(NO_LINK, key).unwrap();
        }
    });
    let applied = t.dp.apply_policy(Arc::new(e.compile()));
    assert_eq!(
        (applied.failed, applied.full_maps.len()),
        (0, 0),
        "{applied:?}"
    );
    assert!(connects(&web, &db, db_addr, 8080), "allowed once written");
    assert!(t.dp.policy_failed_writes() >= 1);
    t.dp.policy_maps(|m| {
        for key in &filler[1024..] {
            m.remove_entry(NO_LINK, key).unwrap();
        }
    });
}
