//! [`Operated`]: the daemon as the API serves it. A [`Daemon`] decorator
//! that adds what only the daemon process knows to `GET /daemon/status`
//! (its version, the deletion queue's length, Kubernetes mode, the pods'
//! MTU and masquerading) and counts
//! the outcome of every operation the plugin asks for into the metrics.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use sarena_core::api::{
    AllocateRequest, Allocation, Attachment, Daemon, DaemonConfig, DaemonError, DaemonStatus,
    DeleteQueueStatus, Deleted, Endpoint, EndpointCreate, EndpointStats, GcReport, GcRequest,
    Health, Inspect, IpamState, KubernetesStatus, NodeApi, PolicyEndpoint, PolicyExplanation,
    PolicyQuery,
};
use sarena_core::delqueue::DeleteQueue;
use sarena_core::node::NetworkCell;

use crate::kubernetes::PolicyHub;
use crate::metrics::Metrics;

/// See the [module docs](self).
pub struct Operated {
    inner: Arc<dyn NodeApi>,
    queue: Option<DeleteQueue>,
    kubernetes: KubernetesCell,
    network: Option<NetworkCell>,
    metrics: Option<Arc<Metrics>>,
    registered: Option<RegisteredHook>,
    policy: Option<PolicyHub>,
}

/// Called with the owner of every endpoint the API registers.
pub type RegisteredHook = Arc<dyn Fn(&Attachment) + Send + Sync>;

/// The Kubernetes part of the status, shared between [`Operated`] and
/// whoever learns it (Kubernetes mode sets the podCIDRs when a session opens).
pub type KubernetesCell = Arc<Mutex<Option<KubernetesStatus>>>;

impl std::fmt::Debug for Operated {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Operated")
            .field("queue", &self.queue)
            .field("metrics", &self.metrics.is_some())
            .finish_non_exhaustive()
    }
}

impl Operated {
    /// Wraps `inner`; nothing added yet.
    pub fn new(inner: Arc<dyn NodeApi>) -> Self {
        Operated {
            inner,
            queue: None,
            kubernetes: KubernetesCell::default(),
            network: None,
            metrics: None,
            registered: None,
            policy: None,
        }
    }

    /// Answers the NetworkPolicy queries from `hub` (Kubernetes mode).
    pub fn with_policy(mut self, hub: PolicyHub) -> Self {
        self.policy = Some(hub);
        self
    }

    /// Reports the length of `queue` in the status.
    pub fn with_delete_queue(mut self, queue: DeleteQueue) -> Self {
        self.queue = Some(queue);
        self
    }

    /// Counts operations into `metrics`.
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Calls `hook` after each endpoint registered (Kubernetes mode fills
    /// in the pod's labels then).
    pub fn on_registered(mut self, hook: RegisteredHook) -> Self {
        self.registered = Some(hook);
        self
    }

    /// Reads the Kubernetes part of the status from `cell` (shared with
    /// Kubernetes mode, which fills it).
    pub fn with_kubernetes(mut self, cell: KubernetesCell) -> Self {
        self.kubernetes = cell;
        self
    }

    /// Reads the network part of the status (the pods' MTU, masquerading)
    /// from `cell` (shared with whoever learns it).
    pub fn with_network(mut self, cell: NetworkCell) -> Self {
        self.network = Some(cell);
        self
    }

    /// Sets (or, with `None`, clears) the Kubernetes part of the status:
    /// the node served and its podCIDRs, as Kubernetes mode learns them.
    pub fn set_kubernetes(&self, kubernetes: Option<KubernetesStatus>) {
        *self
            .kubernetes
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = kubernetes;
    }

    fn count<T>(&self, operation: &'static str, result: &Result<T, DaemonError>, noop: bool) {
        if let Some(metrics) = &self.metrics {
            metrics.operation(operation, result, noop);
        }
    }

    async fn queue_status(&self) -> Option<DeleteQueueStatus> {
        let queue = self.queue.clone()?;
        let dir = queue.dir().display().to_string();
        let pending = tokio::task::spawn_blocking(move || queue.pending().map(|p| p.len()))
            .await
            .ok()?;
        match pending {
            Ok(n) => Some(DeleteQueueStatus {
                dir,
                pending: n as u64,
            }),
            Err(error) => {
                tracing::warn!(error = %sarena_core::error_chain(&error), "cannot read the deletion queue");
                None
            }
        }
    }
}

#[async_trait]
impl Daemon for Operated {
    async fn config(&self) -> Result<DaemonConfig, DaemonError> {
        self.inner.config().await
    }

    async fn health(&self) -> Result<Health, DaemonError> {
        self.inner.health().await
    }

    async fn allocate(&self, req: AllocateRequest) -> Result<Allocation, DaemonError> {
        let result = self.inner.allocate(req).await;
        self.count("allocate", &result, false);
        result
    }

    async fn release(&self, owner: Attachment) -> Result<bool, DaemonError> {
        let result = self.inner.release(owner).await;
        self.count("release", &result, result.as_ref().is_ok_and(|r| !r));
        result
    }

    async fn create_endpoint(&self, req: EndpointCreate) -> Result<Endpoint, DaemonError> {
        let result = self.inner.create_endpoint(req).await;
        self.count("endpoint_create", &result, false);
        if let (Ok(endpoint), Some(hook)) = (&result, &self.registered) {
            hook(&endpoint.spec.owner);
        }
        result
    }

    async fn delete_endpoint(&self, owner: Attachment) -> Result<bool, DaemonError> {
        let result = self.inner.delete_endpoint(owner).await;
        self.count(
            "endpoint_delete",
            &result,
            result.as_ref().is_ok_and(|d| !d),
        );
        result
    }

    async fn delete_endpoint_and_veth(&self, owner: Attachment) -> Result<Deleted, DaemonError> {
        let result = self.inner.delete_endpoint_and_veth(owner).await;
        let noop = result.as_ref().is_ok_and(|d| !d.deleted);
        self.count("endpoint_delete", &result, noop);
        result
    }

    async fn unregister_endpoint(
        &self,
        owner: Attachment,
    ) -> Result<Option<Endpoint>, DaemonError> {
        let result = self.inner.unregister_endpoint(owner).await;
        let noop = result.as_ref().is_ok_and(Option::is_none);
        self.count("endpoint_unregister", &result, noop);
        result
    }

    async fn endpoint(&self, owner: Attachment) -> Result<Option<Endpoint>, DaemonError> {
        self.inner.endpoint(owner).await
    }

    async fn gc(&self, req: GcRequest) -> Result<GcReport, DaemonError> {
        let result = self.inner.gc(req).await;
        let noop = result
            .as_ref()
            .is_ok_and(|r| r.endpoints_removed.is_empty() && r.allocations_released.is_empty());
        self.count("gc", &result, noop);
        result
    }

    async fn endpoint_stats_of(
        &self,
        owner: Attachment,
    ) -> Result<Option<EndpointStats>, DaemonError> {
        self.inner.endpoint_stats_of(owner).await
    }
}

#[async_trait]
impl Inspect for Operated {
    async fn endpoints(&self) -> Result<Vec<Endpoint>, DaemonError> {
        self.inner.endpoints().await
    }

    async fn ipam_state(&self) -> Result<IpamState, DaemonError> {
        self.inner.ipam_state().await
    }

    async fn status(&self) -> Result<DaemonStatus, DaemonError> {
        let mut status = self.inner.status().await?;
        status.version = env!("CARGO_PKG_VERSION").to_owned();
        status.delete_queue = self.queue_status().await;
        status.kubernetes = self
            .kubernetes
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone();
        status.network = self.network.as_ref().map(|cell| {
            cell.lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .clone()
        });
        Ok(status)
    }

    async fn endpoint_stats(&self) -> Result<Vec<EndpointStats>, DaemonError> {
        self.inner.endpoint_stats().await
    }

    async fn policy_endpoints(&self) -> Result<Vec<PolicyEndpoint>, DaemonError> {
        match &self.policy {
            Some(hub) => hub.endpoints().await,
            None => self.inner.policy_endpoints().await,
        }
    }

    async fn policy_explain(&self, query: PolicyQuery) -> Result<PolicyExplanation, DaemonError> {
        match &self.policy {
            Some(hub) => hub.explain(query).await,
            None => self.inner.policy_explain(query).await,
        }
    }
}

#[cfg(test)]
mod tests;
