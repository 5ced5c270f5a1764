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

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ebpf::policy::{connects, pod, v4, v6};
use sarena_core::api::PodRef;
use sarena_core::dataplane::kernel::KernelNames;
use sarena_core::dataplane::{
    Dataplane, KernelDataplane, NodeNetwork, NodeUpdate, NodeUpdates, UpdateOutcome,
};
use sarena_core::links::RtnetlinkLinks;
use sarena_core::policy::{
    Kind, LabelSelector, Peer, Policy, PolicyEngine, PolicyEvent, PolicyNamespace, PolicyPod,
    PortRef, PortSpec, Protocol, Rule,
};
use sarena_test_support::{HostStack, Pod, SysctlGuard, in_netns, require_root, run, succeeds};

const NODE: &str = "node-a";

fn labels(app: &str) -> BTreeMap<String, String> {
    BTreeMap::from([("app".to_string(), app.to_string())])
}

fn selector(app: &str) -> LabelSelector {
    LabelSelector {
        match_labels: labels(app),
        match_expressions: Vec::new(),
    }
}

/// Names `pod` `shop/name` (before it is attached) and describes it to the engine.
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

fn tcp(port: u16) -> PortSpec {
    PortSpec {
        protocol: Protocol::Tcp,
        port: Some(PortRef::Number(port)),
        end_port: None,
    }
}

/// "Only app=web may reach app=db, on TCP 8080."
fn db_ingress() -> Policy {
    Policy {
        namespace: "shop".into(),
        name: "db-from-web".into(),
        pod_selector: selector("db"),
        ingress_isolation: true,
        egress_isolation: false,
        ingress: vec![Rule {
            peers: vec![Peer::Pods {
                pods: Some(selector("web")),
                namespaces: None,
            }],
            ports: vec![tcp(8080)],
        }],
        egress: Vec::new(),
    }
}

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

async fn apply(dp: &KernelDataplane, pods: &[PolicyPod], policies: &[Policy]) {
    let compiled = Arc::new(engine(pods, policies).compile());
    let outcome = dp.apply(&NodeUpdate::Policy(compiled)).await.unwrap();
    assert_eq!(outcome, UpdateOutcome::Applied);
}

/// Whether the host (this netns) completes a TCP exchange with `to` on `addr`:`port`.
fn host_connects(to: &Pod, addr: IpAddr, port: u16) -> bool {
    let (tx, rx) = std::sync::mpsc::channel();
    let server = in_netns(&to.netns.path(), move || {
        let listener = TcpListener::bind(SocketAddr::new(addr, port)).unwrap();
        listener.set_nonblocking(true).unwrap();
        tx.send(()).unwrap();
        let deadline = Instant::now() + Duration::from_secs(3);
        while Instant::now() < deadline {
            if let Ok((mut conn, _)) = listener.accept() {
                conn.set_nonblocking(false).unwrap();
                let mut b = [0u8; 1];
                if conn.read_exact(&mut b).is_ok() {
                    let _ = conn.write_all(&b);
                }
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    });
    rx.recv_timeout(Duration::from_secs(5)).unwrap();
    let target = SocketAddr::new(addr, port);
    let ok = TcpStream::connect_timeout(&target, Duration::from_millis(1500)).is_ok_and(|mut c| {
        c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut b = [0x5au8; 1];
        c.write_all(&b).is_ok() && c.read_exact(&mut b).is_ok()
    });
    server.join().unwrap();
    ok
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
    assert!(connects(&other, &db, v4(&db), 8080));

    // Ingress: web on TCP 8080 only, both families.
    apply(dp, &pods, &[db_ingress()]).await;
    for addr in [v4(&db), v6(&db)] {
        assert!(connects(&web, &db, addr, 8080), "web -> db:8080 ({addr})");
        assert!(!connects(&web, &db, addr, 8081), "web -> db:8081 ({addr})");
        assert!(!connects(&other, &db, addr, 8080), "other -> db ({addr})");
    }
    assert!(denied(&node.names, "ingress_denied") >= 4);
    // Replies of db's own connections, and the node (kubelet probes), pass.
    assert!(
        connects(&db, &web, v4(&web), 9000),
        "db -> web and its reply"
    );
    assert!(host_connects(&db, v4(&db), 8081), "host -> db");

    // Egress: web reaches db only.
    apply(dp, &pods, &[db_ingress(), web_egress()]).await;
    assert!(connects(&web, &db, v4(&db), 8080));
    assert!(!connects(&web, &other, v4(&other), 9000), "web -> other");
    assert!(
        !connects(&web, &other, v6(&other), 9000),
        "web -> other (IPv6)"
    );
    assert!(denied(&node.names, "egress_denied") >= 2);
    assert!(
        connects(&other, &web, v4(&web), 9000),
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
    apply(&restarted, &pods, &[db_ingress(), web_egress()]).await;
    assert!(connects(&late, &db, v4(&db), 8080), "late -> db");
    assert!(
        connects(&other, &late, v4(&late), 9000),
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
    assert!(connects(&late, &other, v4(&other), 9000));
}
