use std::net::IpAddr;
use std::time::Duration;

use super::*;

fn eth(ether_type: u16) -> Vec<u8> {
    let mut f = vec![0u8; 12];
    f.extend_from_slice(&ether_type.to_be_bytes());
    f
}

fn ipv4_tcp_syn() -> Vec<u8> {
    let mut f = eth(0x0800);
    let mut ip = vec![0x45, 0, 0, 40, 0, 0, 0x40, 0, 64, 6, 0, 0];
    ip.extend_from_slice(&[10, 0, 0, 5, 10, 0, 0, 6]);
    f.extend_from_slice(&ip);
    let mut tcp = vec![0u8; 20];
    tcp[0..2].copy_from_slice(&40000u16.to_be_bytes());
    tcp[2..4].copy_from_slice(&80u16.to_be_bytes());
    tcp[13] = 0x02;
    f.extend_from_slice(&tcp);
    f
}

fn addr(s: &str) -> Option<IpAddr> {
    Some(s.parse().unwrap())
}

#[test]
fn an_ipv4_tcp_syn_is_read_to_its_ports_and_flags() {
    let s = PacketSummary::parse(&ipv4_tcp_syn());
    assert_eq!(s.family, "ipv4");
    assert_eq!((s.src, s.dst), (addr("10.0.0.5"), addr("10.0.0.6")));
    assert_eq!(s.protocol.as_deref(), Some("TCP"));
    assert_eq!((s.src_port, s.dst_port), (Some(40000), Some(80)));
    assert_eq!(s.tcp_flags.as_deref(), Some("SYN"));
    assert_eq!(s.to_string(), "10.0.0.5:40000 -> 10.0.0.6:80 TCP SYN");
}

#[test]
fn a_later_ipv4_fragment_has_no_ports() {
    let mut f = ipv4_tcp_syn();
    f[14 + 6] = 0x00;
    f[14 + 7] = 0x10; // offset 16 * 8 bytes
    let s = PacketSummary::parse(&f);
    assert_eq!(s.protocol.as_deref(), Some("TCP"));
    assert_eq!((s.src_port, s.dst_port, s.tcp_flags), (None, None, None));
}

#[test]
fn an_ipv6_echo_request_behind_a_destination_options_header_is_found() {
    let mut f = eth(0x86dd);
    let mut ip = vec![0x60, 0, 0, 0, 0, 16, 60, 64];
    let mut src = [0u8; 16];
    src[0] = 0xfd;
    src[15] = 1;
    let mut dst = src;
    dst[15] = 2;
    ip.extend_from_slice(&src);
    ip.extend_from_slice(&dst);
    f.extend_from_slice(&ip);
    f.extend_from_slice(&[58, 0, 1, 4, 0, 0, 0, 0]); // dest options, 8 bytes
    f.extend_from_slice(&[128, 0, 0, 0, 0, 1, 0, 1]);
    let s = PacketSummary::parse(&f);
    assert_eq!(s.family, "ipv6");
    assert_eq!((s.src, s.dst), (addr("fd00::1"), addr("fd00::2")));
    assert_eq!(s.protocol.as_deref(), Some("ICMPv6"));
    assert_eq!((s.icmp_type, s.icmp_code), (Some(128), Some(0)));
    assert_eq!(s.to_string(), "fd00::1 -> fd00::2 ICMPv6 type 128 code 0");
}

#[test]
fn arp_names_its_operation_and_addresses() {
    let mut f = eth(0x0806);
    f.extend_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
    f.extend_from_slice(&[2, 0, 0, 0, 0, 1, 10, 0, 0, 9]);
    f.extend_from_slice(&[0, 0, 0, 0, 0, 0, 10, 0, 0, 1]);
    let s = PacketSummary::parse(&f);
    assert_eq!(s.arp_op, Some(1));
    assert_eq!(s.to_string(), "arp op 1 10.0.0.9 -> 10.0.0.1");
}

#[test]
fn short_and_foreign_frames_say_what_they_are() {
    assert_eq!(PacketSummary::parse(&[0u8; 5]).family, "truncated");
    assert_eq!(PacketSummary::parse(&eth(0x88cc)).to_string(), "0x88cc");
    // an IPv4 header cut after the protocol: no addresses, no panic
    let mut f = eth(0x0800);
    f.extend_from_slice(&[0x45, 0, 0, 40, 0, 0, 0, 0, 64, 17]);
    let s = PacketSummary::parse(&f);
    assert_eq!((s.src, s.protocol.as_deref()), (None, Some("UDP")));
}

#[test]
fn every_prefix_of_a_frame_parses_without_panicking() {
    let frame = ipv4_tcp_syn();
    for n in 0..=frame.len() {
        let _ = PacketSummary::parse(&frame[..n]).to_string();
    }
}

fn record(kind: EventKind, code: &str, pod: Option<&str>) -> EventRecord {
    EventRecord {
        time_unix_ns: 1,
        kind,
        direction: EventDirection::Egress,
        reason: (kind == EventKind::Drop).then(|| code.to_owned()),
        path: (kind == EventKind::Flow).then(|| code.to_owned()),
        pod: pod.map(str::to_owned),
        namespace: pod
            .and_then(|p| p.split_once('/'))
            .map(|(ns, _)| ns.to_owned()),
        interface: None,
        ifindex: 7,
        peer_pod: None,
        packet_len: 54,
        packet: PacketSummary::parse(&ipv4_tcp_syn()),
        policy: None,
    }
}

#[test]
fn a_filter_round_trips_through_its_query_string() {
    let f = EventFilter {
        drops: true,
        flows: false,
        pod: Some("team a/web 1".into()),
        namespace: Some("team a".into()),
        reasons: vec!["spoofed_source".into(), "policy_denied_ingress".into()],
        since: Some(Duration::from_secs(300)),
        follow: true,
    };
    assert_eq!(EventFilter::from_query(&f.to_query()).unwrap(), f);
    assert_eq!(EventFilter::from_query("").unwrap(), EventFilter::default());
}

#[test]
fn a_bad_query_names_its_parameter() {
    for (q, param) in [
        ("since=5m", "since"),
        ("drops=maybe", "drops"),
        ("colour=red", "colour"),
        ("pod=", "pod"),
    ] {
        assert_eq!(
            EventFilter::from_query(q).unwrap_err().parameter,
            param,
            "{q}"
        );
    }
}

#[test]
fn filters_select_by_kind_pod_namespace_and_reason() {
    let drop = record(EventKind::Drop, "spoofed_source", Some("ns/web-1"));
    let flow = record(EventKind::Flow, "local_pod", Some("ns/db-1"));
    let nobody = record(EventKind::Drop, "malformed_ipv4", None);
    let q = |s: &str| EventFilter::from_query(s).unwrap();
    assert!(q("").matches(&drop) && q("").matches(&flow) && q("").matches(&nobody));
    assert!(q("drops=1").matches(&drop) && !q("drops=1").matches(&flow));
    assert!(q("flows=1").matches(&flow) && !q("flows=1").matches(&drop));
    assert!(q("drops=1&flows=1").matches(&flow));
    assert!(q("pod=ns/web-1").matches(&drop) && !q("pod=ns/web-1").matches(&flow));
    assert!(q("pod=web-1").matches(&drop) && !q("pod=web").matches(&drop));
    assert!(!q("pod=other/web-1").matches(&drop) && !q("pod=web-1").matches(&nobody));
    assert!(q("namespace=ns").matches(&flow) && !q("namespace=ns").matches(&nobody));
    assert!(q("reason=local_pod&reason=x").matches(&flow));
    assert!(!q("reason=spoofed_arp").matches(&drop));
}

#[test]
fn a_line_is_an_event_or_a_loss_notice() {
    let event = EventLine::Event(Box::new(record(
        EventKind::Drop,
        "spoofed_source",
        Some("ns/a"),
    )));
    let json = serde_json::to_string(&event).unwrap();
    assert!(json.contains("\"reason\":\"spoofed_source\""), "{json}");
    assert_eq!(serde_json::from_str::<EventLine>(&json).unwrap(), event);
    let lost: EventLine = serde_json::from_str(r#"{"lost":12}"#).unwrap();
    assert_eq!(lost, EventLine::Lost { lost: 12 });
}

#[test]
fn an_event_reads_as_one_line() {
    let line = record(EventKind::Drop, "spoofed_source", Some("ns/web-1")).to_string();
    assert_eq!(
        line,
        "DROP spoofed_source         ns/web-1 egress 10.0.0.5:40000 -> 10.0.0.6:80 TCP SYN"
    );
}

#[test]
fn a_policy_drop_line_says_why_denied_or_that_the_entry_is_missing() {
    let mut e = record(EventKind::Drop, "policy_denied_ingress", Some("ns/web"));
    e.direction = EventDirection::Ingress;
    e.policy = Some(PolicyDecision {
        pod: "ns/web".into(),
        verdict: PolicyVerdict::Denied,
        rule: None,
        policies: vec!["ns/web-only".into()],
    });
    let line = e.to_string();
    assert!(
        line.ends_with("policy: ns/web isolated by ns/web-only, no rule allows it"),
        "{line}"
    );
    // The engine allows it, the programs dropped it: the maps lack the
    // entry (what a full policy map costs).
    e.policy = Some(PolicyDecision {
        pod: "ns/web".into(),
        verdict: PolicyVerdict::Allowed,
        rule: Some("ns/web-only ingress[0]".into()),
        policies: vec!["ns/web-only".into()],
    });
    let line = e.to_string();
    assert!(
        line.contains(
            "policy: ns/web allows it (ns/web-only ingress[0]) but the dataplane lacks the entry"
        ),
        "{line}"
    );
    assert!(line.contains("sarena_policy_map_full_total"), "{line}");
}
