//! The series read at scrape time: a [`Snapshot`] of the daemon's status and
//! per-endpoint counters, encoded by [`SnapshotCollector`] (a
//! `prometheus-client` collector) while the scrape holds it.

use std::fmt;
use std::sync::{Arc, Mutex};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use sarena_core::api::{DaemonStatus, EndpointStats, EventsStatus, NodeApi};

use super::{Labels, lock};

/// What one scrape reads from the daemon.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// `None` when the status could not be read (then `sarena_ready` is 0).
    pub status: Option<DaemonStatus>,
    /// Endpoints with their counters (those without counters export none).
    pub endpoints: Vec<EndpointStats>,
    /// The events' counts (eBPF dataplane).
    pub events: Option<EventsStatus>,
}

impl Snapshot {
    /// Reads the status and the endpoints' counters; a failure is logged and
    /// leaves its part empty, so a scrape always answers.
    pub async fn read(daemon: &dyn NodeApi) -> Snapshot {
        let status = daemon
            .status()
            .await
            .inspect_err(|error| tracing::warn!(error = %sarena_core::error_chain(&error), "metrics: cannot read the status"))
            .ok();
        let endpoints = daemon
            .endpoint_stats()
            .await
            .inspect_err(|error| tracing::warn!(error = %sarena_core::error_chain(&error), "metrics: cannot read the counters"))
            .unwrap_or_default();
        let events = crate::events::installed().and_then(|e| {
            e.status()
                .inspect_err(|error| tracing::warn!(error = %sarena_core::error_chain(&error), "metrics: cannot read the event counts"))
                .ok()
        });
        Snapshot {
            status,
            endpoints,
            events,
        }
    }

    /// Forgets the pods' names and namespaces (their series keep the
    /// container id and interface).
    pub fn hide_pod_names(&mut self) {
        for stats in &mut self.endpoints {
            let pod = &mut stats.endpoint.spec.pod;
            pod.name = None;
            pod.namespace = None;
        }
    }
}

/// Encodes the snapshot in place at scrape time. Clones share the snapshot.
#[derive(Debug, Clone)]
pub struct SnapshotCollector {
    current: Arc<Mutex<Option<Snapshot>>>,
    endpoint_limit: usize,
}

impl SnapshotCollector {
    /// A collector exporting per-endpoint series for at most `endpoint_limit` endpoints.
    pub fn new(endpoint_limit: usize) -> Self {
        SnapshotCollector {
            current: Arc::default(),
            endpoint_limit,
        }
    }

    /// The snapshot the next encoding shows.
    pub fn set(&self, snapshot: Snapshot) {
        *lock(&self.current) = Some(snapshot);
    }

    /// Forgets the snapshot (nothing is encoded until the next `set`).
    pub fn clear(&self) {
        *lock(&self.current) = None;
    }
}

impl Collector for SnapshotCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        match &*lock(&self.current) {
            Some(snapshot) => encode(snapshot, self.endpoint_limit, &mut encoder),
            None => Ok(()),
        }
    }
}

pub(super) fn gauges<I>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    samples: I,
) -> fmt::Result
where
    I: IntoIterator<Item = (Labels, u64)>,
{
    let mut metric = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (labels, value) in samples {
        let value = i64::try_from(value).unwrap_or(i64::MAX);
        ConstGauge::new(value).encode(metric.encode_family(&labels)?)?;
    }
    Ok(())
}

fn gauge(encoder: &mut DescriptorEncoder, name: &str, help: &str, value: u64) -> fmt::Result {
    let mut metric = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
    ConstGauge::new(i64::try_from(value).unwrap_or(i64::MAX))
        .encode(metric.encode_family(&Labels::new())?)
}

fn endpoint_labels(stats: &EndpointStats) -> Labels {
    let e = &stats.endpoint;
    vec![
        (
            "namespace",
            e.spec.pod.namespace.clone().unwrap_or_default(),
        ),
        ("pod", e.spec.pod.name.clone().unwrap_or_default()),
        ("container_id", e.spec.owner.container_id.clone()),
        ("interface", e.spec.owner.ifname.clone()),
    ]
}

fn encode(snapshot: &Snapshot, limit: usize, encoder: &mut DescriptorEncoder) -> fmt::Result {
    let ready = snapshot.status.as_ref().is_some_and(|s| s.health.ready);
    gauge(
        encoder,
        "sarena_ready",
        "1 when the daemon can serve ADD (GET /v1/daemon/health)",
        u64::from(ready),
    )?;
    if let Some(status) = &snapshot.status {
        encode_status(status, encoder)?;
    }
    super::events::encode(snapshot.events.as_ref(), encoder)?;
    let counted: Vec<&EndpointStats> = snapshot
        .endpoints
        .iter()
        .filter(|s| s.counters.is_some())
        .collect();
    let shown = &counted[..counted.len().min(limit)];
    gauge(
        encoder,
        "sarena_metrics_endpoints_omitted",
        "Endpoints with counters left out of the per-endpoint series (--metrics-endpoint-limit)",
        (counted.len() - shown.len()) as u64,
    )?;
    encode_endpoints(shown, encoder)
}

fn encode_status(status: &DaemonStatus, encoder: &mut DescriptorEncoder) -> fmt::Result {
    gauges(
        encoder,
        "sarena_build_info",
        "The daemon's version and dataplane mode (always 1)",
        [(
            vec![
                ("version", status.version.clone()),
                ("dataplane", status.dataplane.mode.clone()),
            ],
            1,
        )],
    )?;
    let pool = |p: &sarena_core::api::PoolUsage| vec![("pool", p.name.clone())];
    gauges(
        encoder,
        "sarena_ipam_pool_capacity",
        "Addresses a pool can hand out",
        status.pools.iter().map(|p| (pool(p), p.capacity)),
    )?;
    gauges(
        encoder,
        "sarena_ipam_pool_used",
        "Addresses a pool has handed out",
        status.pools.iter().map(|p| (pool(p), p.used)),
    )?;
    gauge(
        encoder,
        "sarena_ipam_allocations",
        "Allocations, with or without an endpoint",
        status.allocations,
    )?;
    gauge(
        encoder,
        "sarena_ipam_leases",
        "Allocations waiting for their endpoint (each expires)",
        status.leases,
    )?;
    gauge(
        encoder,
        "sarena_endpoints",
        "Registered endpoints",
        status.endpoints,
    )?;
    if let Some(queue) = &status.delete_queue {
        gauge(
            encoder,
            "sarena_delete_queue_pending",
            "Deletions waiting in the plugin's deletion queue",
            queue.pending,
        )?;
    }
    if let Some(network) = &status.network {
        super::cluster::encode(network, encoder)?;
    }
    if let Some(programs) = &status.dataplane.programs {
        gauge(
            encoder,
            "sarena_dataplane_programs_attached",
            "Endpoints whose host veth runs the daemon's eBPF programs on both hooks",
            programs.attached,
        )?;
        gauge(
            encoder,
            "sarena_dataplane_programs_detached",
            "Endpoints missing a program on their host veth (should be 0)",
            programs.detached.len() as u64,
        )?;
    }
    if let Some(routing) = &status.dataplane.host_routing {
        gauge(
            encoder,
            "sarena_host_routing_peer_pod_cidrs",
            "Other nodes' pod CIDRs the eBPF programs route to and from without the host stack",
            routing.peer_pod_cidrs.len() as u64,
        )?;
        for (name, value) in &routing.counters {
            let metric = format!("sarena_host_routing_{name}");
            let help = format!(
                "eBPF host routing counter {name} of the node (sarena_common::peers::NodeCounters), summed over CPUs"
            );
            let mut family =
                encoder.encode_descriptor(&metric, &help, None, MetricType::Counter)?;
            ConstCounter::new(*value).encode(family.encode_family(&Labels::default())?)?;
        }
    }
    Ok(())
}

/// One counter family per scalar eBPF counter (named after its field), and
/// drops by reason: the names come from the counters themselves, so new
/// ones are exported as they appear.
fn encode_endpoints(shown: &[&EndpointStats], encoder: &mut DescriptorEncoder) -> fmt::Result {
    let Some(first) = shown.iter().find_map(|s| s.counters.as_ref()) else {
        return Ok(());
    };
    let labels: Vec<Labels> = shown.iter().map(|s| endpoint_labels(s)).collect();
    for field in first.counters.keys() {
        let name = format!("sarena_endpoint_{field}");
        let help = format!(
            "eBPF counter {field} of the endpoint (sarena_common::EndpointCounters), summed over CPUs"
        );
        let mut metric = encoder.encode_descriptor(&name, &help, None, MetricType::Counter)?;
        for (stats, labels) in shown.iter().zip(&labels) {
            let value = stats.counters.as_ref().map_or(0, |c| c.get(field));
            ConstCounter::new(value).encode(metric.encode_family(labels)?)?;
        }
    }
    let mut metric = encoder.encode_descriptor(
        "sarena_endpoint_drops",
        "Frames the endpoint's eBPF programs dropped, by reason (sarena_common::DropReason)",
        None,
        MetricType::Counter,
    )?;
    for (stats, labels) in shown.iter().zip(&labels) {
        let Some(counters) = &stats.counters else {
            continue;
        };
        for (reason, value) in &counters.drops {
            let mut with_reason = labels.clone();
            with_reason.push(("reason", reason.clone()));
            ConstCounter::new(*value).encode(metric.encode_family(&with_reason)?)?;
        }
    }
    Ok(())
}
