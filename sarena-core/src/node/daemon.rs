//! `impl Daemon for Node`: the trait over the synchronous operations.
//!
//! Mutations (which fsync) run on tokio's blocking pool when called inside a tokio
//! runtime, so they never stall the async workers; elsewhere they run inline.

use async_trait::async_trait;

use super::{Node, NodeError};
use crate::api::{
    AllocateRequest, Allocation, Attachment, Daemon, DaemonConfig, DaemonError, Endpoint,
    EndpointCreate, GcReport, GcRequest, Health, IpamState,
};

impl Node {
    /// Runs a blocking operation off the async workers when possible.
    async fn blocking<T, F>(&self, f: F) -> Result<T, DaemonError>
    where
        T: Send + 'static,
        F: FnOnce(&Node) -> Result<T, NodeError> + Send + 'static,
    {
        let node = self.clone();
        let out = match tokio::runtime::Handle::try_current() {
            Ok(handle) => handle
                .spawn_blocking(move || f(&node))
                .await
                .map_err(|e| NodeError::Task {
                    reason: e.to_string(),
                })
                .and_then(|r| r),
            Err(_) => f(&node),
        };
        out.map_err(DaemonError::from)
    }
}

#[async_trait]
impl Daemon for Node {
    async fn config(&self) -> Result<DaemonConfig, DaemonError> {
        Ok(self.inner.config.daemon_config())
    }

    async fn health(&self) -> Result<Health, DaemonError> {
        Ok(match self.lock() {
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
                message: e.to_string(),
            },
        })
    }

    async fn allocate(&self, req: AllocateRequest) -> Result<Allocation, DaemonError> {
        self.blocking(move |n| n.allocate_at(req, n.now())).await
    }

    async fn release(&self, owner: Attachment) -> Result<bool, DaemonError> {
        self.blocking(move |n| n.release_owner(&owner)).await
    }

    async fn create_endpoint(&self, req: EndpointCreate) -> Result<Endpoint, DaemonError> {
        self.blocking(move |n| n.create_endpoint_at(req, n.now()))
            .await
    }

    async fn delete_endpoint(&self, owner: Attachment) -> Result<bool, DaemonError> {
        self.blocking(move |n| n.delete_owner(&owner)).await
    }

    async fn endpoint(&self, owner: Attachment) -> Result<Option<Endpoint>, DaemonError> {
        Ok(self.endpoint_of(&owner)?)
    }

    async fn endpoints(&self) -> Result<Vec<Endpoint>, DaemonError> {
        Ok(self.list_endpoints()?)
    }

    async fn ipam_state(&self) -> Result<IpamState, DaemonError> {
        Ok(self.ipam_snapshot()?)
    }

    async fn gc(&self, req: GcRequest) -> Result<GcReport, DaemonError> {
        self.blocking(move |n| n.gc_owners(&req.valid)).await
    }
}
