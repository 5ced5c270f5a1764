//! The embedded paths ([`PathKind::is_embedded`]): their setup (an
//! `EmbeddedNode` with a client and a server pod, and on the policy path
//! [`netpol::POLICIES`] NetworkPolicies compiled by the engine and applied),
//! and their checks around the rounds: the eBPF counters must show the
//! traffic redirected pod → pod ([`EbpfCheck`]), and the probes must show
//! the policies in force, or nothing isolated on the path without them
//! ([`PolicyCheck`]).

use std::sync::Arc;

use sarena_common::EndpointCounters;
use serde::{Deserialize, Serialize};

use super::ebpf_check::{EbpfCheck, read_totals};
use super::embedded::EmbeddedNode;
use super::netpol::{self, PolicyStats};
use super::paths::{Endpoints, PreparedPath};
use super::policy_check::{self, PolicyCheck, Probe};
use super::results::{PathKind, PathSample};
use super::service;
use crate::BenchError;

/// What keeps an embedded path alive, and what its setup wrote.
#[derive(Debug)]
pub struct EmbeddedPath {
    /// Sarena in process, with the two pods (client first).
    pub node: EmbeddedNode,
    /// The policies compiled and applied (the policy path only).
    pub stats: Option<PolicyStats>,
}

/// Sets up the embedded path `kind`: node, client and server pods, and on
/// the policy path the policies; `node_index` picks the pool.
pub fn prepare(kind: PathKind, node_index: u8) -> Result<(Endpoints, EmbeddedPath), BenchError> {
    let subnet = 150u8.saturating_add(node_index % 100);
    let mut node = EmbeddedNode::start(kind.label(), subnet)?;
    let client = node.add_pod("client")?;
    let server = node.add_pod("server")?;
    let ip = |i: usize, role: &str| {
        node.pods()[i].ip.ok_or_else(|| BenchError::Verify {
            what: format!(
                "{}: ADD of the {role} pod gave no IPv4 address",
                kind.label()
            ),
        })
    };
    let (client_ip, server_ip) = (ip(client, "client")?, ip(server, "server")?);
    let stats = if kind == PathKind::SarenaEbpfEmbeddedPolicies {
        let pods = [
            netpol::pod(&node.pods()[client].name, "client", vec![client_ip]),
            netpol::pod(&node.pods()[server].name, "server", vec![server_ip]),
        ];
        let compiled = netpol::compile(&pods, &netpol::policies(netpol::POLICIES));
        let mut stats = netpol::stats_of(&compiled, netpol::POLICIES);
        let isolated = compiled
            .endpoints
            .values()
            .filter(|e| e.ingress_isolated && e.egress_isolated)
            .count();
        if isolated != 2 {
            return Err(BenchError::Verify {
                what: format!(
                    "{}: the engine isolates {isolated} of the 2 pods both ways",
                    kind.label()
                ),
            });
        }
        let applied = node.apply_policy(Arc::new(compiled))?;
        stats.writes = applied.writes;
        stats.failed_writes = applied.failed;
        if applied.failed > 0 {
            return Err(BenchError::Verify {
                what: format!(
                    "{}: {} policy map writes failed (full maps: {:?})",
                    kind.label(),
                    applied.failed,
                    applied.full_maps
                ),
            });
        }
        Some(stats)
    } else {
        None
    };
    let endpoints = Endpoints {
        client_ns: node.pods()[client].netns.path().to_owned(),
        server_ns: node.pods()[server].netns.path().to_owned(),
        server_ip,
        cluster_ip: None,
        fixed_rr_port: Some(service::RR_PORT),
    };
    Ok((endpoints, EmbeddedPath { node, stats }))
}

/// The checks of one embedded path.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EmbeddedCheck {
    /// Which path.
    pub path: PathKind,
    /// What the engine compiled and the dataplane wrote (policy path).
    pub stats: Option<PolicyStats>,
    /// The redirect fast path, from the counters around the rounds.
    pub ebpf: Option<EbpfCheck>,
    /// The policies in force (or not), from the probes.
    pub policy: Option<PolicyCheck>,
    /// Checks that could not be made, with why.
    pub errors: Vec<String>,
}

impl EmbeddedCheck {
    /// What failed: an empty list when the path was verified.
    pub fn problems(&self) -> Vec<String> {
        let label = self.path.label();
        let mut problems: Vec<String> = self
            .errors
            .iter()
            .map(|e| format!("check of {label} not made: {e}"))
            .collect();
        match &self.ebpf {
            Some(c) if !c.passed => {
                problems.push(format!("eBPF check of {label}: {}", c.describe()))
            }
            None if self.errors.is_empty() => {
                problems.push(format!("eBPF check of {label}: counters not read"))
            }
            _ => {}
        }
        match &self.policy {
            Some(c) if !c.passed => {
                problems.push(format!("policy check of {label}: {}", c.describe()))
            }
            None if self.errors.is_empty() => {
                problems.push(format!("policy check of {label}: not made"))
            }
            _ => {}
        }
        problems
    }
}

/// An embedded path's state before the rounds.
#[derive(Debug)]
pub struct Before {
    index: usize,
    probe: Result<Probe, String>,
    counters: Result<EndpointCounters, String>,
}

fn chain(e: BenchError) -> String {
    sarena_core::error_chain(&e)
}

/// The probe of `path` (`None`: not an embedded path).
fn probe(path: &PreparedPath) -> Option<Result<Probe, BenchError>> {
    let e = &path.endpoints;
    let dir = path.pin_dir()?;
    let policies = path.embedded()?.stats.map_or(0, |s| s.policies);
    let allowed = netpol::allowed_probe_port(policies.max(1));
    Some(policy_check::probe(
        &e.client_ns,
        &e.server_ns,
        e.server_ip,
        allowed,
        dir,
    ))
}

/// Probes every embedded path and reads its counters (right before the rounds).
pub fn before(prepared: &[PreparedPath]) -> Vec<Before> {
    let mut out = Vec::new();
    for (index, path) in prepared.iter().enumerate() {
        let (Some(dir), Some(probe)) = (path.pin_dir(), probe(path)) else {
            continue;
        };
        out.push(Before {
            index,
            probe: probe.map_err(chain),
            counters: read_totals(dir).map_err(chain),
        });
    }
    out
}

/// Reads the counters again and probes once more (right after the rounds),
/// and gives each embedded path's checks.
pub fn finish(
    prepared: &[PreparedPath],
    befores: Vec<Before>,
    samples: &[Vec<PathSample>],
) -> Vec<EmbeddedCheck> {
    befores
        .into_iter()
        .filter_map(|b| {
            let path = prepared.get(b.index)?;
            let dir = path.pin_dir()?;
            let stats = path.embedded()?.stats;
            let mut errors = Vec::new();
            let after = read_totals(dir).map_err(chain);
            let probe_after = probe(path)?.map_err(chain);
            let iperf_bytes = samples
                .get(b.index)
                .map_or(0, |s| s.iter().map(|s| s.iperf.report.bytes).sum());
            let counters = match (b.counters, after) {
                (Ok(before), Ok(after)) => Some((before, after)),
                (Err(e), _) | (_, Err(e)) => {
                    errors.push(format!("eBPF counters: {e}"));
                    None
                }
            };
            let ebpf = counters
                .as_ref()
                .map(|(before, after)| EbpfCheck::new(before, after, iperf_bytes, false));
            let policy = match (b.probe, probe_after, &counters) {
                (Ok(p0), Ok(p1), Some((before, after))) => {
                    let during = policy_check::policy_drops(after)
                        .saturating_sub(policy_check::policy_drops(before));
                    let allowed = netpol::allowed_probe_port(stats.map_or(1, |s| s.policies));
                    Some(PolicyCheck::new(stats.is_some(), allowed, p0, p1, during))
                }
                (Err(e), _, _) | (_, Err(e), _) => {
                    errors.push(format!("policy probe: {e}"));
                    None
                }
                (_, _, None) => None,
            };
            Some(EmbeddedCheck {
                path: path.kind,
                stats,
                ebpf,
                policy,
                errors,
            })
        })
        .collect()
}
