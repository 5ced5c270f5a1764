use std::collections::BTreeMap;
use std::sync::Arc;

use super::super::entries::tests::endpoint;
use super::*;
use crate::api::PodRef;
use crate::policy::{Direction, RuleId};

fn pod_endpoint(ifindex: u32, namespace: &str, name: &str) -> Endpoint {
    let mut ep = endpoint(&format!("lxc{ifindex}"), ifindex, &["10.0.0.9/24"]);
    ep.spec.pod = PodRef {
        namespace: Some(namespace.into()),
        name: Some(name.into()),
        uid: None,
    };
    ep
}

fn key(peer: Identity) -> EntryKey {
    EntryKey {
        direction: Direction::Ingress,
        peer,
        proto: 6,
        port: 80,
        port_bits: 16,
    }
}

fn compiled_with(pod: &str, peer: Identity) -> Arc<CompiledPolicy> {
    let mut c = CompiledPolicy::default();
    c.ipcache.insert(
        "10.0.0.7/32".parse().unwrap(),
        IpcacheEntry {
            identity: peer,
            flags: 0,
        },
    );
    c.endpoints.insert(
        PodKey::new("ns", pod),
        EndpointPolicy {
            ingress_isolated: true,
            egress_isolated: false,
            entries: [(key(peer), RuleId(1))].into(),
            policies: vec![("ns".into(), "p".into())],
        },
    );
    c.namespace_isolation.insert("ns".into(), (true, false));
    Arc::new(c)
}

#[test]
fn engine_identities_get_numbers_above_every_pinned_one() {
    let mut held = PolicyTables::default();
    held.ipcache.insert(
        "10.0.0.7/32".parse().unwrap(),
        IpcacheEntry {
            identity: 900,
            flags: 0,
        },
    );
    let mut loader = PolicyLoader::open(held);
    loader.compiled = Some(compiled_with("web", 256));
    loader.attached.insert(3, pod_endpoint(3, "ns", "web"));
    let wanted = loader.wanted();
    let address = wanted.ipcache.values().next().unwrap();
    assert_eq!(address.identity, 901, "fresh, above the pinned 900");
    let entries = &wanted.endpoints[&3].entries;
    assert_eq!(
        entries.keys().next().unwrap().peer,
        901,
        "the same translation"
    );
    // Stable for the loader's life; reserved identities untouched.
    assert_eq!(loader.identity(256), 901);
    assert_eq!(loader.identity(1), 1);
    assert_eq!(loader.identity(0), 0);
}

#[test]
fn a_pod_the_engine_has_not_seen_gets_its_namespace_isolation_and_no_entry() {
    let mut loader = PolicyLoader::open(PolicyTables::default());
    loader.compiled = Some(compiled_with("web", 256));
    let tables = loader.wanted_for(&pod_endpoint(4, "ns", "new-pod"));
    assert_eq!(tables.isolation, ENDPOINT_F_INGRESS_ISOLATED);
    assert!(tables.entries.is_empty());
    let elsewhere = loader.wanted_for(&pod_endpoint(5, "quiet", "p"));
    assert_eq!(elsewhere, EndpointTables::default(), "no policy there");
    let not_k8s = loader.wanted_for(&endpoint("lxc6", 6, &["10.0.0.6/24"]));
    assert_eq!(not_k8s, EndpointTables::default());
}

#[test]
fn before_the_engine_speaks_pins_are_kept_and_new_endpoints_fail_closed() {
    let mut held = PolicyTables::default();
    held.endpoints.insert(
        3,
        EndpointTables {
            isolation: ENDPOINT_F_INGRESS_ISOLATED,
            entries: [(key(300), RuleId(1))].into(),
        },
    );
    let mut loader = PolicyLoader::open(held.clone());
    assert_eq!(
        loader.wanted_for(&pod_endpoint(3, "ns", "web")),
        held.endpoints[&3]
    );
    let new = loader.wanted_for(&pod_endpoint(8, "ns", "other"));
    assert_eq!(new.isolation, POLICY_BITS);
    assert!(new.entries.is_empty());
    // A node that never enforced anything: new endpoints are open.
    let mut fresh = PolicyLoader::open(PolicyTables::default());
    assert_eq!(
        fresh.wanted_for(&pod_endpoint(8, "ns", "other")),
        EndpointTables::default()
    );
}

#[test]
fn without_engine_state_the_addresses_are_kept_as_pinned() {
    let mut held = PolicyTables::default();
    held.ipcache.insert(
        "10.0.0.7/32".parse().unwrap(),
        IpcacheEntry {
            identity: 300,
            flags: 0,
        },
    );
    let mut loader = PolicyLoader::open(held.clone());
    let wanted = loader.wanted();
    assert_eq!(wanted.ipcache, held.ipcache);
    assert_eq!(wanted.endpoints, BTreeMap::new());
}
