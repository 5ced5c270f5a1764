//! Builders shared by the engine's unit tests.

use std::net::IpAddr;

use ipnet::IpNet;

use super::*;
use crate::api::Labels;

pub(super) const NODE: &str = "n1";

pub(super) fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

pub(super) fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

pub(super) fn net(s: &str) -> IpNet {
    s.parse().unwrap()
}

pub(super) fn pod(ns: &str, name: &str, app: &str, ips: &[&str]) -> PolicyPod {
    PolicyPod {
        namespace: ns.into(),
        name: name.into(),
        labels: labels(&[("app", app)]),
        ips: ips.iter().map(|s| ip(s)).collect(),
        named_ports: vec![],
        node: NODE.into(),
        host_network: false,
    }
}

pub(super) fn sel(pairs: &[(&str, &str)]) -> LabelSelector {
    LabelSelector {
        match_labels: labels(pairs),
        match_expressions: vec![],
    }
}

pub(super) fn app(app: &str) -> Option<LabelSelector> {
    Some(sel(&[("app", app)]))
}

pub(super) fn tcp(port: u16) -> PortSpec {
    PortSpec {
        protocol: Protocol::Tcp,
        port: Some(PortRef::Number(port)),
        end_port: None,
    }
}

pub(super) fn named(name: &str) -> PortSpec {
    PortSpec {
        protocol: Protocol::Tcp,
        port: Some(PortRef::Named(name.into())),
        end_port: None,
    }
}

/// A policy of `ns` selecting `app=target`, isolating ingress with `ingress`.
pub(super) fn ingress_policy(ns: &str, name: &str, target: &str, ingress: Vec<Rule>) -> Policy {
    Policy {
        namespace: ns.into(),
        name: name.into(),
        pod_selector: sel(&[("app", target)]),
        ingress_isolation: true,
        egress_isolation: false,
        ingress,
        egress: vec![],
    }
}

pub(super) fn egress_policy(ns: &str, name: &str, target: &str, egress: Vec<Rule>) -> Policy {
    Policy {
        ingress_isolation: false,
        egress_isolation: true,
        ingress: vec![],
        egress,
        ..ingress_policy(ns, name, target, vec![])
    }
}

pub(super) fn engine(events: Vec<PolicyEvent>) -> PolicyEngine {
    let mut e = PolicyEngine::new(NODE, 1000);
    for ev in events {
        e.handle(ev);
    }
    e
}

pub(super) fn key(ns: &str, name: &str) -> PodKey {
    PodKey::new(ns, name)
}

pub(super) fn ns(name: &str, pairs: &[(&str, &str)]) -> PolicyEvent {
    PolicyEvent::Namespace(PolicyNamespace {
        name: name.into(),
        labels: labels(pairs),
    })
}

/// Ingress into `to` from `from` on TCP `port`.
pub(super) fn ingress(c: &CompiledPolicy, to: (&str, &str), from: &str, port: u16) -> Decision {
    c.decide(&key(to.0, to.1), Direction::Ingress, ip(from), 6, port)
}

pub(super) fn egress(
    c: &CompiledPolicy,
    from: (&str, &str),
    to: &str,
    proto: u8,
    port: u16,
) -> Decision {
    c.decide(&key(from.0, from.1), Direction::Egress, ip(to), proto, port)
}

pub(super) fn allowed(d: Decision) -> bool {
    matches!(d, Decision::Allowed(_))
}
