//! NetworkPolicy from the engine to the packets: pods, a namespace and
//! policies go into a real `PolicyEngine`, its compiled state into the
//! eBPF dataplane (`apply_policy`: identity translation, the plan's order,
//! isolation bits in the endpoint entries), and real connections tell what
//! passes. A dataplane opened again on the same pins (a daemon restart)
//! keeps enforcing before and after it takes a fresh engine's state.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod ebpf;

use std::sync::Arc;

use ebpf::TestDataplane;
use ebpf::policy::{connects, pod};
use ebpf::shop::{db_policy, engine, k8s_pod};
use sarena_core::dataplane::Dataplane;
use sarena_core::dataplane::ebpf::{AyaDataplane, DropReason};
use sarena_core::links::RtnetlinkLinks;
use sarena_core::policy::PolicyEngine;

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
