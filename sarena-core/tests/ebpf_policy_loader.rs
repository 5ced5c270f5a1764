//! NetworkPolicy from the engine to the packets: pods, a namespace and
//! policies go into a real `PolicyEngine`, its compiled state into the
//! eBPF dataplane (`apply_policy`: identity translation, the plan's order,
//! isolation bits in the endpoint entries), and real connections tell what
//! passes. A dataplane opened again on the same pins (a daemon restart)
//! keeps enforcing before and after it takes a fresh engine's state.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod ebpf;

use std::collections::BTreeMap;
use std::sync::Arc;

use ebpf::TestDataplane;
use ebpf::policy::{connects, pod};
use sarena_core::api::PodRef;
use sarena_core::dataplane::Dataplane;
use sarena_core::dataplane::ebpf::{AyaDataplane, DropReason};
use sarena_core::links::RtnetlinkLinks;
use sarena_core::policy::{
    Kind, LabelSelector, Peer, Policy, PolicyEngine, PolicyEvent, PolicyNamespace, PolicyPod,
    PortRef, PortSpec, Protocol, Rule,
};
use sarena_test_support::Pod;

const NODE: &str = "node-a";

fn labels(app: &str) -> BTreeMap<String, String> {
    BTreeMap::from([("app".to_string(), app.to_string())])
}

/// Names `pod` `ns/name` (before it is attached) and describes it to the engine.
fn k8s_pod(pod: &mut Pod, name: &str, app: &str) -> PolicyPod {
    pod.endpoint.spec.pod = PodRef {
        namespace: Some("shop".into()),
        name: Some(name.into()),
        uid: None,
    };
    PolicyPod {
        namespace: "shop".into(),
        name: name.into(),
        labels: labels(app),
        ips: pod
            .endpoint
            .spec
            .addresses
            .iter()
            .map(|a| a.addr())
            .collect(),
        named_ports: Vec::new(),
        node: NODE.into(),
        host_network: false,
    }
}

/// "Only app=web may reach app=db, on TCP 8080."
fn db_policy() -> Policy {
    Policy {
        namespace: "shop".into(),
        name: "db-from-web".into(),
        pod_selector: LabelSelector {
            match_labels: labels("db"),
            match_expressions: Vec::new(),
        },
        ingress_isolation: true,
        egress_isolation: false,
        ingress: vec![Rule {
            peers: vec![Peer::Pods {
                pods: Some(LabelSelector {
                    match_labels: labels("web"),
                    match_expressions: Vec::new(),
                }),
                namespaces: None,
            }],
            ports: vec![PortSpec {
                protocol: Protocol::Tcp,
                port: Some(PortRef::Number(8080)),
                end_port: None,
            }],
        }],
        egress: Vec::new(),
    }
}

fn engine(pods: &[PolicyPod], policies: &[Policy]) -> PolicyEngine {
    let mut e = PolicyEngine::new(NODE, 256);
    for p in pods {
        e.handle(PolicyEvent::Pod(p.clone()));
    }
    e.handle(PolicyEvent::Namespace(PolicyNamespace {
        name: "shop".into(),
        labels: BTreeMap::new(),
    }));
    for p in policies {
        e.handle(PolicyEvent::Policy(p.clone()));
    }
    for kind in [Kind::Pods, Kind::Namespaces, Kind::Policies, Kind::Services] {
        e.handle(PolicyEvent::Listed(kind));
    }
    assert!(e.synced());
    e
}

fn apply(dp: &AyaDataplane, engine: &mut PolicyEngine) {
    let applied = dp.apply_policy(Arc::new(engine.compile()));
    assert_eq!(applied.failed, 0, "{applied:?}");
}

#[tokio::test]
#[ignore = "privileged: needs root and the eBPF object; run as root with --include-ignored (scripts/test.sh)"]
async fn the_engines_state_is_enforced_and_survives_a_restart() {
    let t = TestDataplane::open("the_engines_state_is_enforced_and_survives_a_restart");
    let links = RtnetlinkLinks::new().unwrap();
    let (mut web, mut db, mut other) = (
        pod(&links, 2).await,
        pod(&links, 3).await,
        pod(&links, 4).await,
    );
    let pods = [
        k8s_pod(&mut web, "web", "web"),
        k8s_pod(&mut db, "db", "db"),
        k8s_pod(&mut other, "other", "other"),
    ];
    t.attach(&[&web, &db, &other]).await;
    let db_addr = db.endpoint.spec.addresses[0].addr();

    // No policy yet: everyone reaches db.
    let mut e = engine(&pods, &[]);
    apply(&t.dp, &mut e);
    assert!(connects(&other, &db, db_addr, 8080));

    // The policy: web on 8080 only.
    let mut e = engine(&pods, &[db_policy()]);
    apply(&t.dp, &mut e);
    assert!(
        connects(&web, &db, db_addr, 8080),
        "web → db:8080 is allowed"
    );
    assert!(!connects(&web, &db, db_addr, 8081), "web → db:8081 is not");
    assert!(!connects(&other, &db, db_addr, 8080), "other → db is not");
    let denied = t.counters(&db).dropped(DropReason::PolicyDeniedIngress);
    assert!(denied >= 2, "the denials are counted on db: {denied}");
    // db's replies pass although nothing allows db → web.
    assert!(connects(
        &db,
        &web,
        web.endpoint.spec.addresses[0].addr(),
        9000
    ));

    // A restart: a new dataplane on the same pins enforces before the
    // engine speaks, and after a fresh engine's state (numbered anew).
    let reopened = t.reopen();
    reopened
        .reconcile(&[
            web.endpoint.clone(),
            db.endpoint.clone(),
            other.endpoint.clone(),
        ])
        .await
        .unwrap();
    assert!(
        !connects(&other, &db, db_addr, 8080),
        "still denied after the restart"
    );
    let mut fresh = engine(&pods, &[db_policy()]);
    apply(&reopened, &mut fresh);
    assert!(connects(&web, &db, db_addr, 8080));
    assert!(!connects(&other, &db, db_addr, 8080));

    // The policy goes: db is open again.
    let mut none = engine(&pods, &[]);
    apply(&reopened, &mut none);
    assert!(connects(&other, &db, db_addr, 8080));
    assert!(connects(&web, &db, db_addr, 8081));
}
