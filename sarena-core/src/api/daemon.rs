//! The [`Daemon`] trait.

use async_trait::async_trait;

use super::bodies::Deleted;
use super::error::DaemonError;
use super::types::*;

/// What the plugin (and operators) can ask of the node daemon.
///
/// Implemented by the HTTP client (`HttpDaemon`), by the daemon's own
/// in-process state (served over HTTP by `sarena-daemon`), and by mocks.
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
#[async_trait]
pub trait Daemon: Send + Sync {
    /// `GET /daemon/config`.
    async fn config(&self) -> Result<DaemonConfig, DaemonError>;
    /// `GET /daemon/health`.
    async fn health(&self) -> Result<Health, DaemonError>;
    /// `POST /ipam/allocate`. Idempotent per owner.
    async fn allocate(&self, req: AllocateRequest) -> Result<Allocation, DaemonError>;
    /// `DELETE /ipam/allocations/{container_id}/{ifname}`. `Ok(false)` when there was nothing to release.
    async fn release(&self, owner: Attachment) -> Result<bool, DaemonError>;
    /// `POST /endpoint/create`. Idempotent for the same body.
    async fn create_endpoint(&self, req: EndpointCreate) -> Result<Endpoint, DaemonError>;
    /// `DELETE /endpoints/{container_id}/{ifname}`: removes the endpoint and releases its
    /// addresses (and any bare allocation of that owner). `Ok(false)` when nothing existed.
    async fn delete_endpoint(&self, owner: Attachment) -> Result<bool, DaemonError>;
    /// `DELETE /endpoints/{container_id}/{ifname}?veth=remove`: as
    /// [`delete_endpoint`](Self::delete_endpoint), and the daemon also removes
    /// the endpoint's veth pair when it can, after answering (deleting a
    /// link waits for an RCU barrier, ~15 ms, which DEL then need not wait
    /// for). `veth_removal` in the answer says whether it took that on; if
    /// not, the caller removes the links. The default never takes it on.
    async fn delete_endpoint_and_veth(&self, owner: Attachment) -> Result<Deleted, DaemonError> {
        Ok(Deleted {
            deleted: self.delete_endpoint(owner).await?,
            veth_removal: false,
        })
    }
    /// `DELETE /endpoints/{container_id}/{ifname}?allocation=keep`: removes the
    /// endpoint but keeps its allocation (under a lease again, as before it
    /// was registered), so that a repeated ADD of the same attachment gets
    /// the same address; returns the endpoint removed. The default, for
    /// backends that cannot keep an allocation apart from its endpoint, reads
    /// the endpoint and deletes it, address and all.
    async fn unregister_endpoint(
        &self,
        owner: Attachment,
    ) -> Result<Option<Endpoint>, DaemonError> {
        let endpoint = self.endpoint(owner.clone()).await?;
        self.delete_endpoint(owner).await?;
        Ok(endpoint)
    }
    /// `GET /endpoints/{container_id}/{ifname}`.
    async fn endpoint(&self, owner: Attachment) -> Result<Option<Endpoint>, DaemonError>;
    /// `GET /endpoints`.
    async fn endpoints(&self) -> Result<Vec<Endpoint>, DaemonError>;
    /// `GET /ipam`.
    async fn ipam_state(&self) -> Result<IpamState, DaemonError>;
    /// `POST /gc`: removes every endpoint and allocation whose owner is not listed.
    async fn gc(&self, req: GcRequest) -> Result<GcReport, DaemonError>;
}
