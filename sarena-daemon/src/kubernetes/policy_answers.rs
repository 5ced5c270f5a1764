//! The API's answers from NetworkPolicy's compiled state: the endpoint list
//! and an explanation, engine types → API types (`sarena_core::api`).

use sarena_core::api::{
    ApiErrorKind, DaemonError, PolicyDecision, PolicyEndpoint, PolicyExplanation, PolicyParty,
    PolicyProtocol, PolicyQuery, PolicyVerdict,
};
use sarena_core::policy::{
    CompiledPolicy, Decision, ExplainError, Party, PodKey, PolicyEngine, Protocol,
};

/// Every endpoint of `compiled`, in pod order.
pub fn endpoints(compiled: &CompiledPolicy) -> Vec<PolicyEndpoint> {
    compiled
        .endpoints
        .iter()
        .map(|(pod, ep)| PolicyEndpoint {
            namespace: pod.namespace.clone(),
            name: pod.name.clone(),
            ingress_isolated: ep.ingress_isolated,
            egress_isolated: ep.egress_isolated,
            policies: names(&ep.policies),
        })
        .collect()
}

fn names(policies: &[(String, String)]) -> Vec<String> {
    policies.iter().map(|(ns, n)| format!("{ns}/{n}")).collect()
}

/// The engine's explanation of `query`, its rules named from `compiled`.
pub fn explain(
    engine: &mut PolicyEngine,
    compiled: &CompiledPolicy,
    query: PolicyQuery,
) -> Result<PolicyExplanation, DaemonError> {
    let party = |p: &PolicyParty| match p {
        PolicyParty::Pod { namespace, name } => Party::Pod(PodKey::new(namespace, name)),
        PolicyParty::Address(ip) => Party::Address(*ip),
    };
    let protocol = match query.protocol {
        PolicyProtocol::Tcp => Protocol::Tcp,
        PolicyProtocol::Udp => Protocol::Udp,
        PolicyProtocol::Sctp => Protocol::Sctp,
    };
    let e = engine
        .explain(&party(&query.from), &party(&query.to), protocol, query.port)
        .map_err(|e| match e {
            ExplainError::UnknownPod { .. } | ExplainError::NoAddress { .. } => {
                DaemonError::local(ApiErrorKind::NotFound, e)
            }
        })?;
    let mut side = |d: Option<(PodKey, Decision)>| {
        d.map(|(pod, decision)| decision_of(engine, compiled, &pod, &decision))
    };
    let egress = side(e.egress);
    let ingress = side(e.ingress);
    Ok(PolicyExplanation {
        query,
        egress,
        ingress,
        allowed: e.allowed,
    })
}

fn decision_of(
    engine: &mut PolicyEngine,
    compiled: &CompiledPolicy,
    pod: &PodKey,
    decision: &Decision,
) -> PolicyDecision {
    let (verdict, rule) = match decision {
        Decision::NotIsolated => (PolicyVerdict::NotIsolated, None),
        Decision::Host => (PolicyVerdict::Host, None),
        Decision::Denied => (PolicyVerdict::Denied, None),
        Decision::Allowed(id) => (
            PolicyVerdict::Allowed,
            Some(
                compiled
                    .rules
                    .get(id)
                    .map_or_else(|| format!("rule #{}", id.0), ToString::to_string),
            ),
        ),
    };
    let policies = match compiled.endpoints.get(pod) {
        Some(ep) => names(&ep.policies),
        None => engine
            .endpoint_policy(pod)
            .map(|ep| names(&ep.policies))
            .unwrap_or_default(),
    };
    PolicyDecision {
        pod: pod.to_string(),
        verdict,
        rule,
        policies,
    }
}
