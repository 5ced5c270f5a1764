//! [`DaemonSessions`]: the node state a Kubernetes-mode session opens —
//! `Registry` with pools from the podCIDRs, the deletion queue replayed, the
//! dataplane set up and reconciled, leases expired in the background — as
//! the supervisor's [`NodeSessions`].

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use sarena_core::api::NodeApi;
use sarena_core::cluster::{
    ClusterError, NodeSessions, SessionFile, SessionParams, session_config,
};
use sarena_core::node::{NodeConfig, NodeError, Registry};
use sarena_core::plugin::DeleteQueue;
use tokio::task::JoinHandle;

use crate::app::{lease_check_interval, spawn_lease_expiry};
use crate::dataplane::{DataplaneParts, start_on};
use crate::metrics::Metrics;
use crate::operated::KubernetesCell;

use super::identity::IdentityHub;

/// The daemon's node state for the supervisor.
pub struct DaemonSessions {
    state_dir: PathBuf,
    queue: DeleteQueue,
    base: NodeConfig,
    dataplane: DataplaneParts,
    file: SessionFile,
    /// The open session's lease-expiry task.
    leases: Mutex<Option<JoinHandle<()>>>,
    /// The status's Kubernetes part: the session's podCIDRs go there.
    status: Option<KubernetesCell>,
    /// Where replays and reconciliations are counted.
    metrics: Option<Arc<Metrics>>,
    /// Pod identity: told about every session's node.
    identity: Option<IdentityHub>,
}

impl std::fmt::Debug for DaemonSessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DaemonSessions")
            .field("state_dir", &self.state_dir)
            .field("file", &self.file)
            .finish_non_exhaustive()
    }
}

impl DaemonSessions {
    /// The state under `state_dir`, configured by `base` (its default
    /// pool's CIDRs are replaced by each session's podCIDRs), deletions
    /// queued in `queue`, the dataplane on `dataplane`.
    pub fn new(
        state_dir: PathBuf,
        queue: DeleteQueue,
        base: NodeConfig,
        dataplane: DataplaneParts,
    ) -> Self {
        DaemonSessions {
            file: SessionFile::in_dir(&state_dir),
            state_dir,
            queue,
            base,
            dataplane,
            leases: Mutex::new(None),
            status: None,
            metrics: None,
            identity: None,
        }
    }

    /// Reports each opened session's podCIDRs in `status` and counts its
    /// queue replay and dataplane reconciliation into `metrics`.
    pub fn with_observers(mut self, status: KubernetesCell, metrics: Option<Arc<Metrics>>) -> Self {
        self.status = Some(status);
        self.metrics = metrics;
        self
    }

    /// Hands each session's node to `hub`, which keeps its endpoints' labels.
    pub fn with_identity(mut self, hub: IdentityHub) -> Self {
        self.identity = Some(hub);
        self
    }

    /// Stops the lease-expiry task and waits until it is gone (with the
    /// handle on the store it holds).
    async fn stop_leases(&self) {
        let task = self
            .leases
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take();
        if let Some(task) = task {
            task.abort();
            let _ = task.await;
        }
    }
}

fn open_error(
    session: &SessionParams,
) -> impl FnOnce(Box<dyn std::error::Error + Send + Sync>) -> ClusterError + use<> {
    let pod_cidrs = format!("{:?}", session.pod_cidrs);
    move |source| ClusterError::Open { pod_cidrs, source }
}

#[async_trait]
impl NodeSessions for DaemonSessions {
    fn stored(&self) -> Result<Option<SessionParams>, ClusterError> {
        self.file.load()
    }

    async fn open(&self, session: &SessionParams) -> Result<Arc<dyn NodeApi>, ClusterError> {
        let config =
            session_config(&self.base, session).map_err(|e| open_error(session)(Box::new(e)))?;
        let state_dir = self.state_dir.clone();
        let node_config = config.clone();
        let node = tokio::task::spawn_blocking(move || Registry::open(&state_dir, node_config))
            .await
            .unwrap_or_else(|source| Err(NodeError::Task { source }))
            .map_err(|e| open_error(session)(Box::new(e)))?;
        let report = self
            .queue
            .replay(&node)
            .await
            .map_err(|e| open_error(session)(Box::new(e)))?;
        if let Some(m) = &self.metrics {
            m.replay(&report);
        }
        if !report.done.is_empty() || report.remaining > 0 {
            tracing::info!(
                dir = %self.queue.dir().display(),
                done = report.done.len(),
                remaining = report.remaining,
                "deletion queue replayed"
            );
        }
        let (daemon, reconciled) = start_on(&self.dataplane, &config, node.clone())
            .await
            .map_err(|e| open_error(session)(Box::new(e)))?;
        if let (Some(m), Some(report)) = (&self.metrics, &reconciled) {
            m.reconcile(report);
        }
        if let Some(cell) = &self.status
            && let Some(status) = cell
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .as_mut()
        {
            status.pod_cidrs = session.pod_cidrs.clone();
        }
        self.file.store(session)?;
        if let Some(hub) = &self.identity {
            hub.open(node.clone());
        }
        self.stop_leases().await;
        if let Some(every) = lease_check_interval(config.lease_seconds) {
            *self
                .leases
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()) =
                Some(spawn_lease_expiry(node, every));
        }
        Ok(daemon)
    }

    async fn close(&self) {
        if let Some(hub) = &self.identity {
            hub.close();
        }
        self.stop_leases().await;
    }
}
