//! Unit tests of the Service paths' checks, their report part and the
//! programs' cost table.

use std::net::Ipv4Addr;
use std::path::PathBuf;

use sarena_common::EndpointCounters;

use super::ebpf_check::EbpfCheck;
use super::iperf::{IperfReport, IperfRun};
use super::paths::Endpoints;
use super::prog_stats::{ProgramRuns, RunDelta};
use super::results::{DataplaneResults, PathKind, PathResult, PathSample, PathSummary};
use super::rr::RrRun;
use super::service::{RR_PORT, RuleCounters};
use super::service_check::{ServiceCheck, ServiceResults, Snapshot};
use crate::report::{Machine, ReportInputs, render};

const IPERF_BYTES: u64 = 1_000_000_000;

fn sample(round: u32, gbits: f64, rr: f64, programs: Option<ProgramRuns>) -> PathSample {
    PathSample {
        round,
        position: 0,
        iperf: IperfRun {
            report: IperfReport {
                bits_per_second: gbits * 1e9,
                bytes: IPERF_BYTES,
                seconds: 1.0,
                retransmits: Some(0),
                client_cpu_percent: Some(90.0),
                server_cpu_percent: Some(50.0),
            },
            cpu: None,
            attempts: 1,
        },
        rr: RrRun {
            transactions: rr as u64,
            seconds: 1.0,
            per_second: rr,
            cpu: None,
            process_cpu_seconds: Some(0.9),
        },
        programs,
    }
}

fn runs(from_ns: u64, to_ns: u64, to_runs: u64) -> Option<ProgramRuns> {
    Some(ProgramRuns {
        from_container: RunDelta {
            run_time_ns: from_ns * 20_000,
            runs: 20_000,
        },
        to_container: RunDelta {
            run_time_ns: to_ns * to_runs,
            runs: to_runs,
        },
        transactions: 10_000,
    })
}

fn endpoints() -> Endpoints {
    Endpoints {
        client_ns: PathBuf::from("/run/netns/c"),
        server_ns: PathBuf::from("/run/netns/s"),
        server_ip: Ipv4Addr::new(10, 195, 0, 3).into(),
        cluster_ip: Some(Ipv4Addr::new(10, 100, 7, 9).into()),
        fixed_rr_port: None,
    }
}

fn snapshot(
    iperf_dnat: u64,
    rr_dnat: u64,
    forwarded: u64,
    ebpf: Option<EndpointCounters>,
) -> Snapshot {
    Snapshot {
        rules: RuleCounters {
            dnat_packets: vec![(super::iperf::PORT, iperf_dnat), (RR_PORT, rr_dnat)],
            forwarded_packets: forwarded / 1000,
            forwarded_bytes: forwarded,
        },
        ebpf,
    }
}

fn ebpf(host_stack: u64, redirected: u64, to_pod_bytes: u64) -> Option<EndpointCounters> {
    Some(EndpointCounters {
        host_stack_flow_packets: host_stack,
        redirected_packets: redirected,
        to_pod_bytes,
        ..EndpointCounters::default()
    })
}

/// Two rounds, one of them with the statistics run: ≥ 4 iperf3 and ≥ 3
/// request/response connections.
fn two_rounds() -> Vec<PathSample> {
    vec![
        sample(1, 10.0, 20_000.0, runs(300, 150, 20_000)),
        sample(2, 12.0, 24_000.0, None),
    ]
}

fn check(after: Snapshot) -> ServiceCheck {
    let before = snapshot(1, 1, 1000, ebpf(5, 0, 1000));
    ServiceCheck::new(
        PathKind::SarenaEbpfService,
        &endpoints(),
        &before,
        &after,
        &two_rounds(),
    )
}

#[test]
fn a_service_check_passes_when_every_counter_shows_the_service_path() {
    let c = check(snapshot(5, 4, 2_000_001_000, ebpf(905, 0, 2_100_001_000)));
    assert!(c.passed, "{c:?}");
    assert_eq!(c.ports[0].connections, 4);
    assert_eq!(c.ports[0].dnat_packets, 4);
    assert_eq!((c.ports[1].connections, c.ports[1].dnat_packets), (3, 3));
    assert_eq!(c.forwarded_bytes, 2_000_000_000);
    assert_eq!(c.iperf_bytes, 2 * IPERF_BYTES);
    assert_eq!(c.ebpf.as_ref().unwrap().host_stack_flow_packets, 900);
    assert_eq!(c.cluster_ip, Ipv4Addr::new(10, 100, 7, 9));
    let text = c.describe();
    assert!(text.contains("10.100.7.9 → 10.195.0.3"), "{text}");
    assert!(text.contains("went through the Service rules"), "{text}");
}

#[test]
fn a_service_check_fails_on_any_sign_of_another_path() {
    let cases = [
        // A connection missed the DNAT rule.
        snapshot(4, 4, 2_000_001_000, ebpf(905, 0, 2_100_001_000)),
        // The bytes were not forwarded as established connections.
        snapshot(5, 4, 1_000_000, ebpf(905, 0, 2_100_001_000)),
        // An answer was redirected pod → pod.
        snapshot(5, 4, 2_000_001_000, ebpf(905, 1, 2_100_001_000)),
        // The flows map never sent anything to the host stack.
        snapshot(5, 4, 2_000_001_000, ebpf(5, 0, 2_100_001_000)),
        // The programs did not deliver the payload.
        snapshot(5, 4, 2_000_001_000, ebpf(905, 0, 5_000)),
    ];
    for after in cases {
        let c = check(after);
        assert!(!c.passed, "{c:?}");
        assert!(c.describe().contains("NOT"), "{}", c.describe());
    }
    // Without eBPF counters (kernel mode, ptp) the rules decide.
    let before = snapshot(1, 1, 0, None);
    let after = snapshot(5, 4, 2_000_000_000, None);
    let c = ServiceCheck::new(
        PathKind::PtpHostLocalService,
        &endpoints(),
        &before,
        &after,
        &two_rounds(),
    );
    assert!(c.passed && c.ebpf.is_none(), "{c:?}");
}

fn path(kind: PathKind, samples: Vec<PathSample>) -> PathResult {
    PathResult {
        path: kind,
        mtu: Some(1500),
        summary: PathSummary::of(&samples),
        samples,
    }
}

fn results(checks: Vec<ServiceCheck>) -> DataplaneResults {
    let direct = vec![sample(1, 20.0, 40_000.0, runs(200, 0, 0))];
    DataplaneResults {
        rounds: 2,
        iperf_seconds: 1,
        rr_seconds: 1,
        cpus: 2,
        pinning: None,
        settle: None,
        load_average: (Some(1.0), Some(2.0)),
        paths: vec![
            path(PathKind::SarenaEbpf, direct),
            path(
                PathKind::SarenaKernel,
                vec![sample(1, 15.0, 30_000.0, None)],
            ),
            path(PathKind::SarenaEbpfService, two_rounds()),
            path(
                PathKind::SarenaKernelService,
                vec![sample(1, 9.0, 21_000.0, None)],
            ),
            path(
                PathKind::PtpHostLocalService,
                vec![sample(1, 10.0, 20_000.0, None)],
            ),
        ],
        ebpf_check: Some(EbpfCheck::new(
            &EndpointCounters::default(),
            &EndpointCounters {
                redirected_packets: 10,
                to_pod_bytes: IPERF_BYTES,
                ..EndpointCounters::default()
            },
            IPERF_BYTES,
            false,
        )),
        ebpf6_check: None,
        check_errors: Vec::new(),
        skipped: Vec::new(),
        services: Some(ServiceResults {
            checks,
            stats_sysctl: (Some(false), Some(false)),
        }),
        embedded: Vec::new(),
        event_cost: None,
    }
}

#[test]
fn the_report_compares_services_with_their_direct_path_and_ptp() {
    let good = check(snapshot(5, 4, 2_000_001_000, ebpf(905, 0, 2_100_001_000)));
    let (before, after) = (snapshot(0, 0, 0, None), snapshot(4, 3, 2_000_000_000, None));
    let mut checks = vec![good];
    for kind in [PathKind::SarenaKernelService, PathKind::PtpHostLocalService] {
        let c = ServiceCheck::new(kind, &endpoints(), &before, &after, &two_rounds());
        assert!(c.passed, "{c:?}");
        checks.push(c);
    }
    let dp = results(checks);
    let md = dp.markdown();
    let services = &md[md.find("### Services").expect("a Services subsection")..];
    let row = |label: &str| {
        services
            .lines()
            .find(|l| l.starts_with(&format!("| {label} |")))
            .unwrap_or_else(|| panic!("no Service row {label} in {md}"))
            .to_owned()
    };
    // eBPF → ClusterIP: median 11 Gbit/s, 0.55× its direct 20, 1.10× ptp's 10.
    assert_eq!(
        row("Sarena eBPF mode → ClusterIP"),
        "| Sarena eBPF mode → ClusterIP | 11.00 | 0.55 | 1.10 ✓ | 22000 | 0.55 | 1.10 ✓ |"
    );
    assert!(
        row("Sarena kernel mode → ClusterIP").contains("| 0.90 ✗ |"),
        "{md}"
    );
    assert!(
        row("ptp + host-local → ClusterIP").contains("| 1.00 |"),
        "{md}"
    );
    assert!(
        md.contains("ClusterIP 10.100.7.9 (ports 5201 (iperf), 5202 (rr)"),
        "{md}"
    );
    assert!(
        md.contains("Service path check: Sarena eBPF mode → ClusterIP"),
        "{md}"
    );
    // The programs' table: direct 200 ns, 2 runs per round trip, no
    // to_container; Service 300 and 150 ns.
    assert!(
        md.contains("| Sarena eBPF mode | 200 | 2.00 | – | 0.00 | 200 |"),
        "{md}"
    );
    assert!(
        md.contains("| Sarena eBPF mode → ClusterIP | 300 | 2.00 | 150 | 2.00 | 300 |"),
        "{md}"
    );
    assert!(
        md.contains("`kernel.bpf_stats_enabled` was off before and off after"),
        "{md}"
    );
    assert_eq!(dp.problems(), Vec::<String>::new());
    // The page's targets: Service rows against ptp.
    let page = render(&ReportInputs {
        cni: None,
        dataplane: Some(dp),
        crossnode: None,
        policy: None,
        policy_cluster: None,
        node_scale: Vec::new(),
        kubelet_pods: None,
        criterion: vec![],
        machine: Machine::default(),
        command: "x".into(),
        quick: false,
    });
    assert!(
        page.contains("| TCP throughput, Sarena eBPF mode → ClusterIP | ≥ 1.0× ptp → ClusterIP | 1.10× | ✓ met |"),
        "{page}"
    );
    assert!(
        page.contains("| request/response rate, Sarena kernel mode → ClusterIP | ≥ 1.0× ptp → ClusterIP | 1.05× | ✓ met |"),
        "{page}"
    );
}

#[test]
fn failed_or_missing_service_checks_are_problems_and_survive_json() {
    let bad = check(snapshot(5, 4, 1_000, ebpf(905, 0, 2_100_001_000)));
    let dp = results(vec![bad]);
    let back: DataplaneResults =
        serde_json::from_str(&serde_json::to_string(&dp).unwrap()).unwrap();
    assert_eq!(back.services, dp.services);
    assert_eq!(
        back.paths[2].samples[0].programs,
        dp.paths[2].samples[0].programs
    );
    assert!(
        serde_json::to_string(&dp)
            .unwrap()
            .contains("\"sarena-ebpf-service\"")
    );
    let problems = dp.problems();
    // The failed eBPF Service check, and no check for kernel and ptp.
    assert_eq!(problems.len(), 3, "{problems:?}");
    assert!(problems[0].starts_with("Service check: Sarena eBPF mode → ClusterIP"));
    assert!(problems[1].contains("Sarena kernel mode → ClusterIP: not made"));
    // JSON of a run before the Service paths still reads.
    let mut old = serde_json::to_value(&dp).unwrap();
    old.as_object_mut().unwrap().remove("services");
    old["paths"][0]["samples"][0]
        .as_object_mut()
        .unwrap()
        .remove("programs");
    let old: DataplaneResults = serde_json::from_value(old).unwrap();
    assert_eq!(old.services, None);
    assert_eq!(old.paths[0].samples[0].programs, None);
}
