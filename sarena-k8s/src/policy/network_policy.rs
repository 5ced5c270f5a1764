//! `networking.k8s.io/v1` NetworkPolicy → [`Policy`]. Every field is
//! hostile, and nothing unreadable may open traffic:
//!
//! - an unreadable `podSelector` selects every pod of the namespace, for
//!   the directions the policy isolates, and the policy allows nothing;
//! - an unreadable peer or port is dropped (its rule allows less); a rule
//!   whose every peer, or every port, is unreadable allows nothing (it keeps
//!   its index, with a peer that selects nothing);
//! - an `ipBlock` with host bits set (`10.1.2.3/24`) is canonicalised; an
//!   `except` outside its `cidr` is dropped (it excludes nothing), one that
//!   covers the whole `cidr` or cannot be read drops the peer;
//! - an unknown `policyTypes` entry isolates both directions.
//!
//! Each dropped part comes back as a [`Warning`] for the caller to log.

use ipnet::IpNet;
use k8s_openapi::api::networking::v1 as net;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use sarena_core::policy::{Peer, Policy, PortRef, PortSpec, Protocol, Rule};

use super::selector::{label_selector, nothing};
use super::warning::Warning;

/// The policy `np` means, with what was dropped; `None` for an object
/// without a namespace or a name.
pub fn network_policy(np: &net::NetworkPolicy) -> Option<(Policy, Vec<Warning>)> {
    let namespace = np.metadata.namespace.clone().filter(|n| !n.is_empty())?;
    let name = np.metadata.name.clone().filter(|n| !n.is_empty())?;
    let mut warnings = Vec::new();
    let spec = np.spec.clone().unwrap_or_default();
    let ingress_rules = spec.ingress.unwrap_or_default();
    let egress_rules = spec.egress.unwrap_or_default();
    let (ingress_isolation, egress_isolation) = isolation(
        spec.policy_types.as_deref(),
        !egress_rules.is_empty(),
        &mut warnings,
    );
    let mut policy = Policy {
        namespace,
        name,
        ingress_isolation,
        egress_isolation,
        ..Policy::default()
    };
    match spec.pod_selector.as_ref().map(label_selector) {
        None => {}
        Some(Ok(selector)) => policy.pod_selector = selector,
        Some(Err((field, problem))) => {
            warnings.push(Warning::new(
                format!("spec.podSelector.{field}"),
                format!(
                    "{problem}: the policy selects every pod of its namespace and allows nothing"
                ),
            ));
            return Some((policy, warnings));
        }
    }
    policy.ingress = ingress_rules
        .iter()
        .enumerate()
        .map(|(i, r)| {
            rule(
                &format!("spec.ingress[{i}]"),
                "from",
                r.from.as_deref(),
                r.ports.as_deref(),
                &mut warnings,
            )
        })
        .collect();
    policy.egress = egress_rules
        .iter()
        .enumerate()
        .map(|(i, r)| {
            rule(
                &format!("spec.egress[{i}]"),
                "to",
                r.to.as_deref(),
                r.ports.as_deref(),
                &mut warnings,
            )
        })
        .collect();
    Some((policy, warnings))
}

/// (ingress, egress) isolation from `policyTypes` or its default.
fn isolation(
    types: Option<&[String]>,
    has_egress: bool,
    warnings: &mut Vec<Warning>,
) -> (bool, bool) {
    let Some(types) = types.filter(|t| !t.is_empty()) else {
        return (true, has_egress);
    };
    let (mut ingress, mut egress) = (false, false);
    for (i, t) in types.iter().enumerate() {
        match t.as_str() {
            "Ingress" => ingress = true,
            "Egress" => egress = true,
            other => {
                warnings.push(Warning::new(
                    format!("spec.policyTypes[{i}]"),
                    format!("unknown policy type {other:?}: both directions are isolated"),
                ));
                return (true, true);
            }
        }
    }
    (ingress, egress)
}

/// One rule at `path`; `peers_field` is `from` or `to`.
fn rule(
    path: &str,
    peers_field: &str,
    peers: Option<&[net::NetworkPolicyPeer]>,
    ports: Option<&[net::NetworkPolicyPort]>,
    warnings: &mut Vec<Warning>,
) -> Rule {
    let given_peers = peers.unwrap_or_default();
    let given_ports = ports.unwrap_or_default();
    let read_peers: Vec<Peer> = given_peers
        .iter()
        .enumerate()
        .filter_map(|(i, p)| {
            peer(p)
                .map_err(|(field, problem)| {
                    warnings.push(Warning::new(
                        format!("{path}.{peers_field}[{i}]{field}"),
                        format!("{problem}: this peer is dropped"),
                    ))
                })
                .ok()
        })
        .collect();
    let read_ports: Vec<PortSpec> = given_ports
        .iter()
        .enumerate()
        .filter_map(|(i, p)| {
            port(p)
                .map_err(|(field, problem)| {
                    warnings.push(Warning::new(
                        format!("{path}.ports[{i}]{field}"),
                        format!("{problem}: this port is dropped"),
                    ))
                })
                .ok()
        })
        .collect();
    let no_peer = !given_peers.is_empty() && read_peers.is_empty();
    let no_port = !given_ports.is_empty() && read_ports.is_empty();
    if no_peer || no_port {
        let what = if no_peer { peers_field } else { "ports" };
        warnings.push(Warning::new(
            path.to_owned(),
            format!("no entry of {what} could be read: the rule allows nothing"),
        ));
        return Rule {
            peers: vec![Peer::Pods {
                pods: Some(nothing()),
                namespaces: None,
            }],
            ports: read_ports,
        };
    }
    Rule {
        peers: read_peers,
        ports: read_ports,
    }
}

type Unreadable = (String, String);

/// One peer; on error a path under the peer (`.ipBlock.cidr`) and why.
fn peer(p: &net::NetworkPolicyPeer) -> Result<Peer, Unreadable> {
    let selectors = p.pod_selector.is_some() || p.namespace_selector.is_some();
    match (&p.ip_block, selectors) {
        (Some(_), true) => Err((
            String::new(),
            "an ipBlock together with a selector".to_owned(),
        )),
        (None, false) => Err((
            String::new(),
            "neither an ipBlock nor a selector".to_owned(),
        )),
        (Some(block), false) => ip_block(block),
        (None, true) => {
            let read = |s: &Option<_>, name: &str| {
                s.as_ref()
                    .map(label_selector)
                    .transpose()
                    .map_err(|(field, problem)| (format!(".{name}.{field}"), problem))
            };
            Ok(Peer::Pods {
                pods: read(&p.pod_selector, "podSelector")?,
                namespaces: read(&p.namespace_selector, "namespaceSelector")?,
            })
        }
    }
}

fn ip_block(block: &net::IPBlock) -> Result<Peer, Unreadable> {
    let cidr = parse_cidr(&block.cidr).ok_or_else(|| {
        (
            ".ipBlock.cidr".to_owned(),
            format!("{:?} is no CIDR", block.cidr),
        )
    })?;
    let mut except = Vec::new();
    for (i, text) in block.except.iter().flatten().enumerate() {
        let field = || format!(".ipBlock.except[{i}]");
        let e = parse_cidr(text).ok_or_else(|| (field(), format!("{text:?} is no CIDR")))?;
        if e.contains(&cidr) {
            return Err((field(), format!("{e} excludes the whole cidr {cidr}")));
        }
        // Disjoint from the cidr: it excludes nothing the cidr allows.
        if cidr.contains(&e) {
            except.push(e);
        }
    }
    except.sort();
    except.dedup();
    Ok(Peer::IpBlock { cidr, except })
}

/// A CIDR with its host bits cleared; `None` if `text` is none.
fn parse_cidr(text: &str) -> Option<IpNet> {
    text.parse::<IpNet>().ok().map(|n| n.trunc())
}

/// One port; on error a path under it (`.port`) and why.
fn port(p: &net::NetworkPolicyPort) -> Result<PortSpec, Unreadable> {
    let protocol = match p.protocol.as_deref() {
        None | Some("TCP") => Protocol::Tcp,
        Some("UDP") => Protocol::Udp,
        Some("SCTP") => Protocol::Sctp,
        Some(other) => {
            return Err((
                ".protocol".to_owned(),
                format!("unknown protocol {other:?}"),
            ));
        }
    };
    let port = match &p.port {
        None => None,
        Some(IntOrString::Int(n)) => {
            Some(PortRef::Number(port_number(*n).ok_or_else(|| {
                (".port".to_owned(), format!("{n} is no port (1-65535)"))
            })?))
        }
        Some(IntOrString::String(name)) if is_port_name(name) => Some(PortRef::Named(name.clone())),
        Some(IntOrString::String(name)) => {
            return Err((".port".to_owned(), format!("{name:?} is no port name")));
        }
    };
    let end_port = match (p.end_port, &port) {
        (None, _) => None,
        (Some(end), Some(PortRef::Number(start))) => match port_number(end) {
            Some(end) if end >= *start => Some(end),
            _ => {
                return Err((
                    ".endPort".to_owned(),
                    format!("{end} is no port at or above {start}"),
                ));
            }
        },
        (Some(_), _) => {
            return Err((
                ".endPort".to_owned(),
                "endPort without a numeric port".to_owned(),
            ));
        }
    };
    Ok(PortSpec {
        protocol,
        port,
        end_port,
    })
}

fn port_number(n: i32) -> Option<u16> {
    u16::try_from(n).ok().filter(|p| *p != 0)
}

/// An IANA service name, as container ports are named: 1–15 of `a-z0-9-`,
/// at least one letter, no `-` at either end nor two in a row.
pub fn is_port_name(name: &str) -> bool {
    (1..=15).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && name.bytes().any(|b| b.is_ascii_lowercase())
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--")
}

#[cfg(test)]
#[path = "network_policy_tests.rs"]
mod tests;
