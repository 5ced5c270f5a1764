use sarena_core::api::Labels;
use sarena_core::policy::LabelSelector;
use serde_json::json;

use super::*;

fn convert(spec: serde_json::Value) -> (Policy, Vec<Warning>) {
    let np: net::NetworkPolicy = serde_json::from_value(json!({
        "metadata": {"namespace": "ns", "name": "np"},
        "spec": spec
    }))
    .unwrap();
    network_policy(&np).unwrap()
}

fn fields(warnings: &[Warning]) -> Vec<&str> {
    warnings.iter().map(|w| w.field.as_str()).collect()
}

fn net(s: &str) -> IpNet {
    s.parse().unwrap()
}

fn allows_nothing(rule: &Rule) -> bool {
    rule.peers.len() == 1
        && matches!(&rule.peers[0], Peer::Pods { pods: Some(s), namespaces: None } if *s == nothing())
}

#[test]
fn an_object_without_namespace_or_name_is_no_policy() {
    for meta in [
        json!({"name": "np"}),
        json!({"namespace": "ns", "name": ""}),
    ] {
        let np: net::NetworkPolicy =
            serde_json::from_value(json!({"metadata": meta, "spec": {}})).unwrap();
        assert!(network_policy(&np).is_none());
    }
}

#[test]
fn policy_types_default_to_ingress_and_to_egress_when_egress_rules_exist() {
    let (p, w) = convert(json!({"podSelector": {}}));
    assert!(w.is_empty());
    assert_eq!((p.ingress_isolation, p.egress_isolation), (true, false));
    assert_eq!(p.pod_selector, LabelSelector::default());
    let (p, _) = convert(json!({"podSelector": {}, "egress": [{}]}));
    assert_eq!((p.ingress_isolation, p.egress_isolation), (true, true));
    assert_eq!(p.egress, vec![Rule::default()]);
    let (p, _) = convert(json!({"podSelector": {}, "policyTypes": ["Egress"], "ingress": [{}]}));
    assert_eq!((p.ingress_isolation, p.egress_isolation), (false, true));
    let (p, w) = convert(json!({"podSelector": {}, "policyTypes": ["Ingress", "Sideways"]}));
    assert_eq!((p.ingress_isolation, p.egress_isolation), (true, true));
    assert_eq!(fields(&w), ["spec.policyTypes[1]"]);
}

#[test]
fn an_unreadable_pod_selector_selects_the_whole_namespace_and_allows_nothing() {
    let (p, w) = convert(json!({
        "podSelector": {"matchExpressions": [{"key": "app", "operator": "Like", "values": ["w"]}]},
        "policyTypes": ["Ingress", "Egress"],
        "ingress": [{}],
        "egress": [{}]
    }));
    assert_eq!(p.pod_selector, LabelSelector::default());
    assert!(p.ingress_isolation && p.egress_isolation);
    assert!(p.ingress.is_empty() && p.egress.is_empty());
    assert_eq!(fields(&w), ["spec.podSelector.matchExpressions[0]"]);
}

#[test]
fn peers_are_read_and_an_unreadable_one_is_dropped_alone() {
    let (p, w) = convert(json!({
        "podSelector": {"matchLabels": {"app": "db"}},
        "ingress": [{"from": [
            {"podSelector": {"matchLabels": {"app": "web"}}},
            {"namespaceSelector": {"matchLabels": {"team": "a"}}},
            {"namespaceSelector": {}, "podSelector": {"matchLabels": {"role": "x"}}},
            {"podSelector": {"matchExpressions": [{"key": "a", "operator": "Bogus"}]}},
            {},
            {"ipBlock": {"cidr": "10.0.0.0/8"}, "podSelector": {}}
        ]}]
    }));
    let web: Labels = [("app".to_string(), "web".to_string())].into();
    assert!(
        p.pod_selector
            .matches(&[("app".to_string(), "db".to_string())].into())
    );
    let peers = &p.ingress[0].peers;
    assert_eq!(peers.len(), 3);
    assert!(matches!(&peers[0], Peer::Pods { pods: Some(s), namespaces: None } if s.matches(&web)));
    assert!(matches!(
        &peers[1],
        Peer::Pods {
            pods: None,
            namespaces: Some(_)
        }
    ));
    assert!(
        matches!(&peers[2], Peer::Pods { pods: Some(_), namespaces: Some(s) } if *s == LabelSelector::default())
    );
    assert_eq!(
        fields(&w),
        [
            "spec.ingress[0].from[3].podSelector.matchExpressions[0]",
            "spec.ingress[0].from[4]",
            "spec.ingress[0].from[5]"
        ]
    );
}

#[test]
fn a_rule_whose_every_peer_or_port_is_unreadable_allows_nothing_and_keeps_its_index() {
    let (p, w) = convert(json!({
        "podSelector": {},
        "ingress": [
            {"from": [{"ipBlock": {"cidr": "nonsense"}}], "ports": [{"port": 80}]},
            {"ports": [{"protocol": "ICMP"}, {"port": 0}]},
            {"ports": [{"port": 443}]}
        ]
    }));
    assert_eq!(p.ingress.len(), 3);
    assert!(allows_nothing(&p.ingress[0]));
    assert!(allows_nothing(&p.ingress[1]));
    assert!(p.ingress[2].peers.is_empty());
    assert_eq!(
        fields(&w),
        [
            "spec.ingress[0].from[0].ipBlock.cidr",
            "spec.ingress[0]",
            "spec.ingress[1].ports[0].protocol",
            "spec.ingress[1].ports[1].port",
            "spec.ingress[1]"
        ]
    );
}

#[test]
fn ip_blocks_are_canonicalised_and_excepts_checked_against_their_cidr() {
    let (p, w) = convert(json!({
        "podSelector": {},
        "egress": [{"to": [
            {"ipBlock": {"cidr": "10.1.2.3/16", "except": ["10.1.9.9/24", "192.168.0.0/16", "fd00::/8"]}},
            {"ipBlock": {"cidr": "10.2.0.0/16", "except": ["10.0.0.0/8"]}},
            {"ipBlock": {"cidr": "10.3.0.0/16", "except": ["10.3.0.0/33"]}},
            {"ipBlock": {"cidr": "fd00:1::5/64"}},
            {"ipBlock": {"cidr": "10.4.0.1"}}
        ]}]
    }));
    assert_eq!(
        p.egress[0].peers,
        vec![
            Peer::IpBlock {
                cidr: net("10.1.0.0/16"),
                except: vec![net("10.1.9.0/24")]
            },
            Peer::IpBlock {
                cidr: net("fd00:1::/64"),
                except: vec![]
            },
        ]
    );
    assert_eq!(
        fields(&w),
        [
            "spec.egress[0].to[1].ipBlock.except[0]",
            "spec.egress[0].to[2].ipBlock.except[0]",
            "spec.egress[0].to[4].ipBlock.cidr"
        ]
    );
}

#[test]
fn ports_default_to_tcp_honour_end_port_and_named_ports() {
    let (p, w) = convert(json!({
        "podSelector": {},
        "ingress": [{"ports": [
            {"port": 80},
            {"protocol": "UDP", "port": 53},
            {"protocol": "SCTP"},
            {"port": 8000, "endPort": 8080},
            {"port": "http-alt"},
            {"port": 9000, "endPort": 8999},
            {"port": "http", "endPort": 90},
            {"endPort": 90},
            {"port": 70000},
            {"port": "Bad_Name"},
            {"protocol": "tcp", "port": 1}
        ]}]
    }));
    let tcp = |port, end_port| PortSpec {
        protocol: Protocol::Tcp,
        port,
        end_port,
    };
    assert_eq!(
        p.ingress[0].ports,
        vec![
            tcp(Some(PortRef::Number(80)), None),
            PortSpec {
                protocol: Protocol::Udp,
                port: Some(PortRef::Number(53)),
                end_port: None
            },
            PortSpec {
                protocol: Protocol::Sctp,
                port: None,
                end_port: None
            },
            tcp(Some(PortRef::Number(8000)), Some(8080)),
            tcp(Some(PortRef::Named("http-alt".into())), None),
        ]
    );
    assert_eq!(
        fields(&w),
        [
            "spec.ingress[0].ports[5].endPort",
            "spec.ingress[0].ports[6].endPort",
            "spec.ingress[0].ports[7].endPort",
            "spec.ingress[0].ports[8].port",
            "spec.ingress[0].ports[9].port",
            "spec.ingress[0].ports[10].protocol"
        ]
    );
}

#[test]
fn port_names_follow_the_iana_service_name_rules() {
    for good in ["http", "a", "h2c", "metrics-9090", "abcdefghijklmno"] {
        assert!(is_port_name(good), "{good}");
    }
    for bad in [
        "",
        "80",
        "-http",
        "http-",
        "ht--tp",
        "HTTP",
        "abcdefghijklmnop",
        "h_p",
    ] {
        assert!(!is_port_name(bad), "{bad}");
    }
}
