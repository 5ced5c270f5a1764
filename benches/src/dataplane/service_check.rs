//! Evidence that each Service path did what it says: its kube-proxy rules
//! translated every connection the harness opened to the ClusterIP and the
//! host forwarded the traffic as established connections (the rules'
//! counters), and on the eBPF node the programs sent the server's answers
//! to the host stack because of the host-stack flows map
//! (`host_stack_flow_packets`), redirecting nothing pod → pod. Counters are
//! read after the wait for a quiet machine and after the last round.

use std::net::IpAddr;

use sarena_common::EndpointCounters;
use serde::{Deserialize, Serialize};

use super::paths::{Endpoints, PreparedPath};
use super::results::{PathKind, PathSample};
use super::service::{self, RuleCounters};
use super::{ebpf_check, iperf, prog_stats};
use crate::BenchError;
use crate::node::Contender;

/// One Service port's connections.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortCheck {
    /// The port.
    pub port: u16,
    /// Connections the harness opened to it in the measured runs (at least).
    pub connections: u64,
    /// Packets its DNAT rule translated meanwhile (one per connection).
    pub dnat_packets: u64,
}

/// The eBPF node's counters over a Service path's runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServiceEbpfCounters {
    /// Frames to a local pod sent to the host stack because their flow is in
    /// the host-stack flows map.
    pub host_stack_flow_packets: u64,
    /// Frames redirected pod → pod (must stay 0: a redirected answer would
    /// skip the reverse NAT).
    pub redirected_packets: u64,
    /// Bytes delivered into the node's pods.
    pub to_pod_bytes: u64,
}

/// What one Service path's counters said.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServiceCheck {
    /// The path.
    pub path: PathKind,
    /// Its ClusterIP.
    pub cluster_ip: IpAddr,
    /// The endpoint (the server pod).
    pub server_ip: IpAddr,
    /// Per Service port.
    pub ports: Vec<PortCheck>,
    /// Bytes `KUBE-FORWARD` accepted as established connections.
    pub forwarded_bytes: u64,
    /// Bytes iperf3 received on the path.
    pub iperf_bytes: u64,
    /// The eBPF node's counters (Sarena eBPF only).
    pub ebpf: Option<ServiceEbpfCounters>,
    /// Whether all of it matched.
    pub passed: bool,
}

/// The Service paths' checks and the state of the statistics sysctl.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ServiceResults {
    /// One per measured Service path.
    pub checks: Vec<ServiceCheck>,
    /// `kernel.bpf_stats_enabled` before and after the run (the harness
    /// leaves it alone; when it was already on, every eBPF rate of the run
    /// includes the statistics' cost).
    pub stats_sysctl: (Option<bool>, Option<bool>),
}

/// A Service path's counters at one moment.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// The kube-proxy rules' counters.
    pub rules: RuleCounters,
    /// The eBPF node's counters, summed over its endpoints.
    pub ebpf: Option<EndpointCounters>,
}

fn snapshot(path: &PreparedPath) -> Option<Result<Snapshot, BenchError>> {
    let rules = path.service.as_ref()?;
    let ebpf = path.kind.contender() == Some(Contender::SarenaEbpf);
    Some((|| {
        Ok(Snapshot {
            rules: rules.counters()?,
            ebpf: match (ebpf, path.pin_dir()) {
                (true, Some(dir)) => Some(ebpf_check::read_totals(dir)?),
                _ => None,
            },
        })
    })())
}

/// Every path's snapshot (`None` for the paths that are not Services).
pub fn snapshots(prepared: &[PreparedPath]) -> Vec<Option<Result<Snapshot, BenchError>>> {
    prepared.iter().map(snapshot).collect()
}

impl ServiceCheck {
    /// The check of the Service path `kind` between `endpoints` from its
    /// counters `before` and `after` its measured `samples`.
    pub fn new(
        kind: PathKind,
        endpoints: &Endpoints,
        before: &Snapshot,
        after: &Snapshot,
        samples: &[PathSample],
    ) -> ServiceCheck {
        let rules = after.rules.since(&before.rules);
        let rounds = samples.len() as u64;
        let with_stats = samples.iter().filter(|s| s.programs.is_some()).count() as u64;
        // iperf3: a control and a data connection per run; request/response:
        // one per run, and one per run with the statistics on.
        let connections = |port| match port {
            iperf::PORT => 2 * rounds,
            service::RR_PORT => rounds + with_stats,
            _ => 0,
        };
        let ports: Vec<PortCheck> = rules
            .dnat_packets
            .iter()
            .map(|&(port, dnat_packets)| PortCheck {
                port,
                connections: connections(port),
                dnat_packets,
            })
            .collect();
        let iperf_bytes: u64 = samples.iter().map(|s| s.iperf.report.bytes).sum();
        let ebpf = before
            .ebpf
            .zip(after.ebpf)
            .map(|(b, a)| ServiceEbpfCounters {
                host_stack_flow_packets: a
                    .host_stack_flow_packets
                    .saturating_sub(b.host_stack_flow_packets),
                redirected_packets: a.redirected_packets.saturating_sub(b.redirected_packets),
                to_pod_bytes: a.to_pod_bytes.saturating_sub(b.to_pod_bytes),
            });
        let carried = |bytes: u64| bytes as f64 >= 0.9 * iperf_bytes as f64;
        let passed = rounds > 0
            && ports.len() == service::PORTS.len()
            && ports.iter().all(|p| p.dnat_packets >= p.connections)
            && carried(rules.forwarded_bytes)
            && ebpf.as_ref().is_none_or(|e| {
                e.host_stack_flow_packets > 0
                    && e.redirected_packets == 0
                    && carried(e.to_pod_bytes)
            });
        ServiceCheck {
            path: kind,
            cluster_ip: endpoints.dial_ip(),
            server_ip: endpoints.server_ip,
            ports,
            forwarded_bytes: rules.forwarded_bytes,
            iperf_bytes,
            ebpf,
            passed,
        }
    }

    /// One sentence for the report.
    pub fn describe(&self) -> String {
        let ports: Vec<String> = self
            .ports
            .iter()
            .map(|p| {
                format!(
                    "{} connection(s) to port {} (the harness opened ≥ {})",
                    p.dnat_packets, p.port, p.connections
                )
            })
            .collect();
        let ebpf = self.ebpf.as_ref().map_or(String::new(), |e| {
            format!(
                "; the eBPF counters rose by {} frames sent to the host stack by the \
                 host-stack flows map (`host_stack_flow_packets`), {} redirected pod → pod \
                 and {:.2} GB delivered into the pods",
                e.host_stack_flow_packets,
                e.redirected_packets,
                e.to_pod_bytes as f64 / 1e9
            )
        });
        format!(
            "{} ({} → {}): the DNAT rules translated {}; `KUBE-FORWARD` accepted {:.2} GB \
             of established connections while iperf3 received {:.2} GB{ebpf}: {}",
            self.path.label(),
            self.cluster_ip,
            self.server_ip,
            ports.join(" and "),
            self.forwarded_bytes as f64 / 1e9,
            self.iperf_bytes as f64 / 1e9,
            if self.passed {
                "the traffic went through the Service rules"
            } else {
                "NOT all of the traffic went through the Service rules as it should"
            }
        )
    }
}

/// The checks of every Service path from the snapshots `before` and now;
/// counters that could not be read become errors for the report.
pub fn finish(
    prepared: &[PreparedPath],
    before: Vec<Option<Result<Snapshot, BenchError>>>,
    samples: &[Vec<PathSample>],
    stats_sysctl_before: Option<bool>,
) -> (ServiceResults, Vec<String>) {
    let mut checks = Vec::new();
    let mut errors = Vec::new();
    for ((path, before), samples) in prepared.iter().zip(before).zip(samples) {
        let Some(before) = before else { continue };
        if samples.is_empty() {
            continue;
        }
        match (before, snapshot(path)) {
            (Ok(before), Some(Ok(after))) => checks.push(ServiceCheck::new(
                path.kind,
                &path.endpoints,
                &before,
                &after,
                samples,
            )),
            (Err(e), _) | (_, Some(Err(e))) => errors.push(format!(
                "{} counters: {}",
                path.kind.label(),
                sarena_core::error_chain(&e)
            )),
            (Ok(_), None) => {}
        }
    }
    let results = ServiceResults {
        checks,
        stats_sysctl: (stats_sysctl_before, prog_stats::sysctl_enabled()),
    };
    (results, errors)
}
