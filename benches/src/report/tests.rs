use super::*;
use crate::cni_ops::phases::{OpPhases, PhaseRow, PhaseTable};
use crate::cni_ops::{Check, CniOptions, LatencyResults, OpLatency};
use crate::node::Contender;
use crate::policy::{
    self as pol, ChangeResults, ChangeRow, Memory, PolicyResults, RealCluster, ScaleResult, Sizes,
};
use crate::stats::Summary;

fn row(contender: Contender, op: &str, samples: &[f64]) -> OpLatency {
    OpLatency {
        contender,
        op: op.into(),
        summary: Summary::of(samples),
        errors: 0,
        first_error: None,
        p50_ratio_to_ptp: None,
        p99_ratio_to_ptp: None,
        plugin_peak_rss_kib: Some(6000),
        plugin_median_rss_kib: Some(5000),
        samples_ms: samples.to_vec(),
    }
}

fn phase_table() -> PhaseTable {
    let phase = |name: &str, start: f64, p50: f64| PhaseRow {
        name: name.into(),
        start_p50_ms: start,
        p50_ms: p50,
    };
    PhaseTable {
        runs: 5,
        hello_p50_ms: Some(0.5),
        version_p50_ms: Some(0.9),
        ops: vec![
            OpPhases {
                op: "STATUS".into(),
                total_p50_ms: 1.5,
                phases: vec![
                    phase("exec and loading", 0.0, 0.6),
                    phase("daemon GET /v1/daemon/status", 0.8, 0.3),
                ],
            },
            OpPhases {
                op: "ADD".into(),
                total_p50_ms: 4.0,
                phases: vec![
                    phase("exec and loading", 0.0, 0.7),
                    phase("netlink create_veth", 1.5, 1.25),
                ],
            },
        ],
    }
}

fn inputs() -> ReportInputs {
    let mut ebpf_add = row(Contender::SarenaEbpf, "ADD", &[2.0, 3.0, 4.0]);
    ebpf_add.p50_ratio_to_ptp = Some(0.2);
    let mut ebpf_del = row(Contender::SarenaEbpf, "DEL", &[9.0]);
    ebpf_del.p50_ratio_to_ptp = Some(0.5);
    let cni = CniResults {
        options: CniOptions {
            contenders: vec![Contender::SarenaEbpf, Contender::PtpHostLocal],
            ..CniOptions::quick()
        },
        latency: LatencyResults {
            pods: 3,
            rows: vec![
                ebpf_add,
                row(Contender::PtpHostLocal, "ADD", &[10.0, 15.0, 20.0]),
                ebpf_del,
            ],
            rss_pods: 1,
            rss_floor_kib: Some(1800),
        },
        churn: vec![],
        scale: vec![],
        phases: Some(phase_table()),
        checks: vec![Check {
            what: "pods have addresses".into(),
            ok: true,
        }],
    };
    ReportInputs {
        cni: Some(cni),
        dataplane: None,
        crossnode: None,
        policy: None,
        policy_cluster: None,
        node_scale: Vec::new(),
        kubelet_pods: None,
        criterion: vec![],
        machine: Machine {
            cpu: "Test CPU".into(),
            ..Machine::default()
        },
        command: "bash scripts/bench.sh".into(),
        quick: true,
    }
}

#[test]
fn page_has_the_sections_numbers_and_verdicts() {
    let md = render(&inputs());
    for needle in [
        "## Command",
        "bash scripts/bench.sh",
        "Test CPU",
        "## CNI operation latency",
        "| ADD | Sarena (eBPF) | 3 | 3.00 |",
        "| ADD p50, Sarena (eBPF) | ≤ 0.25× ptp + host-local | 0.20× (3.00 ms vs 15.00 ms) | ✓ met |",
        "| DEL p50, Sarena (eBPF) | ≤ 0.2× ptp + host-local | 0.50×",
        "✗ missed",
        "benchmarks-latency.svg",
        "Smoke run",
        "✓ pods have addresses",
        "## Dataplane",
        "## Where a plugin run spends its time",
        "a statically linked hello world 0.50 ms; `sarena-cni` VERSION 0.90 ms",
        "| phase | STATUS | ADD |",
        "| exec and loading | 0.600 | 0.700 |",
        "| daemon GET /v1/daemon/status | 0.300 | – |",
        "| netlink create_veth | – | 1.250 |",
        "| **total, spawn to reap** | **1.500** | **4.000** |",
        "| STATUS p50 vs exec of a static hello world, same harness | ≤ 2× | 3.00× (1.50 ms vs 0.50 ms) | ✗ missed |",
    ] {
        assert!(md.contains(needle), "missing {needle:?} in:\n{md}");
    }
}

#[test]
fn write_puts_page_and_plots() {
    let dir = tempfile::tempdir().unwrap();
    let files = write(dir.path(), &inputs()).unwrap();
    assert_eq!(files.len(), 3);
    let svg = std::fs::read_to_string(dir.path().join(LATENCY_SVG)).unwrap();
    // ADD: two bars, DEL: one (ptp has no DEL row here), CHECK/STATUS none;
    // each series also has one legend swatch.
    let bars: usize = plots::COLOURS[..2]
        .iter()
        .map(|&c| svg.matches(&format!("fill=\"{}\"", plots::hex(c))).count() - 1)
        .sum();
    assert_eq!(bars, 3);
}

fn policy_results(created_ms: &[f64], peak_kib: u64) -> PolicyResults {
    let opts = pol::PolicyOptions::full();
    let rows = pol::OPS
        .iter()
        .map(|op| {
            let samples = if *op == pol::OPS[0] {
                created_ms
            } else {
                &[1.0][..]
            };
            ChangeRow {
                op: op.to_string(),
                summary: Summary::of(samples),
                samples_ms: samples.to_vec(),
            }
        })
        .collect();
    PolicyResults {
        options: opts,
        scale: ScaleResult {
            spec: opts.scale,
            measured_in: "a child process of its own".into(),
            events: 13_205,
            feed_ms: 40.0,
            first_compile_ms: 250.0,
            second_compile_ms: 200.0,
            memory: Memory {
                rss_before_kib: 4096,
                rss_fed_kib: 20_000,
                rss_compiled_kib: 30_000,
                rss_recompiled_kib: 35_000,
                hwm_kib: 4096 + peak_kib,
                hwm_reset: true,
            },
            sizes: Sizes {
                ipcache_entries: 12_003,
                policy_entries: 300_000,
                endpoints: 100,
                ingress_isolated: 100,
                egress_isolated: 20,
                max_endpoint_entries: 5000,
                identities: 2200,
                rules: 1500,
            },
        },
        change: ChangeResults {
            spec: opts.change,
            rounds: 200,
            first_compile_ms: 30.0,
            rows,
        },
    }
}

#[test]
fn the_policy_section_gives_the_engines_share_of_the_targets() {
    let mut inputs = inputs();
    inputs.policy = Some(policy_results(&[10.0, 12.0, 14.0], 50 * 1024));
    let md = render(&inputs);
    for needle in [
        "## NetworkPolicy: engine scale and change latency",
        "| policy created → enforced, p50 (1,000 pods on 10 nodes (100 on this one), 20 namespaces, 200 policies) | ≤ 100 ms | 12.0 ms engine + 20 ms debounce = 32.0 ms | ✓ met (engine's share) |",
        "| daemon RSS (10,000 pods on 100 nodes (100 on this one), 200 namespaces, 1,000 policies) | ≤ 100 MiB | engine's peak 50.0 MiB | ✓ met (engine's share) |",
        "| `SARENA_IPCACHE` entries | ≤ 262,144 | 12,003 (4.6 % of 262,144) | ✓ met |",
        "| `SARENA_POLICY` entries | ≤ 262,144 | 300,000 (114.4 % of 262,144) | ✗ missed |",
        "### Scale: 10,000 pods",
        "| engine peak (VmHWM − VmRSS before) | 50.0 MiB |",
        "### Change latency: 1,000 pods",
        "| policy created | 3 | 12.00 |",
        "not the daemon's watch caches",
    ] {
        assert!(md.contains(needle), "missing {needle:?} in:\n{md}");
    }
    inputs.policy = Some(policy_results(&[90.0], 120 * 1024));
    let md = render(&inputs);
    assert!(
        md.contains("90.0 ms engine + 20 ms debounce = 110.0 ms | ✗ missed"),
        "{md}"
    );
    assert!(md.contains("engine's peak 120.0 MiB | ✗ missed"), "{md}");
}

#[test]
fn the_real_cluster_run_has_its_section_and_targets() {
    let mut i = inputs();
    assert!(!render(&i).contains("real cluster"));
    let mut run: RealCluster = serde_json::from_str(crate::policy::real_cluster::SAMPLE).unwrap();
    run.enforce.p99_ms = 654.1;
    i.policy_cluster = Some(run);
    let page = render(&i);
    assert!(
        page.contains("## NetworkPolicy on a real cluster"),
        "{page}"
    );
    assert!(
        page.contains("p50 40.8 ms, p90 44.8 ms, p99 654.1 ms"),
        "{page}"
    );
    assert!(page.contains("| 76.8 MiB / 74.3 MiB |"), "{page}");
    assert!(page.contains("| creating the background up to 10000 pods | 40.4 s |"));
    let line = |what: &str| {
        page.lines()
            .find(|l| l.starts_with(&format!("| {what}")))
            .unwrap_or_else(|| panic!("no row {what}: {page}"))
            .to_string()
    };
    assert!(line("policy created → enforced on every node, p50").ends_with("✓ met |"));
    assert!(line("policy created → enforced on every node, p99").ends_with("✗ missed |"));
    assert!(line("daemon RSS, peak of the nodes").contains("76.8 MiB"));
}

#[test]
fn the_scale_section_says_what_grows_with_the_endpoints() {
    use crate::cni_ops::ScaleResult;
    let phases = |total: f64, create: f64, commit: f64| OpPhases {
        op: "ADD".into(),
        total_p50_ms: total,
        phases: vec![
            PhaseRow {
                name: "daemon POST /v1/endpoints".into(),
                start_p50_ms: 2.0,
                p50_ms: create,
            },
            PhaseRow {
                name: "netlink create_veth".into(),
                start_p50_ms: 1.0,
                p50_ms: commit,
            },
        ],
    };
    let result = |contender, existing, p50: f64, add_phases| ScaleResult {
        contender,
        existing,
        add: Summary::of(&[p50]),
        errors: 0,
        daemon_rss_kib: Some(30_000),
        plugin_peak_rss_kib: None,
        plugin_median_rss_kib: None,
        p50_ratio_to_first_level: None,
        add_phases,
    };
    let mut i = inputs();
    let cni = i.cni.as_mut().unwrap();
    cni.options.scale_contenders = vec![Contender::SarenaEbpf, Contender::PtpHostLocal];
    cni.scale = vec![
        result(Contender::SarenaEbpf, 0, 5.0, Some(phases(5.0, 1.0, 0.5))),
        result(Contender::PtpHostLocal, 0, 8.0, None),
        result(
            Contender::SarenaEbpf,
            1000,
            7.0,
            Some(phases(7.0, 2.5, 0.6)),
        ),
        result(Contender::PtpHostLocal, 1000, 9.0, None),
    ];
    let md = render(&i);
    for needle in [
        "## Scale: ADD with existing endpoints",
        "Each contender has the machine to itself",
        "What grows, Sarena (eBPF)",
        "| phase | p50 ms at 0 | p50 ms at 1000 | growth ms |",
        "| whole ADD (spawn to reap) | 5.000 | 7.000 | +2.000 |",
    ] {
        assert!(md.contains(needle), "missing {needle:?} in:\n{md}");
    }
    let grows = md.find("| daemon POST /v1/endpoints | 1.000 | 2.500 | +1.500 |");
    let flat = md.find("| netlink create_veth | 0.500 | 0.600 | +0.100 |");
    assert!(
        matches!((grows, flat), (Some(g), Some(f)) if g < f),
        "the phase that grew most comes first:\n{md}"
    );
    assert!(!md.contains("What grows, ptp"), "{md}");
}

#[test]
fn the_churn_section_gives_the_median_round_its_spread_and_what_concurrency_adds() {
    use crate::cni_ops::{ChurnResult, ScaleResult};
    use crate::node::IpamUsage;
    let phases = |total: f64, create: f64, veth: f64| OpPhases {
        op: "ADD".into(),
        total_p50_ms: total,
        phases: vec![
            PhaseRow {
                name: "daemon POST /v1/endpoint/create".into(),
                start_p50_ms: 2.0,
                p50_ms: create,
            },
            PhaseRow {
                name: "netlink create_veth".into(),
                start_p50_ms: 1.0,
                p50_ms: veth,
            },
        ],
    };
    let churn = |contender, walls: &[f64], add_phases| ChurnResult {
        contender,
        concurrency: 100,
        add_wall_ms: crate::stats::median(walls).unwrap(),
        add_walls_ms: walls.to_vec(),
        del_wall_ms: 50.0,
        del_walls_ms: vec![50.0],
        add: Summary::of(walls),
        del: Summary::of(&[50.0]),
        add_errors: 0,
        del_errors: 0,
        first_error: None,
        duplicates: vec![],
        held_after_add: IpamUsage {
            endpoints: None,
            addresses: 100,
        },
        held_after_del: IpamUsage::default(),
        add_cpu_busy: Some(0.9),
        add_cpu_ms_per_op: Some(4.8),
        add_plugin_cpu_ms_per_op: Some(1.5),
        add_daemon_cpu_ms_per_op: Some(0.75),
        add_phases,
    };
    let mut i = inputs();
    let cni = i.cni.as_mut().unwrap();
    cni.options.churn_rounds = 3;
    cni.churn = vec![
        churn(
            Contender::SarenaEbpf,
            &[300.0, 150.0, 360.0],
            Some(phases(250.0, 100.0, 15.0)),
        ),
        churn(Contender::PtpHostLocal, &[600.0, 160.0, 550.0], None),
    ];
    cni.scale = vec![ScaleResult {
        contender: Contender::SarenaEbpf,
        existing: 0,
        add: Summary::of(&[5.0]),
        errors: 0,
        daemon_rss_kib: None,
        plugin_peak_rss_kib: None,
        plugin_median_rss_kib: None,
        p50_ratio_to_first_level: None,
        add_phases: Some(phases(5.0, 1.5, 0.5)),
    }];
    let md = render(&i);
    for needle in [
        "the median of 3 rounds",
        "| 100 | Sarena (eBPF) | 300 (150–360) | 300.0 / 360.0 | 90 % | 4.8 (1.5 / 0.8 / 2.5) | 0 |",
        "| 100 | ptp + host-local | 550 (160–600) |",
        "0.55× (300 ms vs 550 ms, medians of 3 rounds)",
        "What 100 concurrent ADDs wait for, Sarena (eBPF)",
        "| phase | p50 ms alone | p50 ms 100 at once | growth ms |",
        "| whole ADD (spawn to reap) | 5.000 | 250.000 | +245.000 |",
    ] {
        assert!(md.contains(needle), "missing {needle:?} in:\n{md}");
    }
    let waits = md.find("| daemon POST /v1/endpoint/create | 1.500 | 100.000 | +98.500 |");
    let less = md.find("| netlink create_veth | 0.500 | 15.000 | +14.500 |");
    assert!(
        matches!((waits, less), (Some(w), Some(l)) if w < l),
        "the phase that grew most comes first:\n{md}"
    );
    assert!(!md.contains("concurrent ADDs wait for, ptp"), "{md}");
}

#[test]
fn the_node_scale_run_has_its_section_and_targets() {
    let mut i = inputs();
    assert!(!render(&i).contains("cluster scale"));
    let run: crate::k8s_scale::NodeScale = serde_json::from_str(crate::k8s_scale::SAMPLE).unwrap();
    i.node_scale = vec![run];
    let page = render(&i);
    assert!(
        page.contains("## Kubernetes mode at cluster scale (issue 31)"),
        "{page}"
    );
    assert!(
        page.contains("| 1000 | 990 in 5.4 s | 43.6 s | 14.3 / 86.4 / 131.7 ms |"),
        "{page}"
    );
    assert!(
        page.contains("| 66.3 (66.3); 66.6 (66.6) MiB | –; – | –; – | 16.7 | 12.87 %; 12.47 % |"),
        "{page}"
    );
    let row = page
        .lines()
        .find(|l| l.starts_with("| daemon RSS at 1000 nodes, native"))
        .unwrap();
    assert!(
        row.contains("≤ 64 MiB") && row.contains("66.6 MiB") && row.contains("✗"),
        "{row}"
    );
}

#[test]
fn the_kubelet_pods_run_has_its_section_and_targets() {
    let mut i = inputs();
    assert!(!render(&i).contains("through a real kubelet"));
    let run: crate::k8s_pods::KubeletPods = serde_json::from_str(crate::k8s_pods::SAMPLE).unwrap();
    i.kubelet_pods = Some(run);
    let page = render(&i);
    assert!(
        page.contains("## Pods through a real kubelet (issue 29)"),
        "{page}"
    );
    assert!(
        page.contains(
            "| 1 | bridge + host-local | 100 | 4.00 / 6.00 / 6.50 s | 6.80 s | 5000 ms | – |"
        ),
        "{page}"
    );
    let row = page
        .lines()
        .find(|l| {
            l.starts_with("| 50 pods at once on one node through kubelet: kubelet's RunPodSandbox")
        })
        .unwrap();
    assert!(
        row.contains("≤ 1.0× bridge + host-local") && row.contains("1.30×") && row.contains("✗"),
        "{row}"
    );
}
