//! The engine side the NetworkPolicy tests of both dataplanes share: pods
//! of namespace `shop` on node `node-a`, the "only web reaches db" policy,
//! and a synced `PolicyEngine` over them.

use std::collections::BTreeMap;

use sarena_core::api::PodRef;
use sarena_core::policy::{
    Kind, LabelSelector, Peer, Policy, PolicyEngine, PolicyEvent, PolicyNamespace, PolicyPod,
    PortRef, PortSpec, Protocol, Rule,
};
use sarena_test_support::Pod;

/// The node the engine compiles for.
pub const NODE: &str = "node-a";

/// `app=<app>`.
pub fn labels(app: &str) -> BTreeMap<String, String> {
    BTreeMap::from([("app".to_string(), app.to_string())])
}

/// The selector of `app=<app>`.
pub fn selector(app: &str) -> LabelSelector {
    LabelSelector {
        match_labels: labels(app),
        match_expressions: Vec::new(),
    }
}

/// Names `pod` `shop/name` (before it is attached) and describes it to the engine.
pub fn k8s_pod(pod: &mut Pod, name: &str, app: &str) -> PolicyPod {
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

/// TCP `port`.
pub fn tcp(port: u16) -> PortSpec {
    PortSpec {
        protocol: Protocol::Tcp,
        port: Some(PortRef::Number(port)),
        end_port: None,
    }
}

/// "Only app=web may reach app=db, on TCP 8080."
pub fn db_policy() -> Policy {
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

/// An engine that has listed `pods`, namespace `shop` and `policies`.
pub fn engine(pods: &[PolicyPod], policies: &[Policy]) -> PolicyEngine {
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
