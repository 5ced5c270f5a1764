//! The cross-node checks and summaries on made-up samples.

use std::collections::BTreeMap;

use super::paths::CrossKind;
use super::results::{
    CrossNodeResults, CrossPathResult, CrossPhase, CrossSample, CrossSummary, FastPath,
};
use crate::dataplane::{IperfReport, IperfRun, RrRun};

fn rr(transactions: u64) -> RrRun {
    RrRun {
        transactions,
        seconds: 1.0,
        per_second: transactions as f64,
        cpu: None,
        process_cpu_seconds: None,
    }
}

fn sample(gbits: f64, transactions: u64) -> CrossSample {
    CrossSample {
        round: 1,
        position: 0,
        iperf: IperfRun {
            report: IperfReport {
                bits_per_second: gbits * 1e9,
                bytes: 1,
                seconds: 1.0,
                retransmits: None,
                client_cpu_percent: None,
                server_cpu_percent: None,
            },
            cpu: None,
            attempts: 1,
        },
        rr: rr(transactions),
        crr: rr(transactions / 10),
        programs: None,
    }
}

fn counters(sent: u64, delivered: u64) -> BTreeMap<String, u64> {
    [
        ("to_peer_redirected".to_owned(), sent),
        ("from_peer_redirected".to_owned(), delivered),
    ]
    .into_iter()
    .collect()
}

fn path(kind: CrossKind, gbits: f64, forwarded: u64, fast: Option<(u64, u64)>) -> CrossPathResult {
    let samples = vec![sample(gbits, 1000)];
    CrossPathResult {
        path: kind,
        mtu: Some(1500),
        summary: CrossSummary::of(&samples),
        samples,
        host_forwarded: Some([forwarded, forwarded]),
        fast_path: fast.map(|(s, d)| FastPath {
            client_node: counters(s, d),
            server_node: counters(d, s),
        }),
    }
}

fn results(paths: Vec<CrossPathResult>) -> CrossNodeResults {
    let mut phase = CrossPhase {
        firewall_rules: 0,
        paths,
        failed: vec![],
    };
    phase.fill_ratios();
    CrossNodeResults {
        rounds: 1,
        iperf_seconds: 1,
        rr_seconds: 1,
        pinning: None,
        phases: vec![phase],
        skipped: vec![],
        check_errors: vec![],
    }
}

#[test]
fn ratios_are_to_the_underlay() {
    let r = results(vec![
        path(CrossKind::Underlay, 10.0, 0, None),
        path(CrossKind::SarenaEbpfNative, 9.5, 0, Some((2000, 2000))),
    ]);
    let native = r.phases[0].path(CrossKind::SarenaEbpfNative).unwrap();
    assert!((native.summary.gbits_ratio.unwrap() - 0.95).abs() < 1e-9);
    assert_eq!(native.exchanges(), 1100);
    assert_eq!(r.problems(), Vec::<String>::new());
    let targets = r.targets();
    assert_eq!(targets[0].met, Some(false), "{targets:?}");
}

#[test]
fn an_ebpf_path_the_host_stack_carried_is_a_problem() {
    // Too few packets on the direct path.
    let r = results(vec![path(
        CrossKind::SarenaEbpfNative,
        9.0,
        0,
        Some((500, 2000)),
    )]);
    let problems = r.problems();
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(problems[0].contains("sent 500"), "{problems:?}");
    // The host stacks forwarded the traffic.
    let r = results(vec![path(
        CrossKind::SarenaEbpfVxlan,
        9.0,
        900,
        Some((2000, 2000)),
    )]);
    assert!(
        r.problems()[0].contains("forwarded 900 and 900"),
        "{:?}",
        r.problems()
    );
    // Counters not read.
    let r = results(vec![path(CrossKind::SarenaEbpfNative, 9.0, 0, None)]);
    assert!(r.problems()[0].contains("counters not read"));
}

#[test]
fn a_host_stack_path_must_be_forwarded_by_the_host() {
    let r = results(vec![path(CrossKind::HostGw, 5.0, 10, None)]);
    assert!(
        r.problems()[0].contains("forwarded only 10"),
        "{:?}",
        r.problems()
    );
    let r = results(vec![path(CrossKind::SarenaKernel, 5.0, 5000, None)]);
    assert_eq!(r.problems(), Vec::<String>::new());
}

#[test]
fn the_host_stack_vxlan_path_must_route_nothing_directly() {
    // Forwarded by both host stacks, nothing direct: what it claims.
    let r = results(vec![path(
        CrossKind::SarenaEbpfVxlanHostStack,
        5.0,
        5000,
        Some((0, 0)),
    )]);
    assert_eq!(r.problems(), Vec::<String>::new());
    // The programs still took packets past the host stack.
    let r = results(vec![path(
        CrossKind::SarenaEbpfVxlanHostStack,
        5.0,
        5000,
        Some((3, 0)),
    )]);
    let problems = r.problems();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].contains("routed 6 packets directly"),
        "{problems:?}"
    );
}
