//! The real UDP and TCP servers on 127.0.0.1 over a fixed view, queried
//! with hickory-proto messages.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use hickory_proto::op::{Edns, Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::{Name, RecordType};
use sarena_test_dns::records::Zone;
use sarena_test_dns::server::{self, Resolver};
use sarena_test_dns::view::{Endpoint, Key, Service, ServiceKind, View};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};
use tokio::time::timeout;

const WAIT: Duration = Duration::from_secs(5);

fn view() -> View {
    let mut v = View::default();
    let web = Service {
        kind: ServiceKind::ClusterIp(vec!["10.96.0.20".parse().unwrap()]),
        ports: vec![],
        publish_not_ready: false,
    };
    v.services.insert(Key::new("default", "web"), web);
    let big = Service {
        kind: ServiceKind::Headless,
        ports: vec![],
        publish_not_ready: false,
    };
    v.services.insert(Key::new("default", "big"), big);
    let endpoints = (0..100u8)
        .map(|i| Endpoint {
            ip: IpAddr::from([10, 244, 1, i]),
            hostname: None,
            ready: true,
            ports: vec![],
        })
        .collect();
    v.endpoints.insert(Key::new("default", "big"), endpoints);
    v
}

async fn start() -> SocketAddr {
    let (udp, tcp) = server::bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let udp_addr = udp.local_addr().unwrap();
    // Same port for both, as a real deployment: rebind TCP on UDP's port.
    drop(tcp);
    let tcp = tokio::net::TcpListener::bind(udp_addr).await.unwrap();
    let zone = Zone {
        origin: Name::from_ascii("cluster.local.").unwrap(),
        ttl: 5,
        serial: 1,
    };
    let resolver = Arc::new(Resolver::new(Arc::new(RwLock::new(view())), zone));
    tokio::spawn(server::serve_udp(udp, Arc::clone(&resolver)));
    tokio::spawn(server::serve_tcp(tcp, resolver));
    udp_addr
}

fn query(id: u16, name: &str, qtype: RecordType, edns: Option<u16>) -> Vec<u8> {
    let mut m = Message::new(id, MessageType::Query, OpCode::Query);
    m.metadata.recursion_desired = true;
    m.add_query(Query::query(Name::from_ascii(name).unwrap(), qtype));
    if let Some(size) = edns {
        let mut e = Edns::new();
        e.set_max_payload(size);
        m.set_edns(e);
    }
    m.to_vec().unwrap()
}

async fn udp_exchange(server: SocketAddr, packet: &[u8]) -> Message {
    let sock = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    sock.send_to(packet, server).await.unwrap();
    let mut buf = vec![0u8; 65535];
    let (n, _) = timeout(WAIT, sock.recv_from(&mut buf))
        .await
        .unwrap()
        .unwrap();
    Message::from_vec(&buf[..n]).unwrap()
}

async fn tcp_exchange(stream: &mut TcpStream, packet: &[u8]) -> Message {
    let len = u16::try_from(packet.len()).unwrap();
    stream.write_all(&len.to_be_bytes()).await.unwrap();
    stream.write_all(packet).await.unwrap();
    let len = timeout(WAIT, stream.read_u16()).await.unwrap().unwrap();
    let mut buf = vec![0u8; usize::from(len)];
    stream.read_exact(&mut buf).await.unwrap();
    Message::from_vec(&buf).unwrap()
}

fn addresses(m: &Message) -> Vec<String> {
    m.answers.iter().map(|r| r.data.to_string()).collect()
}

#[tokio::test]
async fn udp_answers_authoritatively_and_echoes_edns() {
    let server = start().await;
    let r = udp_exchange(
        server,
        &query(7, "Web.Default.svc.cluster.local.", RecordType::A, None),
    )
    .await;
    assert_eq!(r.metadata.id, 7);
    assert_eq!(r.metadata.message_type, MessageType::Response);
    assert!(r.metadata.authoritative && r.metadata.recursion_desired);
    assert!(!r.metadata.truncation);
    assert_eq!(r.metadata.response_code, ResponseCode::NoError);
    assert_eq!(addresses(&r), ["10.96.0.20"]);
    assert!(r.edns.is_none());

    let r = udp_exchange(
        server,
        &query(
            8,
            "nope.default.svc.cluster.local.",
            RecordType::A,
            Some(4096),
        ),
    )
    .await;
    assert_eq!(r.metadata.response_code, ResponseCode::NXDomain);
    assert_eq!(r.authorities[0].record_type(), RecordType::SOA);
    assert_eq!(
        r.edns.as_ref().map(|e| e.max_payload()),
        Some(server::MAX_UDP_PAYLOAD)
    );

    let r = udp_exchange(server, &query(9, "example.com.", RecordType::A, None)).await;
    assert_eq!(r.metadata.response_code, ResponseCode::Refused);
    assert!(!r.metadata.authoritative);
}

#[tokio::test]
async fn a_large_udp_answer_is_truncated_and_complete_over_tcp() {
    let server = start().await;
    let big = "big.default.svc.cluster.local.";
    for edns in [None, Some(4096)] {
        let r = udp_exchange(server, &query(1, big, RecordType::A, edns)).await;
        assert!(r.metadata.truncation, "edns {edns:?}");
        assert!(r.answers.is_empty());
        assert_eq!(r.queries.len(), 1);
        assert_eq!(r.edns.is_some(), edns.is_some());
    }
    let mut stream = TcpStream::connect(server).await.unwrap();
    let r = tcp_exchange(&mut stream, &query(2, big, RecordType::A, None)).await;
    assert!(!r.metadata.truncation);
    assert_eq!(r.answers.len(), 100);
    // A second query on the same connection.
    let r = tcp_exchange(
        &mut stream,
        &query(3, "web.default.svc.cluster.local.", RecordType::A, None),
    )
    .await;
    assert_eq!(r.metadata.id, 3);
    assert_eq!(addresses(&r), ["10.96.0.20"]);
}

#[tokio::test]
async fn garbage_gets_formerr_or_nothing_and_the_server_lives_on() {
    let server = start().await;
    let sock = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    // Too short for a header: dropped.
    sock.send_to(b"hi", server).await.unwrap();
    // A query header claiming one question that is not there: FORMERR.
    let mut bad = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
    bad.extend_from_slice(&[0x3f, 0xff, 0xff]);
    sock.send_to(&bad, server).await.unwrap();
    let mut buf = vec![0u8; 4096];
    let (n, _) = timeout(WAIT, sock.recv_from(&mut buf))
        .await
        .unwrap()
        .unwrap();
    let r = Message::from_vec(&buf[..n]).unwrap();
    assert_eq!(r.metadata.id, 0x1234);
    assert_eq!(r.metadata.response_code, ResponseCode::FormErr);
    // A response is never answered (no reflection loops).
    let mut response = Message::from_vec(&query(
        5,
        "web.default.svc.cluster.local.",
        RecordType::A,
        None,
    ))
    .unwrap();
    response.metadata.message_type = MessageType::Response;
    sock.send_to(&response.to_vec().unwrap(), server)
        .await
        .unwrap();
    // TCP garbage: a frame of noise, then the connection is still served or
    // closed; either way a new one works.
    let mut stream = TcpStream::connect(server).await.unwrap();
    stream.write_all(&[0, 3, 1, 2, 3]).await.unwrap();
    drop(stream);

    let r = udp_exchange(
        server,
        &query(6, "web.default.svc.cluster.local.", RecordType::A, None),
    )
    .await;
    assert_eq!(addresses(&r), ["10.96.0.20"]);
    let mut stream = TcpStream::connect(server).await.unwrap();
    let r = tcp_exchange(
        &mut stream,
        &query(7, "web.default.svc.cluster.local.", RecordType::A, None),
    )
    .await;
    assert_eq!(addresses(&r), ["10.96.0.20"]);
    // Nothing else arrived on the first socket (the short packet and the
    // response were dropped).
    let extra = timeout(Duration::from_millis(200), sock.recv_from(&mut buf)).await;
    assert!(extra.is_err(), "unexpected reply");
}

#[tokio::test]
async fn unsupported_opcode_and_edns_version_are_refused_properly() {
    let server = start().await;
    let mut m = Message::from_vec(&query(
        1,
        "web.default.svc.cluster.local.",
        RecordType::A,
        None,
    ))
    .unwrap();
    m.metadata.op_code = OpCode::Status;
    let r = udp_exchange(server, &m.to_vec().unwrap()).await;
    assert_eq!(r.metadata.response_code, ResponseCode::NotImp);
    let mut m = Message::from_vec(&query(
        2,
        "web.default.svc.cluster.local.",
        RecordType::A,
        Some(1232),
    ))
    .unwrap();
    if let Some(e) = m.edns.as_mut() {
        e.set_version(1);
    }
    let r = udp_exchange(server, &m.to_vec().unwrap()).await;
    // BADVERS is 16, which hickory decodes as its twin BADSIG.
    assert_eq!(u16::from(r.metadata.response_code), 16);
}
