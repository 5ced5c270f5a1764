//! `impl Daemon for Registry` and `impl Inspect for Registry`: the registry's
//! answers, over the synchronous operations of `ops.rs`. A registry has no
//! dataplane: it removes no veth and keeps no counters, and says so.
//!
//! Mutations (which fsync) run on tokio's blocking pool when called inside a tokio
//! runtime, so they never stall the async workers; elsewhere they run inline.
//! Reads only take the state mutex and run inline.

use std::sync::Arc;

use async_trait::async_trait;

use super::{Inner, NodeError, Registry};
use crate::api::{
    AllocateRequest, Allocation, Attachment, Daemon, DaemonConfig, DaemonError, DaemonStatus,
    Deleted, Endpoint, EndpointCreate, EndpointStats, GcReport, GcRequest, Health, Inspect,
    IpamState, registry_status,
};

impl Registry {
    /// Runs a blocking operation off the async workers when possible.
    pub(super) async fn blocking<T, F>(&self, f: F) -> Result<T, DaemonError>
    where
        T: Send + 'static,
        F: FnOnce(&Inner) -> Result<T, NodeError> + Send + 'static,
    {
        let inner = Arc::clone(&self.inner);
        let out = match tokio::runtime::Handle::try_current() {
            Ok(handle) => handle
                .spawn_blocking(move || f(&inner))
                .await
                .map_err(|source| NodeError::Task { source })
                .and_then(|r| r),
            Err(_) => f(&inner),
        };
        out.map_err(DaemonError::from)
    }
}

#[async_trait]
impl Daemon for Registry {
    async fn config(&self) -> Result<DaemonConfig, DaemonError> {
        Ok(DaemonConfig {
            mtu: self.mtu(),
            ..self.inner.config.daemon_config()
        })
    }

    async fn health(&self) -> Result<Health, DaemonError> {
        if self.inner.store.write_failure().is_some() {
            // Writes failed: one small write says whether they work again.
            let probe = self
                .blocking(|n| Ok(n.store.probe_write().map_err(|e| crate::error_chain(&e))))
                .await
                .unwrap_or_else(|e| Err(crate::error_chain(&e)));
            if let Err(reason) = probe {
                return Ok(Health {
                    ready: false,
                    message: format!(
                        "state store {} refuses writes, so ADD fails: {reason}",
                        self.inner.store.path().display(),
                    ),
                });
            }
        }
        Ok(match self.inner.lock() {
            Ok(st) => Health {
                ready: true,
                message: format!(
                    "store {} open; {} allocations, {} endpoints",
                    self.inner.store.path().display(),
                    st.allocations.len(),
                    st.endpoints.len()
                ),
            },
            Err(e) => Health {
                ready: false,
                message: crate::error_chain(&e),
            },
        })
    }

    async fn allocate(&self, req: AllocateRequest) -> Result<Allocation, DaemonError> {
        self.blocking(move |n| n.allocate(req, n.now())).await
    }

    async fn release(&self, owner: Attachment) -> Result<bool, DaemonError> {
        self.blocking(move |n| n.release(&owner)).await
    }

    async fn create_endpoint(&self, req: EndpointCreate) -> Result<Endpoint, DaemonError> {
        self.blocking(move |n| n.create_endpoint(req, n.now()))
            .await
    }

    async fn delete_endpoint(&self, owner: Attachment) -> Result<bool, DaemonError> {
        self.blocking(move |n| n.delete_endpoint(&owner)).await
    }

    async fn unregister_endpoint(
        &self,
        owner: Attachment,
    ) -> Result<Option<Endpoint>, DaemonError> {
        self.blocking(move |n| n.unregister_endpoint(&owner, n.now()))
            .await
    }

    async fn endpoint(&self, owner: Attachment) -> Result<Option<Endpoint>, DaemonError> {
        Ok(self.inner.endpoint(&owner)?)
    }

    async fn delete_endpoint_and_veth(&self, owner: Attachment) -> Result<Deleted, DaemonError> {
        // The registry removes no links: the caller does (`veth_removal: false`).
        Ok(Deleted {
            deleted: self.delete_endpoint(owner).await?,
            veth_removal: false,
        })
    }

    async fn endpoint_stats_of(
        &self,
        owner: Attachment,
    ) -> Result<Option<EndpointStats>, DaemonError> {
        Ok(self
            .endpoint(owner)
            .await?
            .map(EndpointStats::registry_only))
    }

    async fn gc(&self, req: GcRequest) -> Result<GcReport, DaemonError> {
        self.blocking(move |n| n.gc(&req.valid)).await
    }
}

#[async_trait]
impl Inspect for Registry {
    async fn endpoints(&self) -> Result<Vec<Endpoint>, DaemonError> {
        Ok(self.inner.endpoints()?)
    }

    async fn ipam_state(&self) -> Result<IpamState, DaemonError> {
        Ok(self.inner.ipam_state()?)
    }

    async fn status(&self) -> Result<DaemonStatus, DaemonError> {
        registry_status(self).await
    }

    async fn endpoint_stats(&self) -> Result<Vec<EndpointStats>, DaemonError> {
        Ok(self
            .endpoints()
            .await?
            .into_iter()
            .map(EndpointStats::registry_only)
            .collect())
    }

    async fn policy_endpoints(&self) -> Result<Vec<crate::api::PolicyEndpoint>, DaemonError> {
        Err(crate::api::no_policy())
    }

    async fn policy_explain(
        &self,
        _: crate::api::PolicyQuery,
    ) -> Result<crate::api::PolicyExplanation, DaemonError> {
        Err(crate::api::no_policy())
    }
}
