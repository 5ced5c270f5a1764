//! Taking over the pins of an earlier generation (`sarena_common::layouts`)
//! against the real kernel: generation 1's counters carried over while the
//! filters are swapped under a ping stream, a run killed mid-way finished by
//! the next, pins the loader must not use refused before anything is
//! touched, and the counters left for a downgrade at a graceful stop. The real previous release is exercised by e2e/test-upgrade.sh;
//! here its programs are stood in for by this object loaded over other maps
//! (another pin directory), which reconcile must replace just the same.
//!
//! Privileged (root and the eBPF object): `#[ignore]`d unless included.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod ebpf;

use sarena_core::dataplane::EndpointReports as _;
use std::path::Path;
use std::time::Duration;

use aya::maps::{Array, Map, MapData, PerCpuHashMap, PerCpuValues};
use ebpf::pod;
use sarena_common::layouts::{GENERATION, HOST_FLOWS_MAP_G2, MARK_MAP, PINNED, PinsMark};
use sarena_common::v1::{COUNTERS_MAP_V1, EndpointCountersV1};
use sarena_common::{COUNTERS_MAP, HOST_FLOWS_MAP, MAX_ENDPOINTS};
use sarena_core::api::Endpoint;
use sarena_core::dataplane::Dataplane;
use sarena_core::dataplane::DataplaneError;
use sarena_core::dataplane::ebpf::pins::PINNED_BY_PATH;
use sarena_core::dataplane::ebpf::{AyaDataplane, BpfError, EndpointCounters};
use sarena_core::links::RtnetlinkLinks;
use sarena_test_support::{
    PinDir, Pod, background_ping, require_ebpf_object, require_root, tc_program_ids,
};

fn cpus() -> usize {
    aya::util::nr_cpus().unwrap()
}

fn maps_dir(pins: &PinDir) -> std::path::PathBuf {
    pins.0.join("maps")
}

/// Pins generation 1's counters map (80-byte values, preallocated) under
/// `pins` with `entries`: ifindex → the value on each CPU.
fn pin_v1_counters(pins: &PinDir, entries: &[(u32, Vec<EndpointCountersV1>)]) {
    std::fs::create_dir_all(maps_dir(pins)).unwrap();
    let mut map =
        PerCpuHashMap::<MapData, u32, EndpointCountersV1>::create(MAX_ENDPOINTS, 0).unwrap();
    for (ifindex, values) in entries {
        map.insert(ifindex, PerCpuValues::try_from(values.clone()).unwrap(), 0)
            .unwrap();
    }
    map.pin(maps_dir(pins).join(COUNTERS_MAP_V1)).unwrap();
}

/// Counters as generation 1's programs would have left them: distinct
/// values on each CPU.
fn v1_values(seed: u64) -> Vec<EndpointCountersV1> {
    (0..cpus() as u64)
        .map(|cpu| EndpointCountersV1 {
            from_pod_packets: seed + cpu,
            from_pod_bytes: 100 * (seed + cpu),
            to_pod_packets: 2 * seed + cpu,
            to_pod_bytes: 200 * seed,
            redirected_packets: seed,
            arp_replies: 1,
            drops: [cpu, 0, 2, 3],
        })
        .collect()
}

fn sum(values: &[EndpointCountersV1]) -> EndpointCounters {
    let mut total = EndpointCounters::default();
    for v in values {
        total.add(&EndpointCounters::from(*v));
    }
    total
}

fn mark(pins: &PinDir) -> Option<PinsMark> {
    let data = MapData::from_pin(maps_dir(pins).join(MARK_MAP)).ok()?;
    let map: Array<MapData, PinsMark> = Array::try_from(Map::Array(data)).unwrap();
    Some(map.get(&0, 0).unwrap())
}

fn pin_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// What most tests here start from: root, the object, and the pods a and b
/// with both their endpoints.
async fn two_pods(test: &str) -> (Vec<u8>, Pod, Pod, [Endpoint; 2]) {
    require_root(test);
    let object = require_ebpf_object(test);
    let links = RtnetlinkLinks::new().unwrap();
    let (a, b) = (pod(&links, 2).await, pod(&links, 3).await);
    let both = [a.endpoint.clone(), b.endpoint.clone()];
    (object, a, b, both)
}

#[tokio::test]
#[ignore = "privileged: needs root and the eBPF object; run as root with --include-ignored (scripts/test.sh)"]
async fn generation_1_counters_are_carried_over_while_the_programs_are_swapped() {
    let (object, a, b, both) =
        two_pods("generation_1_counters_are_carried_over_while_the_programs_are_swapped").await;

    // The node before the upgrade: programs that are not this dataplane's
    // (over other maps) forwarding a <-> b, generation 1's counters pinned.
    let old_pins = PinDir::new();
    let old = AyaDataplane::open(&object, &old_pins.0).unwrap();
    old.reconcile(&both).await.unwrap();
    assert!(a.ping(&b, 1));
    let old_ids = tc_program_ids(a.ifname());
    let pins = PinDir::new();
    let (va, vb) = (v1_values(1000), v1_values(7));
    pin_v1_counters(
        &pins,
        &[
            (a.endpoint.spec.host_ifindex, va.clone()),
            (b.endpoint.spec.host_ifindex, vb.clone()),
            (999_999, v1_values(1)),
        ],
    );

    let pinger = background_ping(&a, &b, 100, "0.02");
    std::thread::sleep(Duration::from_millis(500));
    let dp = AyaDataplane::open(&object, &pins.0).unwrap();
    // Opened: the new maps beside the old pin, nothing swapped yet.
    assert!(maps_dir(&pins).join(COUNTERS_MAP_V1).exists());
    assert_eq!(tc_program_ids(a.ifname()), old_ids);
    let report = dp.reconcile(&both).await.unwrap();
    assert_eq!(report.attached.len(), 2, "{report:?}");
    let (sent, received) = pinger.join().unwrap();
    assert!(
        sent >= 100 && received == sent,
        "{received}/{sent} pings answered across the swap"
    );

    // Each hook runs exactly one program, the new one.
    let new_ids = tc_program_ids(a.ifname());
    assert_eq!((new_ids.0.len(), new_ids.1.len()), (1, 1), "{new_ids:?}");
    assert_ne!(new_ids, old_ids);
    let status = dp.programs_status(&both).await.unwrap().unwrap();
    assert_eq!(
        (status.attached, status.detached.len()),
        (2, 0),
        "{status:?}"
    );
    // Carried over, converted, summed over CPUs (the pings added to them;
    // nothing was dropped since).
    let ca = dp.counters(a.endpoint.spec.host_ifindex).unwrap().unwrap();
    let want = sum(&va);
    assert!(ca.from_pod_packets >= want.from_pod_packets, "{ca:?}");
    assert_eq!(ca.arp_replies, want.arp_replies);
    assert_eq!(ca.drops, want.drops);
    assert!(ca.redirected_packets >= want.redirected_packets);
    let cb = dp.counters(b.endpoint.spec.host_ifindex).unwrap().unwrap();
    assert!(cb.to_pod_bytes >= sum(&vb).to_pod_bytes, "{cb:?}");
    assert_eq!(cb.drops, sum(&vb).drops);
    // The old pin is gone, the mark says this generation.
    let names = pin_names(&maps_dir(&pins));
    assert!(!names.contains(&COUNTERS_MAP_V1.to_string()), "{names:?}");
    assert!(names.contains(&COUNTERS_MAP.to_string()), "{names:?}");
    assert_eq!(mark(&pins), Some(PinsMark::CURRENT));
    assert!(a.ping(&b, 2));

    // Done means done: a restart changes nothing, counters keep counting.
    drop(dp);
    let dp = AyaDataplane::open(&object, &pins.0).unwrap();
    let report = dp.reconcile(&both).await.unwrap();
    assert!(
        report.attached.is_empty() && report.removed.is_empty(),
        "{report:?}"
    );
    assert_eq!(tc_program_ids(a.ifname()), new_ids);
    let again = dp.counters(a.endpoint.spec.host_ifindex).unwrap().unwrap();
    assert!(again.from_pod_packets >= ca.from_pod_packets);
    assert_eq!(again.drops, want.drops);
}

/// Generation 2's node-wide flows table (never released): left alone while
/// endpoints still run the programs that use it, removed once every one runs
/// this release's, each of which has a table of its own by then.
#[tokio::test]
#[ignore = "privileged: needs root and the eBPF object; run as root with --include-ignored (scripts/test.sh)"]
async fn generation_2_flows_map_is_retired_after_the_swap() {
    let (object, a, b, both) = two_pods("generation_2_flows_map_is_retired_after_the_swap").await;
    let pins = PinDir::new();
    std::fs::create_dir_all(maps_dir(&pins)).unwrap();
    let g2 = maps_dir(&pins).join(HOST_FLOWS_MAP_G2);
    let g2_layout = PINNED
        .iter()
        .find(|p| p.name == HOST_FLOWS_MAP_G2)
        .unwrap()
        .layout;
    let definition = aya_obj::Map::new_from_params(
        g2_layout.map_type,
        g2_layout.key_size,
        g2_layout.value_size,
        g2_layout.max_entries,
        g2_layout.flags,
    );
    MapData::create(definition, "sarena_g2", None)
        .unwrap()
        .pin(&g2)
        .unwrap();

    let dp = AyaDataplane::open(&object, &pins.0).unwrap();
    assert!(g2.exists(), "kept until the programs are swapped");
    dp.reconcile(&both).await.unwrap();
    let names = pin_names(&maps_dir(&pins));
    assert!(!names.contains(&HOST_FLOWS_MAP_G2.to_string()), "{names:?}");
    assert!(names.contains(&HOST_FLOWS_MAP.to_string()), "{names:?}");
    assert_eq!(mark(&pins), Some(PinsMark::CURRENT));
    for pod in [&a, &b] {
        let table = dp.host_flows(pod.endpoint.spec.host_ifindex).unwrap();
        assert_eq!(table.map(|t| t.len()), Some(0), "{}", pod.ifname());
    }
    assert!(a.ping(&b, 1));

    // A restart reuses the tables; detaching removes one.
    drop(dp);
    let dp = AyaDataplane::open(&object, &pins.0).unwrap();
    dp.reconcile(&both).await.unwrap();
    assert!(
        dp.host_flows(a.endpoint.spec.host_ifindex)
            .unwrap()
            .is_some()
    );
    dp.detach(&a.endpoint).await.unwrap();
    dp.wait_for_flow_table_removals();
    assert!(
        dp.host_flows(a.endpoint.spec.host_ifindex)
            .unwrap()
            .is_none()
    );
    assert!(
        dp.host_flows(b.endpoint.spec.host_ifindex)
            .unwrap()
            .is_some()
    );
}

#[tokio::test]
#[ignore = "privileged: needs root and the eBPF object; run as root with --include-ignored (scripts/test.sh)"]
async fn a_run_killed_mid_migration_is_finished_by_the_next() {
    let (object, a, b, both) = two_pods("a_run_killed_mid_migration_is_finished_by_the_next").await;
    let old_pins = PinDir::new();
    let old = AyaDataplane::open(&object, &old_pins.0).unwrap();
    old.reconcile(&both).await.unwrap();
    let pins = PinDir::new();
    let (va, vb) = (v1_values(50), v1_values(60));
    pin_v1_counters(
        &pins,
        &[
            (a.endpoint.spec.host_ifindex, va.clone()),
            (b.endpoint.spec.host_ifindex, vb.clone()),
        ],
    );

    // The killed run: it swapped a (an ADD-style attach, which carries
    // nothing), then a counted on in the new map, then the run died before
    // it swapped b or removed the old pin.
    {
        let dp = AyaDataplane::open(&object, &pins.0).unwrap();
        dp.attach(&a.endpoint).await.unwrap();
        let data = MapData::from_pin(maps_dir(&pins).join(COUNTERS_MAP)).unwrap();
        let mut live: PerCpuHashMap<MapData, u32, EndpointCounters> =
            PerCpuHashMap::try_from(Map::PerCpuHashMap(data)).unwrap();
        let counted = EndpointCounters {
            from_pod_packets: 5,
            ..Default::default()
        };
        live.insert(
            a.endpoint.spec.host_ifindex,
            PerCpuValues::try_from(vec![counted; cpus()]).unwrap(),
            0,
        )
        .unwrap();
    }
    assert!(maps_dir(&pins).join(COUNTERS_MAP_V1).exists());
    assert_eq!(mark(&pins), None);

    let dp = AyaDataplane::open(&object, &pins.0).unwrap();
    let report = dp.reconcile(&both).await.unwrap();
    // a was swapped already: its counters are the live ones, not the old map's.
    assert_eq!(
        report.attached,
        vec![b.endpoint.spec.host_ifname.clone()],
        "{report:?}"
    );
    let ca = dp.counters(a.endpoint.spec.host_ifindex).unwrap().unwrap();
    assert!(
        ca.from_pod_packets >= 5 * cpus() as u64 && ca.drops == [0; 16],
        "{ca:?}"
    );
    let cb = dp.counters(b.endpoint.spec.host_ifindex).unwrap().unwrap();
    assert_eq!(cb.drops, sum(&vb).drops, "{cb:?}");
    assert!(!maps_dir(&pins).join(COUNTERS_MAP_V1).exists());
    assert_eq!(mark(&pins), Some(PinsMark::CURRENT));
    assert!(a.ping(&b, 2));
}

fn open_error(object: &[u8], pins: &PinDir) -> BpfError {
    match AyaDataplane::open(object, &pins.0) {
        Err(DataplaneError::Ebpf(e)) => e,
        Err(other) => panic!("not an eBPF error: {other}"),
        Ok(_) => panic!("opened pins it must refuse"),
    }
}

#[tokio::test]
#[ignore = "privileged: needs root and the eBPF object; run as root with --include-ignored (scripts/test.sh)"]
async fn pins_of_an_unknown_layout_are_refused_before_anything_is_touched() {
    let test = "pins_of_an_unknown_layout_are_refused_before_anything_is_touched";
    require_root(test);
    let object = require_ebpf_object(test);

    // A development build's 224-byte counters under generation 1's name.
    let pins = PinDir::new();
    std::fs::create_dir_all(maps_dir(&pins)).unwrap();
    PerCpuHashMap::<MapData, u32, EndpointCounters>::create(MAX_ENDPOINTS, 1)
        .unwrap()
        .pin(maps_dir(&pins).join(COUNTERS_MAP_V1))
        .unwrap();
    let err = open_error(&object, &pins);
    assert!(
        matches!(err, BpfError::PinLayout { retired: true, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("224-byte values"), "{err}");
    assert_eq!(
        pin_names(&maps_dir(&pins)),
        vec![COUNTERS_MAP_V1.to_string()]
    );

    // A newer release's mark that excludes this generation.
    let pins = PinDir::new();
    std::fs::create_dir_all(maps_dir(&pins)).unwrap();
    let mut newer = Array::<MapData, PinsMark>::create(1, 0).unwrap();
    let too_new = PinsMark {
        generation: GENERATION + 1,
        oldest_reader: GENERATION + 1,
    };
    newer.set(0, too_new, 0).unwrap();
    newer.pin(maps_dir(&pins).join(MARK_MAP)).unwrap();
    let err = open_error(&object, &pins);
    assert!(matches!(err, BpfError::PinsTooNew { .. }), "{err}");
    assert_eq!(pin_names(&maps_dir(&pins)), vec![MARK_MAP.to_string()]);
    assert!(!pins.0.join("links").exists());
}

/// The rule of `sarena_common::layouts`, held against the object: every map
/// it pins has its name's entry in the table, and this generation's entries
/// are all in it. A new map needs its entry; a changed layout needs a new name.
#[test]
#[ignore = "privileged: needs the eBPF object; run with --include-ignored (scripts/test.sh)"]
fn the_object_pins_what_the_layout_table_says() {
    let object = require_ebpf_object("the_object_pins_what_the_layout_table_says");
    let parsed = aya_obj::Object::parse(&object).unwrap();
    let mut names = Vec::new();
    for (name, map) in &parsed.maps {
        if map.pinning() != aya_obj::maps::PinningType::ByName
            && !PINNED_BY_PATH.contains(&name.as_str())
        {
            continue;
        }
        let entry = PINNED.iter().find(|p| p.name == name).unwrap_or_else(|| {
            panic!("the object pins {name}, which sarena_common::layouts::PINNED does not list: add its layout")
        });
        assert!(
            entry.pinned_by(GENERATION),
            "{name}: closed in PINNED but still in the object"
        );
        let l = entry.layout;
        assert_eq!(
            (l.map_type, l.key_size, l.value_size, l.max_entries, l.flags),
            (
                map.map_type(),
                map.key_size(),
                map.value_size(),
                map.max_entries(),
                map.map_flags()
            ),
            "{name}: the object's layout is not its name's; a changed layout needs a new name"
        );
        names.push(name.as_str());
    }
    for entry in PINNED
        .iter()
        .filter(|p| p.pinned_by(GENERATION) && p.name != MARK_MAP)
    {
        assert!(
            names.contains(&entry.name),
            "{} is listed for generation {GENERATION} but not in the object",
            entry.name
        );
    }
}

fn v1_counters(pins: &PinDir) -> PerCpuHashMap<MapData, u32, EndpointCountersV1> {
    let data = MapData::from_pin(maps_dir(pins).join(COUNTERS_MAP_V1)).unwrap();
    PerCpuHashMap::try_from(Map::PerCpuHashMap(data)).unwrap()
}

#[tokio::test]
#[ignore = "privileged: needs root and the eBPF object; run as root with --include-ignored (scripts/test.sh)"]
async fn a_graceful_stop_leaves_the_counters_for_a_downgrade() {
    let (object, a, b, both) =
        two_pods("a_graceful_stop_leaves_the_counters_for_a_downgrade").await;
    let pins = PinDir::new();
    let dp = AyaDataplane::open(&object, &pins.0).unwrap();
    dp.reconcile(&both).await.unwrap();
    assert!(a.ping(&b, 3));

    // Every endpoint's counters, in generation 1's layout and map (the pods'
    // own frames, router solicitations, may count on meanwhile).
    let before = dp.counters(a.endpoint.spec.host_ifindex).unwrap().unwrap();
    assert_eq!(dp.hand_over().unwrap(), 2);
    let after = dp.counters(a.endpoint.spec.host_ifindex).unwrap().unwrap();
    assert!(before.from_pod_packets >= 3, "{before:?}");
    let left = v1_counters(&pins);
    let values = sum(&left.get(&a.endpoint.spec.host_ifindex, 0).unwrap());
    let fields = |c: &EndpointCounters| {
        [
            c.from_pod_packets,
            c.to_pod_packets,
            c.redirected_packets,
            c.arp_replies,
            c.to_pod_bytes,
        ]
    };
    for ((lo, v), hi) in fields(&before)
        .into_iter()
        .zip(fields(&values))
        .zip(fields(&after))
    {
        assert!(lo <= v && v <= hi, "{before:?} <= {values:?} <= {after:?}");
    }
    assert_eq!(
        values.ipv6_from_pod_packets + values.ndp_replies,
        0,
        "not in generation 1"
    );
    assert!(left.get(&b.endpoint.spec.host_ifindex, 0).is_ok());

    // Again after b is gone: b's entry goes, a's is rewritten.
    dp.detach(&b.endpoint).await.unwrap();
    assert_eq!(dp.hand_over().unwrap(), 1);
    let left = v1_counters(&pins);
    assert!(left.get(&b.endpoint.spec.host_ifindex, 0).is_err());
    // What a downgraded daemon would count on; the next start of this
    // release must not carry it back over the live counters.
    let bogus = EndpointCountersV1 {
        from_pod_packets: 1_000_000,
        ..Default::default()
    };
    let mut left = v1_counters(&pins);
    left.insert(
        a.endpoint.spec.host_ifindex,
        PerCpuValues::try_from(vec![bogus; cpus()]).unwrap(),
        0,
    )
    .unwrap();
    let before = dp.counters(a.endpoint.spec.host_ifindex).unwrap().unwrap();
    drop(dp);
    let dp = AyaDataplane::open(&object, &pins.0).unwrap();
    let report = dp
        .reconcile(std::slice::from_ref(&a.endpoint))
        .await
        .unwrap();
    assert!(report.attached.is_empty(), "{report:?}");
    let now = dp.counters(a.endpoint.spec.host_ifindex).unwrap().unwrap();
    assert!(
        now.from_pod_packets >= before.from_pod_packets && now.from_pod_packets < 1_000_000,
        "{now:?}"
    );
    assert!(!maps_dir(&pins).join(COUNTERS_MAP_V1).exists());

    // A pin of that name in another layout is refused, and left alone.
    PerCpuHashMap::<MapData, u32, EndpointCounters>::create(MAX_ENDPOINTS, 1)
        .unwrap()
        .pin(maps_dir(&pins).join(COUNTERS_MAP_V1))
        .unwrap();
    let err = dp.hand_over().unwrap_err();
    assert!(
        matches!(err, DataplaneError::Ebpf(BpfError::PinLayout { .. })),
        "{err}"
    );
    assert!(maps_dir(&pins).join(COUNTERS_MAP_V1).exists());
}
