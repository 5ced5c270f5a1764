//! The daemon's Prometheus metrics (`--metrics-listen`), kept and encoded by
//! the `prometheus-client` crate in the Prometheus text format (0.0.4).
//!
//! Two kinds of series:
//! - recorded as things happen ([`Metrics`]): API request latency by
//!   method, route template and status (a [`RequestObserver`]); the
//!   outcomes of the daemon's operations (allocate, release, endpoint
//!   create and delete, GC), i.e. the ADDs and DELs it sees; deletion-queue
//!   replays; dataplane reconciles;
//! - read at scrape time ([`snapshot`]): health, pools, endpoints, leases,
//!   the deletion queue's length, the eBPF programs' attachment, and each
//!   endpoint's eBPF counters from the pinned per-CPU map; in Kubernetes
//!   mode, rejected peers by reason and the VXLAN filter's drops. Nothing is added
//!   to the packet path: the programs count anyway, a scrape reads the map.
//!
//! Every label has a bounded set of values: routes are templates, outcomes
//! are error kinds, and per-endpoint series exist only for live endpoints,
//! at most `--metrics-endpoint-limit` of them (node-wide sums cover the
//! rest). The names are listed in docs/metrics.md.

mod cluster;
mod events;
mod labels;
mod policy;
mod serve;
pub mod snapshot;

use std::sync::Mutex;
use std::time::Duration;

use hyper::{Method, StatusCode};
use prometheus_client::encoding::prometheus_text;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use sarena_core::api::DaemonError;
use sarena_core::api::NodeApi;
use sarena_core::dataplane::ReconcileReport;
use sarena_core::delqueue::ReplayReport;

use crate::routes::RequestObserver;
pub use labels::{PodNames, method_label};
pub use policy::PolicyMetrics;
pub use serve::{DEFAULT_LIMITS, MetricsError, ServeOptions, bind, check_addr, serve};
use snapshot::{Snapshot, SnapshotCollector};

/// Per-endpoint series are exported for at most this many endpoints unless
/// `--metrics-endpoint-limit` says otherwise.
pub const DEFAULT_ENDPOINT_LIMIT: usize = 1024;

/// Labels as `(name, value)` pairs.
type Labels = Vec<(&'static str, String)>;

type LatencyFamily = Family<Labels, Histogram, fn() -> Histogram>;

/// The daemon's metrics: what is recorded as it happens, and the registry
/// that also reads the scrape-time snapshot.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    requests: LatencyFamily,
    operations: Family<Labels, Counter>,
    replayed: Counter,
    replays: Counter,
    reconciles: Counter,
    reconcile_attached: Counter,
    reconcile_removed: Counter,
    policy: PolicyMetrics,
    snapshot: SnapshotCollector,
    /// One scrape at a time: the snapshot is shared with the collector.
    scrape: tokio::sync::Mutex<()>,
}

/// API latency buckets: 100 µs to ~3.3 s, doubling.
fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.0001, 2.0, 16))
}

impl Metrics {
    /// Registers every series; per-endpoint ones for at most `endpoint_limit` endpoints.
    pub fn new(endpoint_limit: usize) -> Metrics {
        let mut registry = Registry::default();
        let requests: LatencyFamily = Family::new_with_constructor(latency_histogram);
        registry.register(
            "sarena_api_request_duration_seconds",
            "Time to answer an API request, by method, route template and HTTP status",
            requests.clone(),
        );
        let operations = Family::<Labels, Counter>::default();
        registry.register(
            "sarena_operations",
            "Operations the daemon performed for the plugin (allocate = ADD's IPAM step, \
             endpoint_create = ADD's registration, endpoint_delete = DEL, endpoint_unregister = a \
             repeated ADD replacing its endpoint, release, gc), by outcome \
             (ok, noop when there was nothing to do, else the API error kind)",
            operations.clone(),
        );
        let counter = |registry: &mut Registry, name: &str, help: &str| {
            let c = Counter::default();
            registry.register(name, help, c.clone());
            c
        };
        let replays = counter(
            &mut registry,
            "sarena_delete_queue_replays",
            "Replays of the plugin's deletion queue run by the daemon",
        );
        let replayed = counter(
            &mut registry,
            "sarena_delete_queue_replayed",
            "Queued deletions the daemon's replays performed",
        );
        let reconciles = counter(
            &mut registry,
            "sarena_dataplane_reconciles",
            "Dataplane reconciliations with the registry (at start-up)",
        );
        let reconcile_attached = counter(
            &mut registry,
            "sarena_dataplane_reconcile_attached",
            "Endpoints a reconciliation found missing from the dataplane and attached",
        );
        let reconcile_removed = counter(
            &mut registry,
            "sarena_dataplane_reconcile_removed",
            "Stale dataplane entries (ifnames, pod addresses) a reconciliation removed",
        );
        let policy = PolicyMetrics::register(&mut registry);
        let snapshot = SnapshotCollector::new(endpoint_limit);
        registry.register_collector(Box::new(snapshot.clone()));
        Metrics {
            registry,
            requests,
            operations,
            replayed,
            replays,
            reconciles,
            reconcile_attached,
            reconcile_removed,
            policy,
            snapshot,
            scrape: tokio::sync::Mutex::new(()),
        }
    }

    /// Counts one operation and its outcome: `ok`, `noop`, or the error's kind.
    pub fn operation<T>(
        &self,
        operation: &'static str,
        result: &Result<T, DaemonError>,
        noop: bool,
    ) {
        let outcome = match result {
            Ok(_) if noop => "noop".to_owned(),
            Ok(_) => "ok".to_owned(),
            Err(e) => e.to_body().kind.as_str().to_owned(),
        };
        self.operations
            .get_or_create(&vec![
                ("operation", operation.to_owned()),
                ("outcome", outcome),
            ])
            .inc();
    }

    /// Counts a replay of the deletion queue.
    pub fn replay(&self, report: &ReplayReport) {
        self.replays.inc();
        self.replayed.inc_by(report.done.len() as u64);
    }

    /// Counts a dataplane reconciliation.
    pub fn reconcile(&self, report: &ReconcileReport) {
        self.reconciles.inc();
        self.reconcile_attached.inc_by(report.attached.len() as u64);
        self.reconcile_removed.inc_by(report.removed.len() as u64);
    }

    /// NetworkPolicy's series (the policy hub records them).
    pub fn policy(&self) -> &PolicyMetrics {
        &self.policy
    }

    /// One scrape: reads the snapshot from `daemon`, then encodes every series.
    pub async fn render(&self, daemon: &dyn NodeApi) -> Result<String, std::fmt::Error> {
        self.render_for(daemon, PodNames::Shown).await
    }

    /// [`Metrics::render`], with pod names and namespaces as `names` says.
    pub async fn render_for(
        &self,
        daemon: &dyn NodeApi,
        names: PodNames,
    ) -> Result<String, std::fmt::Error> {
        let _one_at_a_time = self.scrape.lock().await;
        let mut snapshot = Snapshot::read(daemon).await;
        if names == PodNames::Hidden {
            snapshot.hide_pod_names();
        }
        self.snapshot.set(snapshot);
        let mut out = String::new();
        let encoded = prometheus_text::encode(&mut out, &self.registry);
        self.snapshot.clear();
        encoded.map(|()| out)
    }
}

impl RequestObserver for Metrics {
    fn observe(&self, method: &Method, route: &'static str, status: StatusCode, elapsed: Duration) {
        let labels = vec![
            ("method", method_label(method).to_owned()),
            ("route", route.to_owned()),
            ("status", status.as_u16().to_string()),
        ];
        self.requests
            .get_or_create(&labels)
            .observe(elapsed.as_secs_f64());
    }
}

/// Shared state behind a mutex that tolerates a panicked holder.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod dashboard_tests;
#[cfg(test)]
mod tests;
