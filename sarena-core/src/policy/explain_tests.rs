//! Unit tests of `PolicyEngine::explain`.

use std::net::IpAddr;

use super::*;

fn pod(ns: &str, name: &str, app: &str, ips: &[&str], node: &str) -> PolicyPod {
    PolicyPod {
        namespace: ns.into(),
        name: name.into(),
        labels: [("app".to_string(), app.to_string())].into(),
        ips: ips.iter().map(|s| s.parse().unwrap()).collect(),
        named_ports: vec![],
        node: node.into(),
        host_network: false,
    }
}

fn engine() -> PolicyEngine {
    let mut e = PolicyEngine::new("n1", 1000);
    let deny_db = Policy {
        namespace: "a".into(),
        name: "db-from-web".into(),
        pod_selector: LabelSelector {
            match_labels: [("app".to_string(), "db".to_string())].into(),
            match_expressions: vec![],
        },
        ingress_isolation: true,
        egress_isolation: false,
        ingress: vec![Rule {
            peers: vec![Peer::Pods {
                pods: Some(LabelSelector {
                    match_labels: [("app".to_string(), "web".to_string())].into(),
                    match_expressions: vec![],
                }),
                namespaces: None,
            }],
            ports: vec![PortSpec {
                protocol: Protocol::Tcp,
                port: Some(PortRef::Number(5432)),
                end_port: None,
            }],
        }],
        egress: vec![],
    };
    for ev in [
        PolicyEvent::Pod(pod("a", "db", "db", &["10.0.0.1", "fd00::1"], "n2")),
        PolicyEvent::Pod(pod("a", "web", "web", &["10.0.0.2"], "n1")),
        PolicyEvent::Pod(pod("a", "v6", "web", &["fd00::3"], "n1")),
        PolicyEvent::Pod(pod("a", "none", "web", &[], "n1")),
        PolicyEvent::Policy(deny_db),
    ] {
        e.handle(ev);
    }
    e
}

fn p(ns: &str, name: &str) -> Party {
    Party::Pod(PodKey::new(ns, name))
}

#[test]
fn explain_names_the_rule_of_a_remote_receiver() {
    let mut e = engine();
    let x = e
        .explain(&p("a", "web"), &p("a", "db"), Protocol::Tcp, 5432)
        .unwrap();
    assert_eq!(
        x.egress,
        Some((PodKey::new("a", "web"), Decision::NotIsolated))
    );
    let Some((who, Decision::Allowed(rule))) = x.ingress else {
        panic!("{x:?}")
    };
    assert_eq!(who, PodKey::new("a", "db"));
    assert!(x.allowed);
    assert_eq!(
        e.compile().rules[&rule].to_string(),
        "a/db-from-web ingress[0]"
    );
    let x = e
        .explain(&p("a", "web"), &p("a", "db"), Protocol::Tcp, 80)
        .unwrap();
    assert_eq!(x.ingress, Some((PodKey::new("a", "db"), Decision::Denied)));
    assert!(!x.allowed);
    // IPv6 only sender: the receiver's IPv6 address.
    let x = e
        .explain(&p("a", "v6"), &p("a", "db"), Protocol::Tcp, 5432)
        .unwrap();
    assert!(x.allowed, "{x:?}");
    let addr: IpAddr = "10.9.9.9".parse().unwrap();
    let x = e
        .explain(&Party::Address(addr), &p("a", "db"), Protocol::Tcp, 5432)
        .unwrap();
    assert_eq!((x.egress, x.allowed), (None, false));
}

#[test]
fn explain_refuses_unknown_pods_and_missing_families() {
    let mut e = engine();
    let err = e
        .explain(&p("a", "nope"), &p("a", "db"), Protocol::Tcp, 1)
        .unwrap_err();
    assert_eq!(
        err,
        ExplainError::UnknownPod {
            pod: PodKey::new("a", "nope")
        }
    );
    let err = e
        .explain(&p("a", "v6"), &p("a", "web"), Protocol::Tcp, 1)
        .unwrap_err();
    assert!(
        matches!(err, ExplainError::NoAddress { ref pod, family: "IPv4" } if pod.name == "v6"),
        "{err}"
    );
    let err = e
        .explain(&p("a", "none"), &p("a", "web"), Protocol::Tcp, 1)
        .unwrap_err();
    assert!(
        matches!(err, ExplainError::NoAddress { family: "IP", .. }),
        "{err}"
    );
    let v4: IpAddr = "10.0.0.2".parse().unwrap();
    let err = e
        .explain(&Party::Address(v4), &p("a", "v6"), Protocol::Tcp, 1)
        .unwrap_err();
    assert_eq!(err.to_string(), "pod a/v6 has no IPv4 address");
}
