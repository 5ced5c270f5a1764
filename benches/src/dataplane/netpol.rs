//! The NetworkPolicies of the embedded policy path
//! ([`PathKind::SarenaEbpfEmbeddedPolicies`]): [`POLICIES`] policies in the
//! pods' namespace, each selecting both measured pods, isolating them for
//! ingress and egress, and allowing the peer pod (by podSelector) on its own
//! TCP port and on the ports the measurements use. They are compiled by the
//! real engine ([`PolicyEngine`]) as the daemon does, after every list was
//! reported complete.
//!
//! [`PathKind::SarenaEbpfEmbeddedPolicies`]: super::PathKind::SarenaEbpfEmbeddedPolicies

use std::collections::BTreeMap;
use std::net::IpAddr;

use sarena_core::policy::{
    CompiledPolicy, Kind, LabelSelector, Peer, Policy, PolicyEngine, PolicyEvent, PolicyNamespace,
    PolicyPod, PortRef, PortSpec, Protocol, Rule,
};
use serde::{Deserialize, Serialize};

use super::{iperf, service};

/// Policies on the policy path.
pub const POLICIES: usize = 100;
/// The pods' namespace.
pub const NAMESPACE: &str = "dp-bench";
/// The node the engine compiles for (the embedded node).
pub const NODE: &str = "dp-bench-node";
/// Label both pods carry (`app=<APP>`); every policy selects it.
pub const APP: &str = "dp-bench";
/// The first policy's own port; policy `i` allows `FIRST_OWN_PORT + i`.
pub const FIRST_OWN_PORT: u16 = 6000;
/// The port the policy check's denied probe uses: no policy allows it.
pub const DENIED_PORT: u16 = 5999;
/// The ports the measurements use: iperf3's and the request/response server's.
pub const MEASUREMENT_PORTS: [u16; 2] = [iperf::PORT, service::RR_PORT];

/// The port policy `i` (from 0) allows besides [`MEASUREMENT_PORTS`].
pub fn own_port(i: usize) -> u16 {
    FIRST_OWN_PORT + i as u16
}

/// The port the policy check's allowed probe uses: the last policy's own
/// port (so the last policy written is in force too).
pub fn allowed_probe_port(policies: usize) -> u16 {
    own_port(policies.saturating_sub(1))
}

/// `app=<APP>, role=<role>`.
fn labels(role: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("app".to_string(), APP.to_string()),
        ("role".to_string(), role.to_string()),
    ])
}

/// The selector of both pods (`app=<APP>`).
fn both_pods() -> LabelSelector {
    LabelSelector {
        match_labels: BTreeMap::from([("app".to_string(), APP.to_string())]),
        match_expressions: Vec::new(),
    }
}

fn tcp(port: u16) -> PortSpec {
    PortSpec {
        protocol: Protocol::Tcp,
        port: Some(PortRef::Number(port)),
        end_port: None,
    }
}

/// The `count` policies: `bench-NNN`, each selecting both pods, isolating
/// both directions, allowing the pods (each other) on its own port and the
/// measurement ports, in and out.
pub fn policies(count: usize) -> Vec<Policy> {
    (0..count)
        .map(|i| {
            let mut ports = vec![tcp(own_port(i))];
            ports.extend(MEASUREMENT_PORTS.map(tcp));
            let rule = Rule {
                peers: vec![Peer::Pods {
                    pods: Some(both_pods()),
                    namespaces: None,
                }],
                ports,
            };
            Policy {
                namespace: NAMESPACE.into(),
                name: format!("bench-{i:03}"),
                pod_selector: both_pods(),
                ingress_isolation: true,
                egress_isolation: true,
                ingress: vec![rule.clone()],
                egress: vec![rule],
            }
        })
        .collect()
}

/// The engine's view of a measured pod: `NAMESPACE/name` on [`NODE`] with
/// `ips`, labelled `app=<APP>, role=<role>`.
pub fn pod(name: &str, role: &str, ips: Vec<IpAddr>) -> PolicyPod {
    PolicyPod {
        namespace: NAMESPACE.into(),
        name: name.into(),
        labels: labels(role),
        ips,
        named_ports: Vec::new(),
        node: NODE.into(),
        host_network: false,
    }
}

/// What the engine made of the policies and what the dataplane wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct PolicyStats {
    /// NetworkPolicies given to the engine.
    pub policies: usize,
    /// Identities the engine allocated.
    pub identities: usize,
    /// ipcache entries of the compiled state.
    pub ipcache_entries: usize,
    /// Allow entries of the two measured endpoints (policy-map entries).
    pub policy_entries: usize,
    /// Map writes the dataplane made applying it (ipcache, entries, isolation).
    pub writes: usize,
    /// Writes that failed.
    pub failed_writes: usize,
}

/// An engine fed like the daemon's: the pods, their namespace, `policies`,
/// then every list complete; returns the compiled state.
pub fn compile(pods: &[PolicyPod], policies: &[Policy]) -> CompiledPolicy {
    let mut engine = PolicyEngine::new(NODE, 0);
    for p in pods {
        engine.handle(PolicyEvent::Pod(p.clone()));
    }
    engine.handle(PolicyEvent::Namespace(PolicyNamespace {
        name: NAMESPACE.into(),
        labels: BTreeMap::new(),
    }));
    for p in policies {
        engine.handle(PolicyEvent::Policy(p.clone()));
    }
    for kind in [Kind::Pods, Kind::Namespaces, Kind::Policies, Kind::Services] {
        engine.handle(PolicyEvent::Listed(kind));
    }
    engine.compile()
}

/// The sizes of `compiled` for `policies` policies (writes left at 0).
pub fn stats_of(compiled: &CompiledPolicy, policies: usize) -> PolicyStats {
    PolicyStats {
        policies,
        identities: compiled.identities.len(),
        ipcache_entries: compiled.ipcache.len(),
        policy_entries: compiled.endpoints.values().map(|e| e.entries.len()).sum(),
        writes: 0,
        failed_writes: 0,
    }
}
