use std::collections::{BTreeMap, BTreeSet, HashSet};

use sarena_core::policy::{Peer, PolicyEvent, PortRef};

use super::*;

fn small() -> ClusterSpec {
    ClusterSpec {
        pods: 230,
        nodes: 7,
        namespaces: 6,
        policies: 60,
        apps_per_namespace: 10,
        seed: 5,
    }
}

fn events(spec: ClusterSpec) -> Vec<PolicyEvent> {
    Cluster::new(spec).unwrap().events().collect()
}

#[test]
fn the_same_seed_gives_the_same_cluster_and_another_seed_another() {
    let a = events(ClusterSpec::quick_change());
    assert_eq!(a, events(ClusterSpec::quick_change()));
    let other = ClusterSpec {
        seed: 7,
        ..ClusterSpec::quick_change()
    };
    assert_ne!(a, events(other));
}

#[test]
fn the_counts_are_the_specs() {
    for spec in [small(), ClusterSpec::quick_scale(), ClusterSpec::change()] {
        let c = Cluster::new(spec).unwrap();
        let (mut pods, mut namespaces, mut policies, mut services) = (0, 0, 0, 0);
        let mut per_node: BTreeMap<String, usize> = BTreeMap::new();
        let (mut names, mut ips) = (HashSet::new(), HashSet::new());
        for e in c.events() {
            match e {
                PolicyEvent::Pod(p) => {
                    pods += 1;
                    *per_node.entry(p.node.clone()).or_default() += 1;
                    assert!(names.insert((p.namespace, p.name)), "pod names are unique");
                    assert!(ips.insert(p.ips[0]), "pod addresses are unique");
                }
                PolicyEvent::Namespace(_) => namespaces += 1,
                PolicyEvent::Policy(_) => policies += 1,
                PolicyEvent::Service { .. } => services += 1,
                _ => {}
            }
        }
        assert_eq!(
            (pods, namespaces, policies),
            (spec.pods, spec.namespaces, spec.policies)
        );
        assert_eq!(services, spec.namespaces * spec.apps_per_namespace);
        assert_eq!(per_node.len(), spec.nodes);
        assert_eq!(per_node[LOCAL_NODE], spec.local_pods());
        let (min, max) = (per_node.values().min(), per_node.values().max());
        assert!(
            max.unwrap() - min.unwrap() <= 1,
            "an even share: {per_node:?}"
        );
    }
    assert_eq!(ClusterSpec::scale().local_pods(), 100);
    assert_eq!(ClusterSpec::change().local_pods(), 100);
}

#[test]
fn every_namespace_has_a_default_deny_and_the_mix_has_every_kind() {
    let c = Cluster::new(ClusterSpec::scale()).unwrap();
    let policies: Vec<_> = (0..c.spec.policies).map(|j| c.policy(j)).collect();
    let denies: BTreeSet<&str> = (policies.iter())
        .filter(|p| p.name == "default-deny" && p.ingress.is_empty() && p.ingress_isolation)
        .map(|p| p.namespace.as_str())
        .collect();
    assert_eq!(denies.len(), c.spec.namespaces);
    let mut kinds = vec![0usize; MIX.len()];
    for j in 0..c.spec.policies {
        if let Some(k) = c.policy_kind(j) {
            kinds[k] += 1;
        }
    }
    assert!(kinds.iter().all(|n| *n > 0), "every kind: {kinds:?}");
    assert_eq!(kinds.iter().sum::<usize>(), 800);
    let rules = || {
        policies
            .iter()
            .flat_map(|p| p.ingress.iter().chain(&p.egress))
    };
    let peers = || rules().flat_map(|r| &r.peers);
    let ports = || rules().flat_map(|r| &r.ports);
    assert!(peers().any(|p| matches!(p, Peer::IpBlock { except, .. } if !except.is_empty())));
    assert!(peers().any(|p| matches!(
        p,
        Peer::Pods {
            namespaces: Some(_),
            ..
        }
    )));
    assert!(ports().any(|p| matches!(p.port, Some(PortRef::Named(_)))));
    assert!(ports().any(|p| matches!(p.port, Some(PortRef::Number(_)))));
    assert!(ports().any(|p| p.end_port.is_some()));
    let egress = policies.iter().filter(|p| p.egress_isolation).count();
    assert!((100..300).contains(&egress), "about 20 % egress: {egress}");
}

#[test]
fn specs_that_make_no_cluster_are_refused() {
    for bad in [
        ClusterSpec {
            nodes: 0,
            ..small()
        },
        ClusterSpec {
            namespaces: 0,
            ..small()
        },
        ClusterSpec {
            pods: 600,
            nodes: 1,
            ..small()
        },
    ] {
        assert!(Cluster::new(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn scale_in_process_compiles_the_local_pods_and_fits_the_maps() {
    let r = measure_scale(small(), "test").unwrap();
    let s = r.sizes;
    assert_eq!(s.endpoints, small().local_pods());
    assert_eq!(s.ingress_isolated, s.endpoints, "default-deny everywhere");
    // Pods, Services, this node, 0.0.0.0/0 and ::/0 at least.
    assert!(s.ipcache_entries >= small().pods + 60 + 3, "{s:?}");
    assert!(
        s.policy_entries > 0 && s.identities > 0 && s.rules > 0,
        "{s:?}"
    );
    assert!(r.memory.rss_before_kib > 0 && r.memory.hwm_kib >= r.memory.rss_compiled_kib);
    assert!(r.first_compile_ms > 0.0);
}

#[test]
fn changes_are_timed_for_every_op() {
    let r = measure_changes(ClusterSpec::quick_change(), 3).unwrap();
    assert_eq!(r.rows.len(), OPS.len());
    for row in &r.rows {
        assert_eq!(row.samples_ms.len(), 3, "{}", row.op);
        assert_eq!(row.summary.unwrap().n, 3);
    }
    assert!(
        measure_changes(ClusterSpec::quick_change(), 0).is_ok_and(|r| r.rows[0].summary.is_none())
    );
}
