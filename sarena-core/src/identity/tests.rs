//! Which registry updates (and dataplane pushes) pod and namespace events cause.

use mockall::Sequence;
use mockall::predicate::eq;

use super::*;
use crate::api::{EndpointSpec, PodRef};
use crate::dataplane::{MockNodeUpdates, NodeUpdate, UpdateOutcome};

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn owner(cid: &str) -> Attachment {
    Attachment {
        container_id: cid.into(),
        ifname: "eth0".into(),
    }
}

fn endpoint(cid: &str, ns: &str, name: &str, uid: Option<&str>) -> Endpoint {
    Endpoint {
        spec: EndpointSpec {
            owner: owner(cid),
            pod: PodRef {
                namespace: Some(ns.into()),
                name: Some(name.into()),
                uid: uid.map(Into::into),
            },
            host_ifname: format!("lxc{cid}"),
            host_ifindex: 7,
            host_mac: "02:00:00:00:00:01".parse().unwrap(),
            pod_mac: "02:00:00:00:00:02".parse().unwrap(),
            addresses: vec!["10.200.0.2/16".parse().unwrap()],
            netns: "/var/run/netns/x".into(),
            bandwidth: None,
            identity: PodIdentity::default(),
        },
        created_at: 1,
    }
}

fn pod(ns: &str, name: &str, uid: &str, l: &[(&str, &str)]) -> IdentityEvent {
    IdentityEvent::Pod(PodMeta {
        namespace: ns.into(),
        name: name.into(),
        uid: uid.into(),
        labels: labels(l),
    })
}

fn namespace(name: &str, l: &[(&str, &str)]) -> IdentityEvent {
    IdentityEvent::Namespace(NamespaceMeta {
        name: name.into(),
        labels: labels(l),
    })
}

fn with_identity(mut ep: Endpoint, identity: &PodIdentity) -> Endpoint {
    ep.spec.identity = identity.clone();
    ep
}

/// Expects `set_identity(owner, identity)` then the dataplane push, in `seq`.
fn expect_update(
    registry: &mut MockIdentityRegistry,
    dataplane: &mut MockNodeUpdates,
    seq: &mut Sequence,
    ep: &Endpoint,
    identity: PodIdentity,
) {
    let updated = with_identity(ep.clone(), &identity);
    registry
        .expect_set_identity()
        .with(eq(ep.spec.owner.clone()), eq(identity.clone()))
        .times(1)
        .in_sequence(seq)
        .return_once(move |_, _| Ok(Some(updated)));
    let push = NodeUpdate::Identity {
        owner: ep.spec.owner.clone(),
        addresses: ep.spec.addresses.clone(),
        identity,
    };
    dataplane
        .expect_apply()
        .with(eq(push))
        .times(1)
        .in_sequence(seq)
        .returning(|_| Ok(UpdateOutcome::Ignored));
}

#[tokio::test]
async fn a_pod_seen_after_its_endpoint_fills_in_its_labels_and_its_namespaces() {
    let (mut reg, mut dp, mut seq) = (
        MockIdentityRegistry::new(),
        MockNodeUpdates::new(),
        Sequence::new(),
    );
    let ep = endpoint("c1", "ns", "web-1", Some("u1"));
    let other = endpoint("c2", "ns", "db-1", Some("u2"));
    let eps = vec![ep.clone(), other];
    reg.expect_endpoints()
        .times(1)
        .in_sequence(&mut seq)
        .return_once(move || Ok(eps));
    let id = PodIdentity {
        labels: labels(&[("app", "web")]),
        namespace_labels: labels(&[("team", "a")]),
    };
    expect_update(&mut reg, &mut dp, &mut seq, &ep, id);

    let mut t = IdentityTracker::new();
    // The namespace first: no endpoint's pod is known yet, nothing is written.
    let mut quiet = MockIdentityRegistry::new();
    quiet
        .expect_endpoints()
        .times(1)
        .return_once(|| Ok(vec![endpoint("c1", "ns", "web-1", Some("u1"))]));
    let none = MockNodeUpdates::new();
    let changed = t
        .handle(namespace("ns", &[("team", "a")]), &quiet, &none)
        .await
        .unwrap();
    assert!(changed.is_empty());

    let changed = t
        .handle(pod("ns", "web-1", "u1", &[("app", "web")]), &reg, &dp)
        .await
        .unwrap();
    assert_eq!(changed, vec![owner("c1")]);
}

#[tokio::test]
async fn a_label_change_updates_the_endpoint_and_a_repeat_changes_nothing() {
    let mut t = IdentityTracker::new();
    let first = PodIdentity {
        labels: labels(&[("app", "web")]),
        namespace_labels: Labels::new(),
    };
    let ep = with_identity(endpoint("c1", "ns", "web-1", None), &first);
    let (mut reg, mut dp, mut seq) = (
        MockIdentityRegistry::new(),
        MockNodeUpdates::new(),
        Sequence::new(),
    );
    // First sight of the pod: labels as recorded, no write.
    let eps = vec![ep.clone()];
    reg.expect_endpoints()
        .times(1)
        .in_sequence(&mut seq)
        .return_once(move || Ok(eps));
    // The relabel: one write, one push.
    let eps = vec![ep.clone()];
    reg.expect_endpoints()
        .times(1)
        .in_sequence(&mut seq)
        .return_once(move || Ok(eps));
    let second = PodIdentity {
        labels: labels(&[("app", "web"), ("tier", "front")]),
        namespace_labels: Labels::new(),
    };
    expect_update(&mut reg, &mut dp, &mut seq, &ep, second);

    assert!(
        t.handle(pod("ns", "web-1", "u1", &[("app", "web")]), &reg, &dp)
            .await
            .unwrap()
            .is_empty()
    );
    let relabel = pod("ns", "web-1", "u1", &[("app", "web"), ("tier", "front")]);
    let changed = t.handle(relabel.clone(), &reg, &dp).await.unwrap();
    assert_eq!(changed, vec![owner("c1")]);
    // The same object again (a resync of the watch): not even a read.
    assert!(t.handle(relabel, &reg, &dp).await.unwrap().is_empty());
}

#[tokio::test]
async fn an_endpoint_registered_after_its_pod_was_seen_gets_labels_at_once() {
    let mut t = IdentityTracker::new();
    let (mut reg, mut dp, mut seq) = (
        MockIdentityRegistry::new(),
        MockNodeUpdates::new(),
        Sequence::new(),
    );
    reg.expect_endpoints()
        .times(1)
        .in_sequence(&mut seq)
        .return_once(|| Ok(vec![]));
    let ep = endpoint("c1", "ns", "web-1", Some("u1"));
    let found = ep.clone();
    reg.expect_endpoint()
        .with(eq(owner("c1")))
        .times(1)
        .in_sequence(&mut seq)
        .return_once(move |_| Ok(Some(found)));
    let id = PodIdentity {
        labels: labels(&[("app", "web")]),
        namespace_labels: Labels::new(),
    };
    expect_update(&mut reg, &mut dp, &mut seq, &ep, id);

    t.handle(pod("ns", "web-1", "u1", &[("app", "web")]), &reg, &dp)
        .await
        .unwrap();
    let changed = t
        .handle(IdentityEvent::Registered(owner("c1")), &reg, &dp)
        .await
        .unwrap();
    assert_eq!(changed, vec![owner("c1")]);
}

#[tokio::test]
async fn a_namespace_relabel_reaches_every_known_pod_of_it_and_no_other() {
    let mut t = IdentityTracker::new();
    let web = endpoint("c1", "ns", "web-1", None);
    let db = endpoint("c2", "ns", "db-1", None);
    let elsewhere = endpoint("c3", "other", "web-1", None);
    let unknown = endpoint("c4", "ns", "not-seen", None);
    let (mut reg, mut dp, mut seq) = (
        MockIdentityRegistry::new(),
        MockNodeUpdates::new(),
        Sequence::new(),
    );
    // Two pods seen while no endpoint is registered.
    reg.expect_endpoints()
        .times(2)
        .in_sequence(&mut seq)
        .returning(|| Ok(vec![]));
    let all = vec![web.clone(), db.clone(), elsewhere, unknown];
    reg.expect_endpoints()
        .times(1)
        .in_sequence(&mut seq)
        .return_once(move || Ok(all));
    let ns_labels = labels(&[("env", "prod")]);
    for (ep, app) in [(&web, "web"), (&db, "db")] {
        let id = PodIdentity {
            labels: labels(&[("app", app)]),
            namespace_labels: ns_labels.clone(),
        };
        expect_update(&mut reg, &mut dp, &mut seq, ep, id);
    }
    for e in [
        pod("ns", "db-1", "", &[("app", "db")]),
        pod("ns", "web-1", "", &[("app", "web")]),
    ] {
        t.handle(e, &reg, &dp).await.unwrap();
    }
    let changed = t
        .handle(namespace("ns", &[("env", "prod")]), &reg, &dp)
        .await
        .unwrap();
    assert_eq!(changed.len(), 2);
}

#[tokio::test]
async fn another_pod_of_the_same_name_and_hostile_objects_change_nothing() {
    let mut t = IdentityTracker::new();
    let ep = endpoint("c1", "ns", "web-0", Some("old-uid"));
    let mut reg = MockIdentityRegistry::new();
    reg.expect_endpoints()
        .times(1)
        .return_once(move || Ok(vec![ep]));
    reg.expect_set_identity().never();
    let dp = MockNodeUpdates::new();
    // A StatefulSet pod recreated under the same name: another uid.
    let changed = t
        .handle(pod("ns", "web-0", "new-uid", &[("app", "web")]), &reg, &dp)
        .await
        .unwrap();
    assert!(changed.is_empty());
    // Names no API server would send: ignored before the registry is read.
    let long = "n".repeat(MAX_NAME_LEN + 1);
    for e in [
        pod(&long, "p", "", &[]),
        pod("ns", "", "", &[]),
        namespace(&long, &[]),
    ] {
        assert!(t.handle(e, &reg, &dp).await.unwrap().is_empty());
    }
}

#[tokio::test]
async fn a_resync_writes_what_is_stale_and_a_relist_forgets_old_pods() {
    let mut t = IdentityTracker::new();
    let ep = endpoint("c1", "ns", "web-1", None);
    let (mut reg, mut dp, mut seq) = (
        MockIdentityRegistry::new(),
        MockNodeUpdates::new(),
        Sequence::new(),
    );
    reg.expect_endpoints()
        .times(1)
        .in_sequence(&mut seq)
        .returning(|| Ok(vec![]));
    let eps = vec![ep.clone()];
    reg.expect_endpoints()
        .times(1)
        .in_sequence(&mut seq)
        .return_once(move || Ok(eps));
    let id = PodIdentity {
        labels: labels(&[("app", "web")]),
        namespace_labels: Labels::new(),
    };
    expect_update(&mut reg, &mut dp, &mut seq, &ep, id);
    // After a relist without the pod, a resync has nothing to fill in.
    let eps = vec![ep.clone()];
    reg.expect_endpoints()
        .times(1)
        .in_sequence(&mut seq)
        .return_once(move || Ok(eps));

    t.handle(pod("ns", "web-1", "", &[("app", "web")]), &reg, &dp)
        .await
        .unwrap();
    let changed = t.handle(IdentityEvent::Resync, &reg, &dp).await.unwrap();
    assert_eq!(changed, vec![owner("c1")]);
    t.handle(IdentityEvent::PodsRelisted, &reg, &dp)
        .await
        .unwrap();
    assert!(
        t.handle(IdentityEvent::Resync, &reg, &dp)
            .await
            .unwrap()
            .is_empty()
    );
}
