//! Unit tests of the engine: selectors, isolation, ports, identities,
//! relists, ipBlocks, named ports, dual stack, the host, Services, claims,
//! explanations.

use std::net::IpAddr;

use ipnet::IpNet;
use sarena_common::policy::{IDENTITY_HOST, IPCACHE_F_POD, IPCACHE_F_TRANSLATED};

use super::*;
use crate::api::Labels;

const NODE: &str = "n1";

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn net(s: &str) -> IpNet {
    s.parse().unwrap()
}

fn pod(ns: &str, name: &str, app: &str, ips: &[&str]) -> PolicyPod {
    PolicyPod {
        namespace: ns.into(),
        name: name.into(),
        labels: labels(&[("app", app)]),
        ips: ips.iter().map(|s| ip(s)).collect(),
        named_ports: vec![],
        node: NODE.into(),
        host_network: false,
    }
}

fn sel(pairs: &[(&str, &str)]) -> LabelSelector {
    LabelSelector {
        match_labels: labels(pairs),
        match_expressions: vec![],
    }
}

fn app(app: &str) -> Option<LabelSelector> {
    Some(sel(&[("app", app)]))
}

fn tcp(port: u16) -> PortSpec {
    PortSpec {
        protocol: Protocol::Tcp,
        port: Some(PortRef::Number(port)),
        end_port: None,
    }
}

fn named(name: &str) -> PortSpec {
    PortSpec {
        protocol: Protocol::Tcp,
        port: Some(PortRef::Named(name.into())),
        end_port: None,
    }
}

/// A policy of `ns` selecting `app=target`, isolating ingress with `ingress`.
fn ingress_policy(ns: &str, name: &str, target: &str, ingress: Vec<Rule>) -> Policy {
    Policy {
        namespace: ns.into(),
        name: name.into(),
        pod_selector: sel(&[("app", target)]),
        ingress_isolation: true,
        egress_isolation: false,
        ingress,
        egress: vec![],
    }
}

fn egress_policy(ns: &str, name: &str, target: &str, egress: Vec<Rule>) -> Policy {
    Policy {
        ingress_isolation: false,
        egress_isolation: true,
        ingress: vec![],
        egress,
        ..ingress_policy(ns, name, target, vec![])
    }
}

fn engine(events: Vec<PolicyEvent>) -> PolicyEngine {
    let mut e = PolicyEngine::new(NODE, 1000);
    for ev in events {
        e.handle(ev);
    }
    e
}

fn key(ns: &str, name: &str) -> PodKey {
    PodKey::new(ns, name)
}

fn ns(name: &str, pairs: &[(&str, &str)]) -> PolicyEvent {
    PolicyEvent::Namespace(PolicyNamespace {
        name: name.into(),
        labels: labels(pairs),
    })
}

/// Ingress into `to` from `from` on TCP `port`.
fn ingress(c: &CompiledPolicy, to: (&str, &str), from: &str, port: u16) -> Decision {
    c.decide(&key(to.0, to.1), Direction::Ingress, ip(from), 6, port)
}

fn egress(c: &CompiledPolicy, from: (&str, &str), to: &str, proto: u8, port: u16) -> Decision {
    c.decide(&key(from.0, from.1), Direction::Egress, ip(to), proto, port)
}

fn allowed(d: Decision) -> bool {
    matches!(d, Decision::Allowed(_))
}

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

#[test]
fn ip_blocks_match_prefixes_and_pod_addresses_minus_excepts() {
    let block = Peer::IpBlock {
        cidr: net("10.0.0.0/16"),
        except: vec![net("10.0.1.0/24")],
    };
    let block6 = Peer::IpBlock {
        cidr: net("fd00::/64"),
        except: vec![],
    };
    let rule = Rule {
        peers: vec![block, block6],
        ports: vec![tcp(80)],
    };
    let mut e = engine(vec![
        PolicyEvent::Pod(pod("a", "db", "db", &["10.0.0.1", "fd00::1"])),
        PolicyEvent::Pod(pod("b", "in", "x", &["10.0.2.5"])),
        PolicyEvent::Pod(pod("b", "except", "x", &["10.0.1.5"])),
        PolicyEvent::Pod(pod("b", "out", "x", &["10.1.0.5"])),
        PolicyEvent::Policy(ingress_policy("a", "p", "db", vec![rule])),
    ]);
    let c = e.compile();
    let yes = ["10.0.2.5", "10.0.200.1", "fd00::9"];
    let no = ["10.0.1.5", "10.0.1.200", "10.1.0.5", "8.8.8.8", "fd01::1"];
    for a in yes {
        assert!(allowed(ingress(&c, ("a", "db"), a, 80)), "{a}");
        assert!(!allowed(ingress(&c, ("a", "db"), a, 81)), "{a}");
    }
    for a in no {
        assert_eq!(ingress(&c, ("a", "db"), a, 80), Decision::Denied, "{a}");
    }
    // Two pods of one class inside and outside the block differ in identity.
    assert_ne!(
        c.identity_of(ip("10.0.2.5")).identity,
        c.identity_of(ip("10.1.0.5")).identity
    );
    for p in [
        "10.0.0.0/16",
        "10.0.1.0/24",
        "fd00::/64",
        "0.0.0.0/0",
        "::/0",
    ] {
        assert_eq!(c.ipcache[&net(p)].flags, 0, "{p}");
        assert!(
            matches!(c.identities[&c.ipcache[&net(p)].identity], IdentityInfo::Prefix(n) if n == net(p))
        );
    }
}

#[test]
fn named_ports_resolve_on_the_endpoint_for_ingress_and_the_peer_for_egress() {
    let np = |name: &str, port| NamedPort {
        name: name.into(),
        protocol: Protocol::Tcp,
        port,
    };
    let db = PolicyPod {
        named_ports: vec![np("sql", 5432)],
        ..pod("a", "db", "db", &["10.0.0.1"])
    };
    let db2 = PolicyPod {
        named_ports: vec![np("sql", 3306)],
        ..pod("a", "db2", "db", &["10.0.0.3"])
    };
    let web = pod("a", "web", "web", &["10.0.0.2"]);
    let to_db = Rule {
        peers: vec![Peer::Pods {
            pods: app("db"),
            namespaces: None,
        }],
        ports: vec![named("sql")],
    };
    let anyone = Rule {
        peers: vec![],
        ports: vec![named("sql")],
    };
    let block = Peer::IpBlock {
        cidr: net("10.0.0.0/8"),
        except: vec![],
    };
    let mut e = engine(vec![
        PolicyEvent::Pod(db),
        PolicyEvent::Pod(db2),
        PolicyEvent::Pod(web),
        PolicyEvent::Policy(ingress_policy("a", "in", "db", vec![anyone.clone()])),
        PolicyEvent::Policy(egress_policy("a", "out", "web", vec![to_db])),
    ]);
    let c = e.compile();
    assert!(allowed(ingress(&c, ("a", "db"), "10.0.0.2", 5432)));
    assert!(!allowed(ingress(&c, ("a", "db"), "10.0.0.2", 3306)));
    assert!(allowed(ingress(&c, ("a", "db2"), "10.0.0.2", 3306)));
    assert!(allowed(egress(&c, ("a", "web"), "10.0.0.1", 6, 5432)));
    assert!(!allowed(egress(&c, ("a", "web"), "10.0.0.1", 6, 3306)));
    assert!(allowed(egress(&c, ("a", "web"), "10.0.0.3", 6, 3306)));
    assert!(
        !allowed(egress(&c, ("a", "web"), "10.0.0.1", 17, 5432)),
        "protocol must match"
    );
    // Any peer / ipBlock with a named port: pods having it, not prefixes.
    for peers in [vec![], vec![block]] {
        let r = Rule {
            peers,
            ports: vec![named("sql")],
        };
        e.handle(PolicyEvent::Policy(egress_policy(
            "a",
            "out",
            "web",
            vec![r],
        )));
        let c = e.compile();
        assert!(allowed(egress(&c, ("a", "web"), "10.0.0.1", 6, 5432)));
        assert!(allowed(egress(&c, ("a", "web"), "10.0.0.3", 6, 3306)));
        assert!(!allowed(egress(&c, ("a", "web"), "10.0.0.3", 6, 5432)));
        assert!(!allowed(egress(&c, ("a", "web"), "10.9.9.9", 6, 5432)));
        let peers = c.endpoints[&key("a", "web")].entries.keys().map(|k| k.peer);
        assert!(peers.into_iter().all(|p| p != 0));
    }
}

#[test]
fn dual_stack_pods_are_peers_on_both_families() {
    let rule = Rule {
        peers: vec![Peer::Pods {
            pods: app("web"),
            namespaces: None,
        }],
        ports: vec![],
    };
    let mut e = engine(vec![
        PolicyEvent::Pod(pod("a", "db", "db", &["10.0.0.1", "fd00::1"])),
        PolicyEvent::Pod(pod("a", "web", "web", &["10.0.0.2", "fd00::2"])),
        PolicyEvent::Pod(pod("a", "x", "x", &["10.0.0.3", "fd00::3"])),
        PolicyEvent::Policy(ingress_policy("a", "p", "db", vec![rule])),
    ]);
    let c = e.compile();
    assert!(allowed(ingress(&c, ("a", "db"), "10.0.0.2", 80)));
    assert!(allowed(ingress(&c, ("a", "db"), "fd00::2", 80)));
    assert!(!allowed(ingress(&c, ("a", "db"), "fd00::3", 80)));
    assert_eq!(c.ipcache[&net("fd00::2/128")].flags, IPCACHE_F_POD);
}

#[test]
fn the_node_is_always_allowed_and_services_are_translated() {
    let block = Peer::IpBlock {
        cidr: net("172.16.0.0/12"),
        except: vec![],
    };
    let mut e = engine(vec![
        PolicyEvent::Pod(pod("a", "db", "db", &["10.0.0.1"])),
        PolicyEvent::Policy(Policy {
            egress_isolation: true,
            egress: vec![Rule {
                peers: vec![block],
                ports: vec![],
            }],
            ..ingress_policy("a", "p", "db", vec![])
        }),
        PolicyEvent::NodeAddresses(vec![ip("192.168.0.10"), ip("fd99::10")]),
        PolicyEvent::Service {
            namespace: "a".into(),
            name: "svc".into(),
            addresses: vec![ip("172.20.0.10"), ip("10.96.0.10"), ip("10.0.0.1")],
        },
    ]);
    let c = e.compile();
    assert_eq!(ingress(&c, ("a", "db"), "192.168.0.10", 1), Decision::Host);
    assert_eq!(egress(&c, ("a", "db"), "fd99::10", 6, 1), Decision::Host);
    assert_eq!(c.identity_of(ip("192.168.0.10")).identity, IDENTITY_HOST);
    let svc = c.identity_of(ip("172.20.0.10"));
    assert_eq!(svc.flags, IPCACHE_F_TRANSLATED);
    assert_eq!(svc.identity, c.ipcache[&net("172.16.0.0/12")].identity);
    assert!(allowed(egress(&c, ("a", "db"), "172.20.0.10", 6, 80)));
    let other = c.identity_of(ip("10.96.0.10"));
    assert_eq!(
        (other.identity, other.flags),
        (c.ipcache[&net("0.0.0.0/0")].identity, IPCACHE_F_TRANSLATED)
    );
    assert_eq!(
        egress(&c, ("a", "db"), "10.96.0.10", 6, 80),
        Decision::Denied
    );
    let podsvc = c.identity_of(ip("10.0.0.1"));
    assert_eq!(podsvc.flags, IPCACHE_F_POD | IPCACHE_F_TRANSLATED);
    e.handle(PolicyEvent::ServiceGone {
        namespace: "a".into(),
        name: "svc".into(),
    });
    assert!(!e.compile().ipcache.contains_key(&net("172.20.0.10/32")));
}

#[test]
fn the_latest_claim_on_an_address_wins_and_the_other_takes_over() {
    let mut e = engine(vec![
        PolicyEvent::Pod(pod("a", "old", "old", &["10.0.0.1"])),
        PolicyEvent::Pod(pod("a", "new", "new", &["10.0.0.1"])),
    ]);
    let c = e.compile();
    let id = |c: &CompiledPolicy| c.identity_of(ip("10.0.0.1")).identity;
    let labels_of = |c: &CompiledPolicy| match &c.identities[&id(c)] {
        IdentityInfo::Pods { labels, .. } => labels["app"].clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!(labels_of(&c), "new");
    // An update of the old pod that keeps the address is not a new claim.
    let relabelled = PolicyPod {
        labels: labels(&[("app", "old"), ("v", "2")]),
        ..pod("a", "old", "old", &["10.0.0.1"])
    };
    assert!(e.handle(PolicyEvent::Pod(relabelled)));
    assert_eq!(labels_of(&e.compile()), "new");
    e.handle(PolicyEvent::PodGone {
        namespace: "a".into(),
        name: "new".into(),
    });
    assert_eq!(labels_of(&e.compile()), "old");
    e.handle(PolicyEvent::Pod(pod("a", "old", "old", &[])));
    assert!(!e.compile().ipcache.contains_key(&net("10.0.0.1/32")));
}

#[test]
fn handle_reports_only_changes() {
    let mut e = PolicyEngine::new(NODE, 1000);
    let p = pod("a", "db", "db", &["10.0.0.1"]);
    assert!(e.handle(PolicyEvent::Pod(p.clone())));
    assert!(!e.handle(PolicyEvent::Pod(p)));
    assert!(e.handle(ns("a", &[("x", "y")])));
    assert!(!e.handle(ns("a", &[("x", "y")])));
    assert!(!e.handle(PolicyEvent::PodGone {
        namespace: "a".into(),
        name: "nope".into()
    }));
    assert!(e.handle(PolicyEvent::NodeAddresses(vec![ip("192.168.0.1")])));
    assert!(!e.handle(PolicyEvent::NodeAddresses(vec![ip("192.168.0.1")])));
}
