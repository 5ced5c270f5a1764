//! The wire and record formats of [`EndpointCreate`] and [`Endpoint`] are
//! those of the separate structs they replaced.

use super::*;
use crate::api::{Labels, MAX_LABEL_KEY_LEN, MAX_LABEL_VALUE_LEN, MAX_LABELS};

/// A create body as older plugins send it (no identity).
const CREATE_V1: &str = r#"{"owner":{"container_id":"c1","ifname":"eth0"},"pod":{"namespace":"ns","name":"p","uid":"u1"},"host_ifname":"lxc1","host_ifindex":7,"host_mac":"02:00:00:00:00:01","pod_mac":"02:00:00:00:00:02","addresses":["10.200.0.2/16"],"netns":"/var/run/netns/x"}"#;
/// A record as older daemons stored it (no bandwidth, no identity).
const RECORD_V1: &str = r#"{"owner":{"container_id":"c1","ifname":"eth0"},"pod":{"namespace":"ns","name":"p","uid":"u1"},"host_ifname":"lxc1","host_ifindex":7,"host_mac":"02:00:00:00:00:01","pod_mac":"02:00:00:00:00:02","addresses":["10.200.0.2/16"],"netns":"/var/run/netns/x","created_at":1700000000}"#;

#[test]
fn a_create_body_reads_and_writes_byte_for_byte_as_before() {
    let req: EndpointCreate = serde_json::from_str(CREATE_V1).unwrap();
    assert_eq!(req.spec.host_ifname, "lxc1");
    assert!(req.spec.bandwidth.is_none() && req.spec.identity.is_empty());
    assert_eq!(serde_json::to_string(&req).unwrap(), CREATE_V1);
}

#[test]
fn an_old_record_reads_and_writes_byte_for_byte_as_before() {
    let ep: Endpoint = serde_json::from_str(RECORD_V1).unwrap();
    assert_eq!(ep.created_at, 1_700_000_000);
    assert_eq!(ep.spec.pod.uid.as_deref(), Some("u1"));
    assert_eq!(serde_json::to_string(&ep).unwrap(), RECORD_V1);
    let req: EndpointCreate = serde_json::from_str(CREATE_V1).unwrap();
    assert_eq!(req.into_endpoint(1_700_000_000), ep);
}

#[test]
fn a_create_body_with_an_unknown_field_or_a_created_at_is_refused() {
    for extra in [r#""bogus":1"#, r#""created_at":5"#, r#""labels":{}"#] {
        let body = format!("{},{extra}}}", CREATE_V1.trim_end_matches('}'));
        let err = serde_json::from_str::<EndpointCreate>(&body).unwrap_err();
        assert!(err.to_string().contains("unknown field"), "{extra}: {err}");
    }
    let missing = CREATE_V1.replace(r#","netns":"/var/run/netns/x""#, "");
    assert!(serde_json::from_str::<EndpointCreate>(&missing).is_err());
}

#[test]
fn a_record_keeps_reading_fields_a_newer_daemon_added() {
    let newer = format!("{},\"future\":true}}", RECORD_V1.trim_end_matches('}'));
    let ep: Endpoint = serde_json::from_str(&newer).unwrap();
    assert_eq!(ep.spec.netns, "/var/run/netns/x");
}

#[test]
fn bandwidth_and_identity_round_trip_and_identity_is_left_out_when_empty() {
    let mut ep: Endpoint = serde_json::from_str(RECORD_V1).unwrap();
    ep.spec.bandwidth = Some(BandwidthLimits {
        ingress_rate: 1000,
        ingress_burst: 100,
        egress_rate: 0,
        egress_burst: 0,
    });
    ep.spec.identity.labels.insert("app".into(), "web".into());
    let json = serde_json::to_string(&ep).unwrap();
    assert!(
        json.contains(r#""identity":{"labels":{"app":"web"}}"#),
        "{json}"
    );
    assert_eq!(serde_json::from_str::<Endpoint>(&json).unwrap(), ep);
    // A record of the old struct, with the bandwidth after created_at.
    let old_order = RECORD_V1.replace(
        r#""created_at":1700000000"#,
        r#""created_at":1700000000,"bandwidth":{"ingress_rate":1000,"ingress_burst":100}"#,
    );
    let old: Endpoint = serde_json::from_str(&old_order).unwrap();
    assert_eq!(old.spec.bandwidth, ep.spec.bandwidth);
}

#[test]
fn labels_from_outside_are_bounded_in_number_and_size() {
    let many: Labels = (0..200)
        .map(|i| (format!("k{i:03}"), "v".to_owned()))
        .collect();
    let mut odd = Labels::new();
    odd.insert(String::new(), "empty key".into());
    odd.insert("long".into(), "x".repeat(MAX_LABEL_VALUE_LEN + 1));
    odd.insert("k".repeat(MAX_LABEL_KEY_LEN + 1), "v".into());
    odd.insert("ok".into(), "v".repeat(MAX_LABEL_VALUE_LEN));
    let id = PodIdentity::bounded(&many, &odd);
    assert_eq!(id.labels.len(), MAX_LABELS);
    assert_eq!(id.labels.keys().next().map(String::as_str), Some("k000"));
    assert_eq!(id.namespace_labels.keys().collect::<Vec<_>>(), ["ok"]);
}
