//! The pure parts of the embedded paths: the policy generator, the engine's
//! output for it, and the policy check's verdict.

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr};

use sarena_core::policy::{Peer, PodKey, PortRef};

use super::embedded_check::EmbeddedCheck;
use super::event_cost::{EventCost, SettingCost};
use super::netpol::{self, DENIED_PORT, MEASUREMENT_PORTS, POLICIES};
use super::policy_check::{PolicyCheck, Probe};
use super::prog_stats::{ProgramRuns, RunDelta};
use super::results::{DataplaneResults, PathKind};

fn ip(host: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(10, 190, 0, host))
}

fn ports_of(rule: &sarena_core::policy::Rule) -> Vec<u16> {
    rule.ports
        .iter()
        .filter_map(|p| match p.port {
            Some(PortRef::Number(n)) => Some(n),
            _ => None,
        })
        .collect()
}

#[test]
fn the_generator_makes_100_policies_over_both_pods_on_distinct_ports() {
    let policies = netpol::policies(POLICIES);
    assert_eq!(policies.len(), 100);
    let names: BTreeSet<_> = policies.iter().map(|p| p.name.clone()).collect();
    assert_eq!(names.len(), 100, "names must be distinct");
    let client = netpol::pod("client", "client", vec![ip(2)]);
    let server = netpol::pod("server", "server", vec![ip(3)]);
    let mut own_ports = BTreeSet::new();
    for p in &policies {
        assert_eq!(p.namespace, netpol::NAMESPACE);
        assert!(p.ingress_isolation && p.egress_isolation, "{}", p.name);
        for pod in [&client, &server] {
            assert!(
                p.pod_selector
                    .match_labels
                    .iter()
                    .all(|(k, v)| pod.labels.get(k) == Some(v)),
                "{} does not select {}",
                p.name,
                pod.name
            );
        }
        for rule in p.ingress.iter().chain(&p.egress) {
            let Some(Peer::Pods {
                pods: Some(sel),
                namespaces: None,
            }) = rule.peers.first()
            else {
                panic!("{}: the peer is not a podSelector", p.name);
            };
            assert!(
                sel.match_labels
                    .iter()
                    .all(|(k, v)| client.labels.get(k) == Some(v))
            );
            let ports = ports_of(rule);
            for m in MEASUREMENT_PORTS {
                assert!(ports.contains(&m), "{}: port {m} missing", p.name);
            }
            assert!(
                !ports.contains(&DENIED_PORT),
                "{} allows the denied port",
                p.name
            );
        }
        let own: Vec<u16> = ports_of(&p.ingress[0])
            .into_iter()
            .filter(|port| !MEASUREMENT_PORTS.contains(port))
            .collect();
        assert_eq!(own.len(), 1, "{}: {own:?}", p.name);
        own_ports.insert(own[0]);
    }
    assert_eq!(own_ports.len(), 100, "own ports must be distinct");
    assert!(own_ports.contains(&netpol::allowed_probe_port(POLICIES)));
}

#[test]
fn the_engine_isolates_both_pods_and_allows_every_port() {
    let pods = [
        netpol::pod("client", "client", vec![ip(2)]),
        netpol::pod("server", "server", vec![ip(3)]),
    ];
    let compiled = netpol::compile(&pods, &netpol::policies(POLICIES));
    for name in ["client", "server"] {
        let e = &compiled.endpoints[&PodKey::new(netpol::NAMESPACE, name)];
        assert!(e.ingress_isolated && e.egress_isolated, "{name}");
        assert_eq!(e.policies.len(), 100, "{name}");
        let ports: BTreeSet<u16> = e.entries.keys().map(|k| k.port).collect();
        for i in 0..POLICIES {
            assert!(
                ports.contains(&netpol::own_port(i)),
                "{name}: port {}",
                netpol::own_port(i)
            );
        }
        assert!(!ports.contains(&DENIED_PORT), "{name}");
    }
    let stats = netpol::stats_of(&compiled, POLICIES);
    assert_eq!(stats.policies, 100);
    assert!(stats.policy_entries >= 2 * 2 * 102, "{stats:?}");
    assert!(
        stats.identities >= 1 && stats.ipcache_entries >= 2,
        "{stats:?}"
    );
}

fn probe(allowed: bool, denied: bool, drops: u64) -> Probe {
    Probe {
        allowed_connected: allowed,
        denied_connected: denied,
        policy_drops: drops,
    }
}

#[test]
fn the_policy_check_passes_only_when_the_policies_denied_and_counted() {
    let live = probe(true, false, 3);
    let ok = PolicyCheck::new(true, 6099, live, live, 0);
    assert!(ok.passed, "{ok:?}");
    assert!(ok.describe().contains("were enforced"), "{}", ok.describe());
    // Policies not applied: the denied port connects, nothing counted.
    let open = probe(true, true, 0);
    let c = PolicyCheck::new(true, 6099, open, open, 0);
    assert!(!c.passed);
    assert!(c.describe().contains("NOT"), "{}", c.describe());
    // Gone after the rounds.
    assert!(!PolicyCheck::new(true, 6099, live, open, 0).passed);
    // Refused, but not by the programs (no drop counted).
    assert!(!PolicyCheck::new(true, 6099, probe(true, false, 0), live, 0).passed);
    // The allowed port refused too: the policies deny too much.
    assert!(!PolicyCheck::new(true, 6099, probe(false, false, 5), live, 0).passed);
    // The measured traffic was dropped by policy.
    assert!(!PolicyCheck::new(true, 6099, live, live, 12).passed);
}

#[test]
fn the_control_passes_only_when_nothing_is_isolated() {
    let open = probe(true, true, 0);
    assert!(PolicyCheck::new(false, 6000, open, open, 0).passed);
    assert!(!PolicyCheck::new(false, 6000, probe(true, false, 2), open, 0).passed);
    assert!(!PolicyCheck::new(false, 6000, open, open, 1).passed);
}

#[test]
fn a_failed_policy_check_is_a_problem() {
    let open = probe(true, true, 0);
    let check = EmbeddedCheck {
        path: PathKind::SarenaEbpfEmbeddedPolicies,
        stats: None,
        ebpf: None,
        policy: Some(PolicyCheck::new(true, 6099, open, open, 0)),
        errors: Vec::new(),
    };
    let problems = check.problems();
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(
        problems
            .iter()
            .any(|p| p.starts_with("policy check of Sarena eBPF, embedded, 100"))
    );
    assert!(problems.iter().any(|p| p.contains("counters not read")));
}

#[test]
fn paths_are_named_as_in_the_json() {
    for kind in PathKind::ALL {
        assert_eq!(PathKind::from_name(&kind.name()), Some(kind), "{kind:?}");
    }
    assert_eq!(
        PathKind::from_name("sarena-ebpf-embedded-policies"),
        Some(PathKind::SarenaEbpfEmbeddedPolicies)
    );
    assert_eq!(PathKind::from_name("nope"), None);
    assert!(
        PathKind::SarenaEbpfEmbedded.is_ebpf()
            && PathKind::SarenaEbpfEmbedded.contender().is_none()
    );
}

#[test]
fn the_report_shows_the_embedded_rows_with_targets_and_policy_figures() {
    use super::netpol::PolicyStats;
    use super::results::{DataplaneResults, PathResult, PathSummary};
    let path = |path, g, rr, cpu| PathResult {
        path,
        mtu: Some(1500),
        samples: Vec::new(),
        summary: PathSummary {
            gbits_median: Some(10.0),
            rr_median: Some(50_000.0),
            gbits_ratio_to_raw: Some(g),
            rr_ratio_to_raw: Some(rr),
            process_cpu_per_rr_ratio_to_raw: Some(cpu),
            ..PathSummary::default()
        },
    };
    let live = probe(true, false, 2);
    let dp = DataplaneResults {
        rounds: 1,
        iperf_seconds: 1,
        rr_seconds: 1,
        cpus: 2,
        pinning: None,
        settle: None,
        load_average: (None, None),
        paths: vec![
            path(PathKind::RawVeth, 1.0, 1.0, 1.0),
            path(PathKind::SarenaEbpfEmbedded, 0.99, 0.93, 1.05),
            path(PathKind::SarenaEbpfEmbeddedPolicies, 0.97, 0.85, 1.2),
        ],
        ebpf_check: None,
        ebpf6_check: None,
        check_errors: Vec::new(),
        skipped: Vec::new(),
        services: None,
        embedded: vec![EmbeddedCheck {
            path: PathKind::SarenaEbpfEmbeddedPolicies,
            stats: Some(PolicyStats {
                policies: 100,
                identities: 4,
                ipcache_entries: 4,
                policy_entries: 816,
                writes: 822,
                failed_writes: 0,
            }),
            ebpf: None,
            policy: Some(PolicyCheck::new(true, 6099, live, live, 0)),
            errors: Vec::new(),
        }],
        event_cost: Some(event_cost()),
    };
    let md = dp.markdown();
    let row = |label: &str| {
        let section = &md[md
            .find("### Sarena embedded")
            .expect("the embedded subsection")..];
        section
            .lines()
            .find(|l| l.starts_with(&format!("| {label} |")))
            .unwrap_or_else(|| panic!("no row {label} in\n{section}"))
            .to_string()
    };
    let policies = row("Sarena eBPF, embedded, 100 policies");
    assert!(policies.contains("| 0.97 ✓ |"), "{policies}");
    assert!(policies.contains("| 0.85 ✗ |"), "{policies}");
    assert!(policies.contains("| 1.20 ✗ |"), "{policies}");
    assert!(
        policies.ends_with("| 100 | 4 | 4 | 816 | 822 |"),
        "{policies}"
    );
    let control = row("Sarena eBPF, embedded, 0 policies");
    assert!(
        control.contains("| 0.93 ✓ |") && control.contains("| 1.05 ✓ |"),
        "{control}"
    );
    assert!(md.contains("the policies were enforced"), "{md}");
    let targets = crate::report::embedded::targets(&dp);
    assert_eq!(targets.len(), 6);
    assert_eq!(targets.iter().filter(|t| t.met == Some(false)).count(), 2);
    // The embedded checks' problems reach the results' problems.
    assert!(
        dp.problems()
            .iter()
            .any(|p| p.contains("counters not read"))
    );
}

/// Two settings of an event-cost run: events off, and drop events written
/// at 1.5× the cost per dropped frame.
fn event_cost() -> EventCost {
    let run = |ns: u64, runs: u64| RunDelta {
        run_time_ns: ns * runs,
        runs,
    };
    let runs = |from, to, transactions| ProgramRuns {
        from_container: from,
        to_container: to,
        transactions,
    };
    let setting = |label: &str, drop_ns: u64, drop_events: u64| SettingCost {
        label: label.into(),
        rr: runs(run(300, 1000), run(100, 10), 1000),
        crr: runs(run(400, 5000), run(0, 0), 1000),
        flood: runs(run(drop_ns, 2000), run(0, 0), 2000),
        drop_events,
        flow_events: 0,
        lost_rate_limited: 2000 - drop_events,
        lost_buffer_full: 0,
        read: drop_events,
    };
    EventCost {
        rounds: 1,
        seconds: 1,
        settings: vec![
            setting("events off", 200, 0),
            setting("drop events (100/s per endpoint)", 300, 200),
        ],
    }
}

#[test]
fn the_report_shows_each_event_settings_cost_against_events_off() {
    let dp = DataplaneResults {
        event_cost: Some(event_cost()),
        ..super::tests::results()
    };
    let md = dp.markdown();
    let section = &md[md
        .find("### What drop and flow events cost (issue 28)")
        .expect("the event cost subsection")..];
    // per round trip (300 × 1000 + 100 × 10) / 1000 = 301 ns, per
    // connection 2000 ns, per dropped frame 200 and 300 ns
    assert!(
        section.contains(
            "| events off | 301 (1.00×) | 2000 (1.00×) | 200 (1.00×) | 0 | 0 | 2000 | 0 |"
        ),
        "{section}"
    );
    assert!(
        section.contains("| drop events (100/s per endpoint) | 301 (1.00×) | 2000 (1.00×) | 300 (1.50×) | 200 | 0 | 1800 | 0 |"),
        "{section}"
    );
    assert!(
        section.contains("The drain read 200 of the 200 events written"),
        "{section}"
    );
    let without = DataplaneResults {
        event_cost: None,
        ..super::tests::results()
    };
    assert!(
        !without
            .markdown()
            .contains("What drop and flow events cost")
    );
}
