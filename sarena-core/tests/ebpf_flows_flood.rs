//! One pod's flood of host-stack flows against another pod's idle Service
//! flow, on the real kernel: the programs attached to three pods' veths, the
//! kernel dataplane as host stack (routes), and a Service in kube-proxy's
//! shape (DNAT in prerouting, in an nftables table of the test's).
//!
//! Pod c holds an idle TCP connection to the Service, served by pod b; pod a
//! then starts more TCP flows through a Service of its own than the whole
//! node-wide flows map of generation 2 held (65,536), each recorded by
//! `to_container`. b's next segment on the idle connection must still go
//! through the host stack (which un-DNATs it), not the redirect (which would
//! deliver it un-NATed, and c would reset the connection).
//!
//! Privileged (root and the eBPF object): `#[ignore]`d unless included.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod ebpf;

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use ebpf::NftTable;
use sarena_common::{FlowKey, MAX_HOST_FLOWS_PER_ENDPOINT};
use sarena_core::dataplane::ebpf::AyaDataplane;
use sarena_core::dataplane::{Dataplane, KernelDataplane, NodeNetwork};
use sarena_core::links::RtnetlinkLinks;
use sarena_test_support::{HostStack, PinDir, Pod, in_netns, require_ebpf_object, require_root};

/// The pods' gateway (`10.237.0.0/24`).
const GATEWAY: &str = "10.237.0.1";
/// The victim's Service (TCP 80 → b:80).
const SERVICE: Ipv4Addr = Ipv4Addr::new(10, 237, 255, 10);
/// The flooder's Service (every TCP port → b, port kept).
const FLOOD_SERVICE: Ipv4Addr = Ipv4Addr::new(10, 237, 255, 11);
/// More flows than generation 2's node-wide map held.
const FLOOD_FLOWS: u64 = 200_000;

/// [`FLOOD_FLOWS`] TCP connection attempts from `a` to ports of
/// [`FLOOD_SERVICE`] other than 80 (b listens on none of them): each a new
/// flow, and b's reset to each one is looked up in the flows map like any
/// answer (so the flood's entries are as recently used as the victim's).
/// Non-blocking connects, each socket closed at once; sent in bursts with a
/// pause, so the host veth's backlog takes them all.
fn flood(a: &Pod) {
    in_netns(&a.netns.path(), || {
        let ports = (1..=u16::MAX).filter(|p| *p != 80).cycle();
        for (n, port) in ports.take(FLOOD_FLOWS as usize).enumerate() {
            let addr = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: port.to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from(FLOOD_SERVICE).to_be(),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: plain socket calls with a valid address; the fd is
            // closed right away (the SYN is out: connect returned).
            unsafe {
                let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_NONBLOCK, 0);
                assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
                libc::connect(
                    fd,
                    (&raw const addr).cast(),
                    std::mem::size_of::<libc::sockaddr_in>() as u32,
                );
                libc::close(fd);
            }
            if n % 256 == 255 {
                std::thread::sleep(Duration::from_micros(500));
            }
        }
    })
    .join()
    .unwrap();
}

#[tokio::test]
#[ignore = "privileged: needs root and the eBPF object; run as root with --include-ignored (scripts/test.sh)"]
async fn a_pods_flood_of_host_stack_flows_leaves_other_pods_flows_alone() {
    let test = "a_pods_flood_of_host_stack_flows_leaves_other_pods_flows_alone";
    require_root(test);
    let object = require_ebpf_object(test);
    let pins = PinDir::new();
    let host = HostStack::new();
    let links = RtnetlinkLinks::new().unwrap();
    let kernel = KernelDataplane::with_names(host.names.clone()).unwrap();
    let dp = AyaDataplane::open(&object, &pins.0)
        .unwrap()
        .with_host_stack(Arc::new(kernel));
    dp.setup(&NodeNetwork {
        gateways: vec![GATEWAY.parse().unwrap()],
        pools: vec!["10.237.0.0/24".parse().unwrap()],
        masquerade: false,
        exempt: Vec::new(),
    })
    .await
    .unwrap();
    let a = Pod::in_subnet(&links, GATEWAY, 2).await;
    let b = Pod::in_subnet(&links, GATEWAY, 3).await;
    let c = Pod::in_subnet(&links, GATEWAY, 4).await;
    for pod in [&a, &b, &c] {
        dp.attach(&pod.endpoint).await.unwrap();
    }
    let b_ip = b.ip();
    let _services = NftTable::load(
        "ip",
        &format!(
            "chain pre {{\n type nat hook prerouting priority dstnat; policy accept;\n \
             ip daddr {SERVICE} tcp dport 80 dnat to {b_ip}\n \
             ip daddr {FLOOD_SERVICE} meta l4proto tcp dnat to {b_ip}\n}}\n"
        ),
    );

    // c's connection through the Service, served by b, then idle.
    let (write_tx, write_rx) = mpsc::channel::<()>();
    let (peer_tx, peer_rx) = mpsc::channel::<SocketAddr>();
    let server = in_netns(&b.netns.path(), move || {
        let listener = TcpListener::bind((b_ip, 80)).unwrap();
        let (mut conn, peer) = listener.accept().unwrap();
        let mut hello = [0u8; 5];
        conn.read_exact(&mut hello).unwrap();
        conn.write_all(b"hello").unwrap();
        peer_tx.send(peer).unwrap();
        write_rx.recv().unwrap();
        // The next segment, after the flood.
        conn.write_all(b"again").is_ok()
    });
    let (read_tx, read_rx) = mpsc::channel::<()>();
    let client = in_netns(&c.netns.path(), move || {
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut conn = loop {
            match TcpStream::connect_timeout(
                &SocketAddr::from((SERVICE, 80)),
                Duration::from_secs(1),
            ) {
                Ok(conn) => break conn,
                Err(e) if Instant::now() > deadline => panic!("connect: {e}"),
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        };
        conn.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        conn.write_all(b"hello").unwrap();
        let mut answer = [0u8; 5];
        conn.read_exact(&mut answer).unwrap();
        read_rx.recv().unwrap();
        let mut again = [0u8; 5];
        conn.read_exact(&mut again).map(|()| again)
    });

    // Wait until the exchange is done (b's answer recorded the flow).
    let deadline = Instant::now() + Duration::from_secs(5);
    while dp
        .counters(b.endpoint.spec.host_ifindex)
        .unwrap()
        .unwrap()
        .host_stack_flow_packets
        < 2
    {
        assert!(
            Instant::now() < deadline,
            "b never answered through the host stack"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    // The flow is c's (c started it): in c's table, in the direction b
    // answers in.
    let SocketAddr::V4(peer) = peer_rx.recv_timeout(Duration::from_secs(5)).unwrap() else {
        panic!("an IPv4 peer");
    };
    let victim = FlowKey::ipv4(
        b_ip.octets(),
        peer.ip().octets(),
        80u16.to_be_bytes(),
        peer.port().to_be_bytes(),
        6,
    );
    let in_table = |pod: &Pod| {
        dp.host_flows(pod.endpoint.spec.host_ifindex)
            .unwrap()
            .unwrap()
    };
    assert!(
        in_table(&c).iter().any(|(k, _)| *k == victim),
        "c's Service flow is in c's table: {:?}",
        in_table(&c)
    );

    let recorded_before = dp.counters(b.endpoint.spec.host_ifindex).unwrap().unwrap();
    let started = Instant::now();
    flood(&a);
    let took = started.elapsed();
    let after_flood = dp.counters(b.endpoint.spec.host_ifindex).unwrap().unwrap();
    let recorded = after_flood.host_flows_recorded - recorded_before.host_flows_recorded;
    eprintln!("flood: {recorded} new flows recorded in {took:?}");
    assert!(
        recorded > 65_536 && recorded <= FLOOD_FLOWS,
        "the flood recorded {recorded} flows"
    );

    // The flood stayed in a's own table, which evicted a's own flows.
    let flooder = dp.counters(a.endpoint.spec.host_ifindex).unwrap().unwrap();
    assert_eq!(flooder.host_flows_started, recorded, "{flooder:?}");
    let a_table = in_table(&a).len();
    assert!(
        a_table <= MAX_HOST_FLOWS_PER_ENDPOINT as usize,
        "a's table holds {a_table} entries"
    );
    assert!(
        in_table(&c).iter().any(|(k, _)| *k == victim),
        "c's Service flow was evicted by a's flood"
    );
    assert!(in_table(&b).is_empty(), "b started no flow");

    // b's next segment on the idle connection.
    write_tx.send(()).unwrap();
    read_tx.send(()).unwrap();
    let written = server.join().unwrap();
    let read = client.join().unwrap();
    let after = dp.counters(b.endpoint.spec.host_ifindex).unwrap().unwrap();
    assert!(written, "b could not write to c ({peer})");
    assert_eq!(
        read.as_ref().ok(),
        Some(b"again"),
        "c did not get b's segment through the Service: {read:?}; b's counters {after:?}"
    );
    assert_eq!(
        after.redirected_packets, after_flood.redirected_packets,
        "b's segment was redirected (un-NATed): {after:?}"
    );
    assert!(
        after.host_stack_flow_packets > after_flood.host_stack_flow_packets,
        "b's segment went through the host stack: {after:?}"
    );
}
