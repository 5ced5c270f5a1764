//! NetworkPolicy on the kernel dataplane, from the engine to the packets:
//! pods and policies go into a real `PolicyEngine`, its compiled state
//! into the kernel dataplane (the nftables policy table), and real
//! connections over both families tell what passes. A second dataplane on
//! the same table (a daemon restart) keeps enforcing before its engine
//! speaks, and fails closed for a pod attached meanwhile.
//!
//! Privileged (root): `#[ignore]`d unless included.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod ebpf;

use std::net::IpAddr;
use std::sync::Arc;

use ebpf::policy::{connects, host_connects, pod, v4, v6};
use ebpf::shop::{db_policy, engine, k8s_pod, selector};
use sarena_core::dataplane::kernel::KernelNames;
use sarena_core::dataplane::{
    Dataplane, KernelDataplane, NodeNetwork, NodeUpdate, NodeUpdates, UpdateOutcome,
};
use sarena_core::links::RtnetlinkLinks;
use sarena_core::policy::{Peer, Policy, PolicyPod, Rule};
use sarena_test_support::{HostStack, Pod, SysctlGuard, require_root, run, succeeds};

/// "app=web may only reach app=db (any port)."
fn web_egress() -> Policy {
    Policy {
        namespace: "shop".into(),
        name: "web-to-db".into(),
        pod_selector: selector("web"),
        ingress_isolation: false,
        egress_isolation: true,
        ingress: Vec::new(),
        egress: vec![Rule {
            peers: vec![Peer::Pods {
                pods: Some(selector("db")),
                namespaces: None,
            }],
            ports: Vec::new(),
        }],
    }
}

/// An allowed connection: [`connects`] tried twice, so a first SYN lost
/// while the pod resolves its gateway (proxy ARP answers after a random
/// delay) on a loaded machine does not decide it. Denials stay one try.
fn reaches(from: &Pod, to: &Pod, addr: IpAddr, port: u16) -> bool {
    (0..2).any(|_| connects(from, to, addr, port))
}

async fn apply(dp: &KernelDataplane, pods: &[PolicyPod], policies: &[Policy]) {
    let compiled = Arc::new(engine(pods, policies).compile());
    let outcome = dp.apply(&NodeUpdate::Policy(compiled)).await.unwrap();
    assert_eq!(outcome, UpdateOutcome::Applied);
}

/// The packets the `counter` of the policy table has dropped.
fn denied(names: &KernelNames, counter: &str) -> u64 {
    let table = format!("{}_policy", names.nft_table);
    let text = run(&["nft", "list", "counter", "inet", &table, counter]);
    let after = text.split("packets ").nth(1).unwrap();
    after.split(' ').next().unwrap().parse().unwrap()
}

fn network() -> NodeNetwork {
    NodeNetwork {
        gateways: vec![
            "10.246.0.1".parse().unwrap(),
            "fd00:246::1".parse().unwrap(),
        ],
        pools: vec![
            "10.246.0.0/24".parse().unwrap(),
            "fd00:246::/64".parse().unwrap(),
        ],
        masquerade: false,
        exempt: Vec::new(),
    }
}

#[tokio::test]
#[ignore = "privileged: needs root; run as root with --include-ignored (scripts/test.sh)"]
async fn the_kernel_dataplane_enforces_the_engines_policy_through_a_restart() {
    require_root("the_kernel_dataplane_enforces_the_engines_policy_through_a_restart");
    let _forwarding = SysctlGuard::save("net/ipv6/conf/all/forwarding");
    let links = RtnetlinkLinks::new().unwrap();
    let node = HostStack::new();
    let dp = &node.dataplane;
    dp.setup(&network()).await.unwrap();
    let (mut web, mut db, mut other) = (
        pod(&links, 2).await,
        pod(&links, 3).await,
        pod(&links, 4).await,
    );
    let mut pods = vec![
        k8s_pod(&mut web, "web", "web"),
        k8s_pod(&mut db, "db", "db"),
        k8s_pod(&mut other, "other", "other"),
    ];
    for p in [&web, &db, &other] {
        dp.attach(&p.endpoint).await.unwrap();
    }
    let table = format!("{}_policy", node.names.nft_table);

    // No policy: no table, everyone connects.
    apply(dp, &pods, &[]).await;
    assert!(!succeeds(&["nft", "list", "table", "inet", &table]));
    assert!(reaches(&other, &db, v4(&db), 8080));

    // Ingress: web on TCP 8080 only, both families.
    apply(dp, &pods, &[db_policy()]).await;
    for addr in [v4(&db), v6(&db)] {
        assert!(reaches(&web, &db, addr, 8080), "web -> db:8080 ({addr})");
        assert!(!connects(&web, &db, addr, 8081), "web -> db:8081 ({addr})");
        assert!(!connects(&other, &db, addr, 8080), "other -> db ({addr})");
    }
    assert!(denied(&node.names, "ingress_denied") >= 4);
    // Replies of db's own connections, and the node (kubelet probes), pass.
    assert!(
        reaches(&db, &web, v4(&web), 9000),
        "db -> web and its reply"
    );
    assert!(host_connects(&db, v4(&db), 8081), "host -> db");

    // Egress: web reaches db only.
    apply(dp, &pods, &[db_policy(), web_egress()]).await;
    assert!(reaches(&web, &db, v4(&db), 8080));
    assert!(!connects(&web, &other, v4(&other), 9000), "web -> other");
    assert!(
        !connects(&web, &other, v6(&other), 9000),
        "web -> other (IPv6)"
    );
    assert!(denied(&node.names, "egress_denied") >= 2);
    assert!(
        reaches(&other, &web, v4(&web), 9000),
        "web's ingress is open"
    );

    // A restart: a dataplane on the same objects enforces before its
    // engine speaks, and a pod attached meanwhile is isolated both ways.
    let restarted = KernelDataplane::with_names(node.names.clone()).unwrap();
    restarted.setup(&network()).await.unwrap();
    restarted
        .reconcile(&[
            web.endpoint.clone(),
            db.endpoint.clone(),
            other.endpoint.clone(),
        ])
        .await
        .unwrap();
    assert!(!connects(&other, &db, v4(&db), 8080), "after the restart");
    let mut late = pod(&links, 5).await;
    pods.push(k8s_pod(&mut late, "late", "web"));
    restarted.attach(&late.endpoint).await.unwrap();
    assert!(
        !connects(&late, &other, v4(&other), 9000),
        "late: egress closed"
    );
    assert!(
        !connects(&other, &late, v4(&late), 9000),
        "late: ingress closed"
    );

    // The engine's state: late is a web pod.
    apply(&restarted, &pods, &[db_policy(), web_egress()]).await;
    assert!(reaches(&late, &db, v4(&db), 8080), "late -> db");
    assert!(
        reaches(&other, &late, v4(&late), 9000),
        "late's ingress is open"
    );
    assert!(!connects(&late, &other, v4(&other), 9000));

    // Detached, db's entries go with it; the policies go: the table goes.
    restarted.detach(&db.endpoint).await.unwrap();
    let listed = run(&["nft", "list", "set", "inet", &table, "in4"]);
    assert!(
        !listed.contains(&format!("{} .", db.endpoint.spec.host_ifindex)),
        "{listed}"
    );
    apply(&restarted, &pods, &[]).await;
    assert!(!succeeds(&["nft", "list", "table", "inet", &table]));
    assert!(reaches(&late, &other, v4(&other), 9000));
}
