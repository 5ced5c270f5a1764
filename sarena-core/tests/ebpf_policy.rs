//! NetworkPolicy enforcement by the eBPF programs, against the real kernel:
//! pods in throwaway netns, the maps filled through
//! [`AyaDataplane::policy_maps`] and the isolation bits set with
//! [`AyaDataplane::set_isolation`]. No host route to the pods exists (but
//! where a test adds one), so pod ↔ pod traffic goes through the programs
//! alone; every denial is checked to be the programs' by lifting the
//! isolation and seeing the same connection succeed.
//!
//! Privileged (root and the eBPF object): `#[ignore]`d unless included.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod ebpf;

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use ebpf::TestDataplane;
use ebpf::policy::*;
use sarena_core::dataplane::ebpf::DropReason;
use sarena_core::links::RtnetlinkLinks;
use sarena_core::policy::{Direction, EntryKey, IpcacheEntry, RuleId};
use sarena_test_support::{Pod, in_netns, run, succeeds};

#[tokio::test]
#[ignore = "privileged: needs root and the eBPF object; run as root with --include-ignored (scripts/test.sh)"]
async fn ingress_on_the_redirect_path_is_allowed_by_port_and_identity() {
    let t = TestDataplane::open("ingress_on_the_redirect_path_is_allowed_by_port_and_identity");
    let links = RtnetlinkLinks::new().unwrap();
    let (a, b, c) = (
        pod(&links, 2).await,
        pod(&links, 3).await,
        pod(&links, 4).await,
    );
    t.attach(&[&a, &b, &c]).await;
    identify(&t.dp, &a, ID_A);
    identify(&t.dp, &b, ID_B);
    identify(&t.dp, &c, ID_C);
    allow_tcp(&t.dp, &b, Direction::Ingress, ID_A, 8080);
    isolate(&t.dp, &b, true, false);

    assert!(
        connects(&a, &b, v4(&b), 8080),
        "a → b:8080 is allowed: {:?} {:?} {:?}",
        t.counters(&a),
        t.counters(&b),
        t.dp.policy_maps(|m| (m.entries(), m.ipcache()))
    );
    assert!(!connects(&a, &b, v4(&b), 8081), "a → b:8081 is not");
    assert!(!connects(&c, &b, v4(&b), 8080), "c is not a");
    assert!(!a.ping(&b, 1), "ICMP is not allowed");
    assert!(drops(&t, &b, DropReason::PolicyDeniedIngress) >= 3);
    assert_eq!(drops(&t, &a, DropReason::PolicyDeniedIngress), 0);
    assert_eq!(drops(&t, &c, DropReason::PolicyDeniedIngress), 0);
    // c is not isolated: anyone reaches it on any port.
    assert!(connects(&a, &c, v4(&c), 8081));
    assert!(connects(&b, &c, v4(&c), 9000));
    assert!(a.ping(&c, 1));
    let redirected = t.counters(&a).redirected_packets;
    assert!(redirected > 0, "the redirect path was taken");

    // The same connections succeed once b is no longer isolated: the
    // denials above were the programs'.
    isolate(&t.dp, &b, false, false);
    assert!(connects(&a, &b, v4(&b), 8081));
    assert!(connects(&c, &b, v4(&b), 8080));

    // Any peer on the port.
    isolate(&t.dp, &b, true, false);
    assert!(!connects(&c, &b, v4(&b), 8080));
    allow_tcp(&t.dp, &b, Direction::Ingress, 0, 8080);
    assert!(connects(&c, &b, v4(&b), 8080));
}

/// Pods a and b (identities [`ID_A`], [`ID_B`]), both isolated both ways:
/// the client a may only send to b:8080 and receives nothing unasked; the
/// server b may receive a's connections on 8080 and sends nothing unasked.
async fn client_and_server(t: &TestDataplane) -> (Pod, Pod) {
    let links = RtnetlinkLinks::new().unwrap();
    let (a, b) = (pod(&links, 2).await, pod(&links, 3).await);
    t.attach(&[&a, &b]).await;
    identify(&t.dp, &a, ID_A);
    identify(&t.dp, &b, ID_B);
    allow_tcp(&t.dp, &a, Direction::Egress, ID_B, 8080);
    allow_tcp(&t.dp, &b, Direction::Ingress, ID_A, 8080);
    isolate(&t.dp, &a, true, true);
    isolate(&t.dp, &b, true, true);
    (a, b)
}

#[tokio::test]
#[ignore = "privileged: needs root and the eBPF object; run as root with --include-ignored (scripts/test.sh)"]
async fn replies_pass_both_isolated_ends_and_egress_is_denied_on_the_sender() {
    let t =
        TestDataplane::open("replies_pass_both_isolated_ends_and_egress_is_denied_on_the_sender");
    let (a, b) = client_and_server(&t).await;

    assert!(connects(&a, &b, v4(&b), 8080), "replies pass both ends");
    let answers =
        t.dp.policy_maps(|m| m.answerable_flows(a.endpoint.spec.host_ifindex))
            .unwrap()
            .unwrap();
    assert!(!answers.is_empty(), "a recorded the answer direction");

    assert!(
        !connects(&a, &b, v4(&b), 9090),
        "a's egress to 9090 is denied"
    );
    assert!(drops(&t, &a, DropReason::PolicyDeniedEgress) >= 1);
    assert!(!connects(&b, &a, v4(&a), 8080), "b's egress is denied");
    assert!(drops(&t, &b, DropReason::PolicyDeniedEgress) >= 1);
    assert_eq!(drops(&t, &a, DropReason::PolicyDeniedIngress), 0);
    // (b's ingress never saw the denied packets: they died on a's egress.)
    assert_eq!(drops(&t, &b, DropReason::PolicyDeniedIngress), 0);

    isolate(&t.dp, &a, false, false);
    isolate(&t.dp, &b, false, false);
    assert!(
        connects(&b, &a, v4(&a), 8080),
        "without isolation b reaches a"
    );
}

#[tokio::test]
#[ignore = "privileged: needs root and the eBPF object; run as root with --include-ignored (scripts/test.sh)"]
async fn ipv6_is_enforced_like_ipv4() {
    let t = TestDataplane::open("ipv6_is_enforced_like_ipv4");
    let links = RtnetlinkLinks::new().unwrap();
    let (a, b) = (pod(&links, 2).await, pod(&links, 3).await);
    t.attach(&[&a, &b]).await;
    identify(&t.dp, &a, ID_A);
    identify(&t.dp, &b, ID_B);
    allow_tcp(&t.dp, &b, Direction::Ingress, ID_A, 8080);
    isolate(&t.dp, &b, true, false);
    // a is isolated for ingress only: b's answers still reach it.
    isolate(&t.dp, &a, true, false);

    assert!(
        connects(&a, &b, v6(&b), 8080),
        "{:?}\n{:?}",
        t.counters(&a),
        t.counters(&b)
    );
    assert!(!connects(&a, &b, v6(&b), 8081));
    assert!(!a.ping6(&b, 1));
    assert!(drops(&t, &b, DropReason::PolicyDeniedIngress) >= 2);
    assert!(t.counters(&a).ipv6_redirected_packets > 0);

    isolate(&t.dp, &b, false, false);
    assert!(
        connects(&a, &b, v6(&b), 8081),
        "the denial was the programs'"
    );
    assert!(!connects(&b, &a, v6(&a), 8081), "a's ingress is isolated");
    assert!(drops(&t, &a, DropReason::PolicyDeniedIngress) >= 1);
}

/// A host route to `pod` via its veth, and an address of the node on that
/// veth, which the node then uses as its source towards the pod. Both go
/// with the veth.
fn host_path(pod: &Pod, node_addr: &str) {
    assert!(succeeds(&[
        "ip",
        "addr",
        "add",
        &format!("{node_addr}/32"),
        "dev",
        pod.ifname()
    ]));
    assert!(succeeds(&[
        "ip",
        "route",
        "add",
        &format!("{}/32", pod.ip()),
        "dev",
        pod.ifname(),
        "src",
        node_addr,
    ]));
}

/// Whether the node (this netns) connects to `pod` on `port`.
fn node_connects(pod: &Pod, port: u16) -> bool {
    let (tx, rx) = std::sync::mpsc::channel();
    let addr = v4(pod);
    let server = in_netns(&pod.netns.path(), move || {
        let listener = TcpListener::bind(SocketAddr::new(addr, port)).unwrap();
        listener.set_nonblocking(true).unwrap();
        tx.send(()).unwrap();
        let deadline = Instant::now() + Duration::from_secs(3);
        while Instant::now() < deadline {
            if listener.accept().is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    });
    rx.recv_timeout(Duration::from_secs(5)).unwrap();
    let target = SocketAddr::new(addr, port);
    let ok = TcpStream::connect_timeout(&target, Duration::from_millis(1500)).is_ok();
    server.join().unwrap();
    ok
}

#[tokio::test]
#[ignore = "privileged: needs root and the eBPF object; run as root with --include-ignored (scripts/test.sh)"]
async fn the_host_stack_path_is_checked_and_the_node_is_allowed() {
    let t = TestDataplane::open("the_host_stack_path_is_checked_and_the_node_is_allowed");
    let links = RtnetlinkLinks::new().unwrap();
    let b = pod(&links, 3).await;
    t.attach(&[&b]).await;
    identify(&t.dp, &b, ID_B);
    // A node address unique to this run: 10.245.<x>.<y>.
    let n = std::process::id();
    let node_addr = format!("10.245.{}.{}", (n >> 8) & 0xff, (n & 0xfe) + 1);
    host_path(&b, &node_addr);
    assert!(node_connects(&b, 8080), "the host path works");
    isolate(&t.dp, &b, true, false);

    // Unknown to the ipcache, the node's address is the world's: denied
    // by to_container.
    assert!(!node_connects(&b, 8080));
    assert!(drops(&t, &b, DropReason::PolicyDeniedIngress) >= 1);
    assert_eq!(t.counters(&b).redirected_packets, 0);

    // As this node's own address, it is always allowed (kubelet's probes).
    t.dp.policy_maps(|m| {
        let entry = IpcacheEntry {
            identity: IDENTITY_HOST,
            flags: 1,
        };
        m.set_ipcache(format!("{node_addr}/32").parse().unwrap(), entry)
    })
    .unwrap();
    assert!(node_connects(&b, 8080));
    assert!(node_connects(&b, 9999));
    let listed = t.dp.policy_maps(|m| m.ipcache()).unwrap();
    assert!(listed.iter().any(|(p, e)| p.to_string() == format!("{node_addr}/32")
        && e.identity == IDENTITY_HOST));
    let _ = run(&["ip", "route", "del", &format!("{}/32", b.ip())]);
}

#[tokio::test]
#[ignore = "privileged: needs root and the eBPF object; run as root with --include-ignored (scripts/test.sh)"]
async fn entries_and_tables_are_listed_and_removed() {
    let t = TestDataplane::open("entries_and_tables_are_listed_and_removed");
    let links = RtnetlinkLinks::new().unwrap();
    let a = pod(&links, 2).await;
    t.attach(&[&a]).await;
    let ifindex = a.endpoint.spec.host_ifindex;
    let key = EntryKey {
        direction: Direction::Egress,
        peer: ID_B,
        proto: 17,
        port: 5300,
        port_bits: 12,
    };
    t.dp.policy_maps(|m| m.set_entry(ifindex, &key, RuleId(9)))
        .unwrap();
    let entries = t.dp.policy_maps(|m| m.entries()).unwrap();
    let stored = EntryKey { port: 5296, ..key };
    assert_eq!(entries, vec![(ifindex, stored, RuleId(9))]);
    t.dp.policy_maps(|m| m.remove_entry(ifindex, &key)).unwrap();
    t.dp.policy_maps(|m| m.remove_entry(ifindex, &key)).unwrap();
    assert!(t.dp.policy_maps(|m| m.entries()).unwrap().is_empty());
    let prefix: ipnet::IpNet = "fd00:246::/64".parse().unwrap();
    t.dp.policy_maps(|m| m.remove_ipcache(prefix)).unwrap();

    let table = t.dp.policy_maps(|m| m.answerable_flows(ifindex)).unwrap();
    assert_eq!(table, Some(Vec::new()), "attach made the table");
    use sarena_core::dataplane::Dataplane;
    t.dp.detach(&a.endpoint).await.unwrap();
    t.dp.wait_for_flow_table_removals();
    let table = t.dp.policy_maps(|m| m.answerable_flows(ifindex)).unwrap();
    assert_eq!(table, None, "detach removed it");
}

/// One TCP connection from `from` to `to`'s `addr`:`port`, exchanging a
/// byte each time `go` yields; the client reports each exchange's success.
/// Ends when `go` is dropped.
fn long_connection(
    from: &Pod,
    to: &Pod,
    addr: std::net::IpAddr,
    port: u16,
    go: std::sync::mpsc::Receiver<()>,
    done: std::sync::mpsc::Sender<bool>,
) -> (std::thread::JoinHandle<()>, std::thread::JoinHandle<()>) {
    use std::io::{Read, Write};
    let (ready, listening) = std::sync::mpsc::channel();
    let server = in_netns(&to.netns.path(), move || {
        let listener = TcpListener::bind(SocketAddr::new(addr, port)).unwrap();
        ready.send(()).unwrap();
        let (mut conn, _) = listener.accept().unwrap();
        conn.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut b = [0u8; 1];
        while conn.read_exact(&mut b).is_ok() && conn.write_all(&b).is_ok() {}
    });
    listening.recv_timeout(Duration::from_secs(5)).unwrap();
    let client = in_netns(&from.netns.path(), move || {
        let target = SocketAddr::new(addr, port);
        let mut conn = TcpStream::connect_timeout(&target, Duration::from_secs(2)).unwrap();
        conn.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        while go.recv().is_ok() {
            let mut b = [0x5au8; 1];
            let ok = conn.write_all(&b).is_ok() && conn.read_exact(&mut b).is_ok();
            done.send(ok).unwrap();
        }
    });
    (server, client)
}

#[tokio::test]
#[ignore = "privileged: needs root and the eBPF object; run as root with --include-ignored (scripts/test.sh)"]
async fn an_allowed_flow_keeps_going_after_its_rule_goes_and_new_ones_are_denied() {
    let t = TestDataplane::open(
        "an_allowed_flow_keeps_going_after_its_rule_goes_and_new_ones_are_denied",
    );
    let (a, b) = client_and_server(&t).await;

    let (go, wait) = std::sync::mpsc::channel();
    let (done, result) = std::sync::mpsc::channel();
    let (server, client) = long_connection(&a, &b, v4(&b), 8080, wait, done);
    go.send(()).unwrap();
    assert!(result.recv().unwrap(), "the first exchange is allowed");

    // Both rules go: the open flow passes on its recorded entries (both
    // directions, both ends), a new connection is judged and denied.
    for (pod, direction) in [(&a, Direction::Egress), (&b, Direction::Ingress)] {
        let key = EntryKey {
            direction,
            peer: if direction == Direction::Egress {
                ID_B
            } else {
                ID_A
            },
            proto: 6,
            port: 8080,
            port_bits: 16,
        };
        t.dp.policy_maps(|m| m.remove_entry(pod.endpoint.spec.host_ifindex, &key))
            .unwrap();
    }
    let before = drops(&t, &a, DropReason::PolicyDeniedEgress);
    for i in 0..3 {
        go.send(()).unwrap();
        assert!(result.recv().unwrap(), "exchange {i} of the open flow");
    }
    assert_eq!(drops(&t, &a, DropReason::PolicyDeniedEgress), before);
    drop(go);
    client.join().unwrap();
    server.join().unwrap();
    assert!(
        !connects(&a, &b, v4(&b), 8080),
        "a new flow to the same port is judged by the rules"
    );
    assert!(drops(&t, &a, DropReason::PolicyDeniedEgress) > before);
}
