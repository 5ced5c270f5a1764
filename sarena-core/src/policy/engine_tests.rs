//! Unit tests of the engine: selectors, isolation, endpoints, port
//! ranges, identity and rule-number stability, relists.

use sarena_common::policy::IPCACHE_F_POD;

use super::engine_test_support::*;
use super::*;

#[test]
fn peers_by_pod_namespace_and_both_selectors() {
    let rule = |pods, namespaces| Rule {
        peers: vec![Peer::Pods { pods, namespaces }],
        ports: vec![],
    };
    let mut e = engine(vec![
        ns("a", &[("team", "x")]),
        ns("b", &[("team", "x")]),
        ns("c", &[("team", "y")]),
        PolicyEvent::Pod(pod("a", "db", "db", &["10.0.0.1"])),
        PolicyEvent::Pod(pod("a", "web", "web", &["10.0.0.2"])),
        PolicyEvent::Pod(pod("b", "web", "web", &["10.0.0.3"])),
        PolicyEvent::Pod(pod("c", "web", "web", &["10.0.0.4"])),
        PolicyEvent::Pod(pod("b", "other", "other", &["10.0.0.5"])),
        PolicyEvent::Pod(pod("a", "other", "other", &["10.0.0.6"])),
    ]);
    let set = |e: &mut PolicyEngine, r: Rule| {
        e.handle(PolicyEvent::Policy(ingress_policy("a", "p", "db", vec![r])));
        let c = e.compile();
        ["10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5", "10.0.0.6"]
            .iter()
            .map(|from| allowed(ingress(&c, ("a", "db"), from, 80)))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        set(&mut e, rule(app("web"), None)),
        [true, false, false, false, false]
    );
    let team_x = Some(sel(&[("team", "x")]));
    assert_eq!(
        set(&mut e, rule(None, team_x.clone())),
        [true, true, false, true, true]
    );
    assert_eq!(
        set(&mut e, rule(app("web"), team_x)),
        [true, true, false, false, false]
    );
    assert_eq!(
        set(&mut e, rule(app("web"), Some(sel(&[])))),
        [true, true, true, false, false]
    );
    // A namespace seen later brings its labels; one not seen has none.
    e.handle(ns("c", &[("team", "x")]));
    e.handle(PolicyEvent::NamespaceGone { name: "b".into() });
    let team_x = Some(sel(&[("team", "x")]));
    assert_eq!(
        set(&mut e, rule(app("web"), team_x)),
        [true, false, true, false, false]
    );
}

#[test]
fn isolation_follows_the_policy_types_and_only_selected_pods() {
    let deny_all = Policy {
        egress_isolation: true,
        ..ingress_policy("a", "deny", "db", vec![])
    };
    let mut e = engine(vec![
        PolicyEvent::Pod(pod("a", "db", "db", &["10.0.0.1"])),
        PolicyEvent::Pod(pod("a", "web", "web", &["10.0.0.2"])),
        PolicyEvent::Policy(deny_all),
    ]);
    let c = e.compile();
    assert_eq!(ingress(&c, ("a", "db"), "10.0.0.2", 80), Decision::Denied);
    assert_eq!(egress(&c, ("a", "db"), "10.0.0.2", 6, 80), Decision::Denied);
    assert_eq!(
        ingress(&c, ("a", "web"), "10.0.0.1", 80),
        Decision::NotIsolated
    );
    let db = &c.endpoints[&key("a", "db")];
    assert!(db.ingress_isolated && db.egress_isolated && db.entries.is_empty());
    assert_eq!(db.policies, vec![("a".to_string(), "deny".to_string())]);
    // Egress rules of a policy that isolates ingress only are not in force.
    let p = Policy {
        egress: vec![Rule::default()],
        ..ingress_policy("a", "deny", "db", vec![])
    };
    e.handle(PolicyEvent::Policy(p));
    let c = e.compile();
    assert_eq!(
        egress(&c, ("a", "db"), "10.0.0.2", 6, 80),
        Decision::NotIsolated
    );
    assert!(c.endpoints[&key("a", "db")].entries.is_empty());
    // Allow-all ingress next to deny-all: the union allows.
    e.handle(PolicyEvent::Policy(ingress_policy(
        "a",
        "all",
        "db",
        vec![Rule::default()],
    )));
    let c = e.compile();
    assert!(allowed(ingress(&c, ("a", "db"), "192.0.2.1", 1)));
}

#[test]
fn endpoints_are_this_nodes_pods_off_the_host_network() {
    let remote = PolicyPod {
        node: "n2".into(),
        ..pod("a", "remote", "x", &["10.0.1.1"])
    };
    let host = PolicyPod {
        host_network: true,
        ..pod("a", "host", "x", &["192.168.0.1"])
    };
    let mut e = engine(vec![
        PolicyEvent::Pod(pod("a", "local", "x", &["10.0.0.1"])),
        PolicyEvent::Pod(pod("a", "pending", "x", &[])),
        PolicyEvent::Pod(remote),
        PolicyEvent::Pod(host),
    ]);
    let c = e.compile();
    let eps: Vec<_> = c.endpoints.keys().cloned().collect();
    assert_eq!(eps, vec![key("a", "local"), key("a", "pending")]);
    assert_eq!(c.ipcache[&net("10.0.1.1/32")].flags, IPCACHE_F_POD);
    assert!(
        !c.ipcache.contains_key(&net("192.168.0.1/32")),
        "host network: no entry"
    );
    let pods = c
        .ipcache
        .values()
        .filter(|v| v.flags & IPCACHE_F_POD != 0)
        .count();
    assert_eq!(pods, 2, "a pod without addresses has no entry");
    assert!(e.endpoint_policy(&key("a", "remote")).is_some());
    assert!(e.endpoint_policy(&key("a", "nope")).is_none());
}

#[test]
fn end_port_ranges_allow_exactly_the_range() {
    let ports = vec![
        PortSpec {
            protocol: Protocol::Tcp,
            port: Some(PortRef::Number(1000)),
            end_port: Some(1010),
        },
        PortSpec {
            protocol: Protocol::Udp,
            port: None,
            end_port: None,
        },
        PortSpec {
            protocol: Protocol::Sctp,
            port: Some(PortRef::Number(9)),
            end_port: None,
        },
    ];
    let mut e = engine(vec![
        PolicyEvent::Pod(pod("a", "db", "db", &["10.0.0.1"])),
        PolicyEvent::Policy(ingress_policy(
            "a",
            "p",
            "db",
            vec![Rule {
                peers: vec![],
                ports,
            }],
        )),
    ]);
    let c = e.compile();
    let d = |proto, port| {
        allowed(c.decide(
            &key("a", "db"),
            Direction::Ingress,
            ip("10.9.9.9"),
            proto,
            port,
        ))
    };
    assert!(!d(6, 999) && d(6, 1000) && d(6, 1007) && d(6, 1010) && !d(6, 1011));
    assert!(d(17, 1) && d(17, 65535) && d(132, 9) && !d(132, 10) && !d(1, 0));
    assert_eq!(c.endpoints[&key("a", "db")].entries.len(), 3 + 1 + 1);
}

#[test]
fn identities_and_rule_ids_are_stable_across_recompiles() {
    let mut e = engine(vec![
        PolicyEvent::Pod(pod("a", "db", "db", &["10.0.0.1"])),
        PolicyEvent::Pod(pod("a", "web", "web", &["10.0.0.2"])),
        PolicyEvent::Pod(pod("a", "web2", "web", &["10.0.0.3"])),
        PolicyEvent::Policy(ingress_policy(
            "a",
            "p",
            "db",
            vec![Rule::default(), Rule::default()],
        )),
    ]);
    let c1 = e.compile();
    assert_eq!(c1, e.compile());
    let id = |c: &CompiledPolicy, a: &str| c.identity_of(ip(a)).identity;
    assert_eq!(
        id(&c1, "10.0.0.2"),
        id(&c1, "10.0.0.3"),
        "same key, same identity"
    );
    assert_ne!(id(&c1, "10.0.0.1"), id(&c1, "10.0.0.2"));
    assert!(
        c1.identities
            .keys()
            .all(|i| (1000..e.next_identity()).contains(i))
    );
    e.handle(PolicyEvent::Pod(pod("a", "new", "new", &["10.0.0.4"])));
    e.handle(PolicyEvent::Policy(ingress_policy(
        "a",
        "q",
        "web",
        vec![Rule::default()],
    )));
    let c2 = e.compile();
    for a in ["10.0.0.1", "10.0.0.2", "0.0.0.0"] {
        assert_eq!(id(&c1, a), id(&c2, a), "{a}");
    }
    assert_eq!(
        c1.rules.iter().collect::<Vec<_>>(),
        c2.rules.iter().take(2).collect::<Vec<_>>()
    );
    // A relabelled pod gets a new identity, never an old one.
    let next = e.next_identity();
    e.handle(PolicyEvent::Pod(pod("a", "db", "db2", &["10.0.0.1"])));
    assert_eq!(e.compile().identity_of(ip("10.0.0.1")).identity, next);
    // Rules: the second rule of p goes, the first keeps its number.
    e.handle(PolicyEvent::Policy(ingress_policy(
        "a",
        "p",
        "db",
        vec![Rule::default()],
    )));
    let c3 = e.compile();
    let first = c1
        .rules
        .iter()
        .find(|(_, r)| r.name == "p" && r.index == 0)
        .unwrap()
        .0;
    assert_eq!(c3.rules[first].to_string(), "a/p ingress[0]");
    assert!(!c3.rules.values().any(|r| r.name == "p" && r.index == 1));
}

#[test]
fn a_relist_keeps_old_objects_until_listed_then_drops_the_unnamed() {
    let mut e = engine(vec![
        PolicyEvent::Pod(pod("a", "db", "db", &["10.0.0.1"])),
        PolicyEvent::Pod(pod("a", "web", "web", &["10.0.0.2"])),
        PolicyEvent::Policy(ingress_policy("a", "p", "db", vec![])),
        PolicyEvent::Policy(ingress_policy("a", "q", "web", vec![])),
    ]);
    assert!(!e.synced());
    for k in [Kind::Pods, Kind::Namespaces, Kind::Policies] {
        assert!(!e.handle(PolicyEvent::Listed(k)));
    }
    assert!(!e.synced());
    e.handle(PolicyEvent::Listed(Kind::Services));
    assert!(e.synced());
    assert!(!e.handle(PolicyEvent::Relisting(Kind::Policies)));
    assert!(
        !e.handle(PolicyEvent::Policy(ingress_policy("a", "p", "db", vec![]))),
        "unchanged"
    );
    let c = e.compile();
    assert_eq!(
        ingress(&c, ("a", "web"), "10.0.0.1", 80),
        Decision::Denied,
        "q still in force"
    );
    assert!(e.handle(PolicyEvent::Listed(Kind::Policies)));
    let c = e.compile();
    assert_eq!(
        ingress(&c, ("a", "web"), "10.0.0.1", 80),
        Decision::NotIsolated
    );
    assert_eq!(ingress(&c, ("a", "db"), "10.0.0.2", 80), Decision::Denied);
    // Pods: the unnamed one loses its address entry at Listed only.
    e.handle(PolicyEvent::Relisting(Kind::Pods));
    e.handle(PolicyEvent::Pod(pod("a", "db", "db", &["10.0.0.1"])));
    assert!(e.compile().ipcache.contains_key(&net("10.0.0.2/32")));
    assert!(e.handle(PolicyEvent::Listed(Kind::Pods)));
    assert!(!e.compile().ipcache.contains_key(&net("10.0.0.2/32")));
    assert!(e.synced());
}
