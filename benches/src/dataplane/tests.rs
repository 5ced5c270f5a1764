//! Unit tests of the pure parts: medians, ratios, round order, the Markdown.
//! (The median itself is tested in `crate::stats`.)

use super::cpu::CpuUsage;
use super::ebpf_check::EbpfCheck;
use super::iperf::{IperfReport, IperfRun};
use super::results::{
    DataplaneResults, PathKind, PathResult, PathSample, PathSummary, fill_ratios, round_order,
};
use super::rr::RrRun;
use super::{DataplaneOptions, cpu};

fn usage(busy_seconds: f64, busy_percent: f64) -> Option<CpuUsage> {
    Some(CpuUsage {
        busy_seconds,
        busy_percent,
        steal_percent: 0.5,
    })
}

fn sample(round: u32, gbits: f64, rr: f64) -> PathSample {
    let seconds = 5.0;
    let bytes = (gbits * 1e9 * seconds / 8.0) as u64;
    PathSample {
        round,
        position: 0,
        iperf: IperfRun {
            report: IperfReport {
                bits_per_second: gbits * 1e9,
                bytes,
                seconds,
                retransmits: Some(1),
                client_cpu_percent: Some(100.0),
                server_cpu_percent: Some(60.0),
            },
            // 2 CPUs fully busy for 5 s.
            cpu: usage(10.0, 100.0),
            attempts: 1,
        },
        rr: RrRun {
            transactions: (rr * 3.0) as u64,
            seconds: 3.0,
            per_second: rr,
            cpu: usage(3.0, 50.0),
            process_cpu_seconds: Some(1.5),
        },
        programs: None,
    }
}

fn path(kind: PathKind, samples: Vec<PathSample>) -> PathResult {
    PathResult {
        path: kind,
        mtu: Some(1500),
        summary: PathSummary::of(&samples),
        samples,
    }
}

#[test]
fn every_round_measures_every_path_once_starting_elsewhere() {
    for round in 1..=6 {
        let mut order = round_order(4, round);
        assert_eq!(order[0], (round as usize - 1) % 4);
        order.sort_unstable();
        assert_eq!(order, vec![0, 1, 2, 3]);
    }
    assert!(round_order(0, 1).is_empty());
}

#[test]
fn summary_takes_medians_and_ratios_are_to_the_raw_veth_pair() {
    let mut paths = vec![
        path(
            PathKind::RawVeth,
            vec![
                sample(1, 20.0, 40_000.0),
                sample(2, 22.0, 44_000.0),
                sample(3, 18.0, 42_000.0),
            ],
        ),
        path(
            PathKind::SarenaEbpf,
            vec![
                sample(1, 19.0, 40_000.0),
                sample(2, 17.0, 30_000.0),
                sample(3, 21.0, 50_000.0),
            ],
        ),
    ];
    fill_ratios(&mut paths);
    let raw = &paths[0].summary;
    assert_eq!(raw.gbits_median, Some(20.0));
    assert_eq!(raw.gbits_range, Some((18.0, 22.0)));
    assert_eq!(raw.rr_median, Some(42_000.0));
    assert_eq!(raw.retransmits, 3);
    assert_eq!(raw.gbits_ratio_to_raw, Some(1.0));
    // 10 CPU-seconds for 20 Gbit/s × 5 s = 100 Gbit.
    let cpu = raw.cpu_seconds_per_gbit_median.unwrap();
    assert!((cpu - 0.1).abs() < 1e-6, "{cpu}");
    // 3 CPU-seconds for 126,000 round trips.
    let us = raw.cpu_us_per_rr_median.unwrap();
    assert!((us - 3e6 / 126_000.0).abs() < 1e-6, "{us}");
    let ebpf = &paths[1].summary;
    assert!((ebpf.gbits_ratio_to_raw.unwrap() - 19.0 / 20.0).abs() < 1e-9);
    assert!((ebpf.rr_ratio_to_raw.unwrap() - 40_000.0 / 42_000.0).abs() < 1e-9);
    // Same CPU-seconds for fewer bits: costlier per Gbit.
    assert!(ebpf.cpu_per_gbit_ratio_to_raw.unwrap() > 1.0);
}

#[test]
fn ipv6_rows_are_compared_with_the_raw_veth_pair_over_ipv6() {
    let mut paths = vec![
        path(PathKind::RawVeth, vec![sample(1, 20.0, 40_000.0)]),
        path(PathKind::SarenaEbpf, vec![sample(1, 19.0, 38_000.0)]),
        path(PathKind::RawVeth6, vec![sample(1, 16.0, 36_000.0)]),
        path(PathKind::SarenaEbpf6, vec![sample(1, 15.2, 34_200.0)]),
    ];
    fill_ratios(&mut paths);
    let ratio = |i: usize| paths[i].summary.gbits_ratio_to_raw.unwrap();
    assert!((ratio(1) - 0.95).abs() < 1e-9);
    assert!((ratio(3) - 15.2 / 16.0).abs() < 1e-9, "to the IPv6 pair");
    assert_eq!(paths[2].summary.rr_ratio_to_raw, Some(1.0));
    assert!(PathKind::SarenaEbpf6.ipv6() && !PathKind::SarenaEbpf.ipv6());
    assert!(PathKind::ALL.contains(&PathKind::SarenaEbpf6));
    let md = DataplaneResults { paths, ..results() }.markdown();
    let row = md
        .lines()
        .find(|l| l.starts_with("| Sarena eBPF mode, IPv6 |"))
        .unwrap_or_else(|| panic!("{md}"));
    assert!(row.contains("0.95 ✓"), "{row}");
    // An IPv6 path alone has no ratio.
    let mut alone = vec![path(PathKind::SarenaEbpf6, vec![sample(1, 10.0, 1.0)])];
    fill_ratios(&mut alone);
    assert_eq!(alone[0].summary.gbits_ratio_to_raw, None);
}

#[test]
fn without_a_raw_veth_path_there_are_no_ratios() {
    let mut paths = vec![path(PathKind::SarenaKernel, vec![sample(1, 10.0, 1.0)])];
    fill_ratios(&mut paths);
    assert_eq!(paths[0].summary.gbits_ratio_to_raw, None);
}

pub(super) fn results() -> DataplaneResults {
    let mut paths = vec![
        path(PathKind::RawVeth, vec![sample(1, 20.0, 40_000.0)]),
        path(PathKind::SarenaEbpf, vec![sample(1, 19.9, 39_900.0)]),
        path(PathKind::SarenaKernel, vec![sample(1, 15.0, 30_000.0)]),
    ];
    fill_ratios(&mut paths);
    let ebpf_check = EbpfCheck::new(
        &Default::default(),
        &sarena_common::EndpointCounters {
            redirected_packets: 1000,
            to_pod_bytes: 13_000_000_000,
            ..Default::default()
        },
        12_437_500_000,
        false,
    );
    DataplaneResults {
        rounds: 1,
        iperf_seconds: 5,
        rr_seconds: 3,
        cpus: 2,
        pinning: Some(super::Pinning {
            client: 1,
            server: 1,
        }),
        settle: Some(super::Settle {
            waited_seconds: 3.2,
            busy_percent: Some(12.0),
        }),
        load_average: (Some(0.5), Some(1.25)),
        paths,
        ebpf_check: Some(ebpf_check),
        ebpf6_check: None,
        check_errors: Vec::new(),
        skipped: vec![(PathKind::PtpHostLocal, "ptp exploded".into())],
        services: None,
        embedded: Vec::new(),
        event_cost: None,
    }
}

#[test]
fn markdown_has_a_row_per_path_targets_and_the_check() {
    let md = results().markdown();
    assert!(md.starts_with("## Dataplane"), "{md}");
    let row = |label: &str| {
        md.lines()
            .find(|l| l.starts_with(&format!("| {label} |")))
            .unwrap_or_else(|| panic!("no row {label} in {md}"))
            .to_owned()
    };
    assert!(row("raw veth pair").contains("| 20.00 | 1.00 |"), "{md}");
    // CPU table: 1.6 CPUs × 5 s for 100 Gbit; 1.5 s for 120,000 round trips.
    assert!(
        md.contains("| raw veth pair | 0.080 | 1.00 | 0.100 | 100 | 12.5 | 1.00 | 25.0 | 50 |"),
        "{md}"
    );
    assert!(
        md.contains("client and server both pinned to CPU 1"),
        "{md}"
    );
    assert!(
        md.contains("waited 3 s for a quiet machine (then 12 %"),
        "{md}"
    );
    // eBPF ≥ 0.95× raw: target met; kernel at 0.75×: missed.
    assert!(row("Sarena eBPF mode").contains("1.00 ✓"), "{md}");
    assert!(row("Sarena kernel mode").contains("0.75 ✗"), "{md}");
    assert!(md.contains("carried the traffic"), "{md}");
    assert!(
        md.contains("**ptp + host-local not measured**: ptp exploded"),
        "{md}"
    );
    assert!(
        md.contains("load average 0.50 before and 1.25 after"),
        "{md}"
    );
}

#[test]
fn results_round_trip_through_json_and_report_problems() {
    let r = results();
    let json = serde_json::to_string(&r).unwrap();
    let back: DataplaneResults = serde_json::from_str(&json).unwrap();
    // (serde_json may move a float by one ulp: compare what is exact.)
    assert_eq!(back.paths.len(), 3);
    assert_eq!(back.paths[1].path, PathKind::SarenaEbpf);
    assert_eq!(back.paths[1].samples, r.paths[1].samples);
    assert_eq!(back.ebpf_check, r.ebpf_check);
    assert_eq!(back.skipped, r.skipped);
    let ratio = back.paths[1].summary.gbits_ratio_to_raw.unwrap();
    assert!((ratio - 0.995).abs() < 1e-9, "{ratio}");
    assert!(json.contains("\"sarena-ebpf\""), "{json}");
    let problems = r.problems();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].contains("ptp exploded"));
}

#[test]
fn bandwidth_section_compares_unlimited_pods_beside_a_limited_one() {
    let mut r = results();
    assert!(!r.markdown().contains("### Bandwidth limits"));
    assert_eq!(r.beside_limited_ratio(|s| s.gbits_median), None);
    r.paths.push(path(
        PathKind::SarenaEbpfBesideLimited,
        vec![sample(1, 17.91, 40_698.0)],
    ));
    fill_ratios(&mut r.paths);
    let md = r.markdown();
    assert!(
        md.contains("### Bandwidth limits: the cost on an unlimited pod"),
        "{md}"
    );
    // 17.91 / 19.9 = 0.9: below the target; 40,698 / 39,900 = 1.02: met.
    assert!(
        md.contains("| TCP Gbit/s | 19.90 | 17.91 | 0.900 ✗ |"),
        "{md}"
    );
    assert!(
        md.contains("| request/response per s | 39900 | 40698 | 1.020 ✓ |"),
        "{md}"
    );
    let ratio = r.beside_limited_ratio(|s| s.rr_median).unwrap();
    assert!((ratio - 1.02).abs() < 1e-9, "{ratio}");
    assert!(
        serde_json::to_string(&r)
            .unwrap()
            .contains("\"sarena-ebpf-beside-limited\""),
    );
    assert!(PathKind::SarenaEbpfBesideLimited.has_limited_neighbour());
    assert!(!PathKind::SarenaEbpf.has_limited_neighbour());
    assert_eq!(
        PathKind::SarenaEbpfBesideLimited.contender(),
        Some(crate::node::Contender::SarenaEbpf)
    );
}

#[test]
fn the_limited_neighbours_config_limits_both_directions() {
    let v: serde_json::Value = serde_json::from_str(super::results::LIMITED_NEIGHBOUR).unwrap();
    assert_eq!(v["ingressRate"], 10_000_000);
    assert_eq!(v["egressRate"], 10_000_000);
}

#[test]
fn options_are_validated() {
    assert!(DataplaneOptions::full().validate().is_ok());
    assert!(DataplaneOptions::quick().validate().is_ok());
    let mut o = DataplaneOptions::quick();
    o.rounds = 0;
    assert!(o.validate().is_err());
    let mut o = DataplaneOptions::quick();
    o.first_node_index = 98;
    assert!(o.validate().is_err());
    let mut o = DataplaneOptions::quick();
    o.paths.clear();
    assert!(o.validate().is_err());
}

#[test]
fn cpu_usage_of_real_work_is_measured() {
    let (value, usage) = cpu::measure(|| {
        let start = std::time::Instant::now();
        let mut x = 0u64;
        while start.elapsed() < std::time::Duration::from_millis(300) {
            x = x.wrapping_add(1);
        }
        Ok(x)
    })
    .unwrap();
    assert!(value > 0);
    let usage = usage.unwrap();
    // One busy thread for 0.3 s: at least some ticks of busy time.
    assert!(usage.busy_seconds > 0.05, "{usage:?}");
    assert!(
        usage.busy_percent > 0.0 && usage.busy_percent <= 100.0,
        "{usage:?}"
    );
}

/// The whole measurement on this machine, quick settings (root, release
/// binaries of sarena-cni and sarena-daemon, iperf3, the reference plugins):
/// `cargo test -p sarena-benches --lib -- --ignored --nocapture quick_dataplane_run`
#[test]
#[ignore = "needs root, release binaries and iperf3; the sarena-bench binary runs it"]
fn quick_dataplane_run() {
    let results = super::run(&DataplaneOptions::quick()).unwrap();
    println!("{}", results.markdown());
    assert_eq!(results.problems(), Vec::<String>::new());
    for p in &results.paths {
        assert_eq!(p.samples.len(), 1, "{:?}", p.path);
        assert!(p.summary.gbits_median.unwrap() > 0.1, "{:?}", p.summary);
        assert!(p.summary.rr_median.unwrap() > 100.0, "{:?}", p.summary);
    }
}

/// The measurement with settings from the environment, for comparing CPU
/// placements by hand: `SARENA_DP_PIN=none|CLIENT,SERVER`,
/// `SARENA_DP_ROUNDS=N`, `SARENA_DP_SECS=N` (both runs' length),
/// `SARENA_DP_PATHS=raw-veth,sarena-ebpf,...` (e.g. one path under `perf record -a`);
/// `cargo test -p sarena-benches --lib -- --ignored --nocapture dataplane_run_from_env`
#[test]
#[ignore = "needs root, release binaries and iperf3; a manual experiment"]
fn dataplane_run_from_env() {
    let mut o = DataplaneOptions::quick();
    let env = |k: &str| std::env::var(k).ok();
    if let Some(pin) = env("SARENA_DP_PIN") {
        o.pinning = pin.split_once(',').map(|(c, s)| super::Pinning {
            client: c.parse().unwrap(),
            server: s.parse().unwrap(),
        });
    }
    if let Some(r) = env("SARENA_DP_ROUNDS") {
        o.rounds = r.parse().unwrap();
    }
    if let Some(paths) = env("SARENA_DP_PATHS") {
        o.paths = paths
            .split(',')
            .map(|p| serde_json::from_value(serde_json::Value::String(p.into())).unwrap())
            .collect();
    }
    if let Some(s) = env("SARENA_DP_SECS") {
        o.iperf_seconds = s.parse().unwrap();
        o.rr_seconds = o.iperf_seconds;
    }
    let results = super::run(&o).unwrap();
    println!("{}", results.markdown());
    assert_eq!(results.problems(), Vec::<String>::new());
}
