//! The [`Daemon`] trait.

use async_trait::async_trait;

use super::bodies::Deleted;
use super::endpoint::{Endpoint, EndpointCreate};
use super::error::DaemonError;
use super::status::EndpointStats;
use super::types::*;

/// What the plugin asks of the node daemon: the calls of ADD, DEL, CHECK,
/// STATUS and GC. The operator's reads are [`Inspect`](super::Inspect).
///
/// Implemented by the HTTP client (`HttpDaemon`), by the daemon's own
/// in-process state (served over HTTP by `sarena-daemon`) and the layers
/// around it, and by mocks. No method has a default: a layer that wraps a
/// daemon must say what each call does, so none can silently lose data.
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
    /// not, the caller removes the links.
    async fn delete_endpoint_and_veth(&self, owner: Attachment) -> Result<Deleted, DaemonError>;
    /// `DELETE /endpoints/{container_id}/{ifname}?allocation=keep`: removes the
    /// endpoint but keeps its allocation (under a lease again, as before it
    /// was registered), so that a repeated ADD of the same attachment gets
    /// the same address; returns the endpoint removed.
    async fn unregister_endpoint(&self, owner: Attachment)
    -> Result<Option<Endpoint>, DaemonError>;
    /// `GET /endpoints/{container_id}/{ifname}`.
    async fn endpoint(&self, owner: Attachment) -> Result<Option<Endpoint>, DaemonError>;
    /// `GET /stats/endpoints/{container_id}/{ifname}`: one endpoint with its
    /// dataplane counters and bandwidth state (CHECK verifies the limits
    /// there); `Ok(None)` for an unknown endpoint.
    async fn endpoint_stats_of(
        &self,
        owner: Attachment,
    ) -> Result<Option<EndpointStats>, DaemonError>;
    /// `POST /gc`: removes every endpoint and allocation whose owner is not listed.
    async fn gc(&self, req: GcRequest) -> Result<GcReport, DaemonError>;
}
