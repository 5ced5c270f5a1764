//! Unit tests of the engine's addresses: ipBlocks with excepts (pod
//! addresses too), named ports, dual stack, the node, Services, claims.

use sarena_common::policy::{IDENTITY_HOST, IPCACHE_F_POD, IPCACHE_F_TRANSLATED};

use super::engine_test_support::*;
use super::*;

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
