//! The [`Daemon`] trait.

use async_trait::async_trait;

use super::bodies::Deleted;
use super::endpoint::{Endpoint, EndpointCreate};
use super::error::DaemonError;
use super::status::{DaemonStatus, EndpointStats};
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
    /// the same address; returns the endpoint removed. No default: a
    /// decorator that forgot it would silently release the address.
    async fn unregister_endpoint(&self, owner: Attachment)
    -> Result<Option<Endpoint>, DaemonError>;
    /// `GET /endpoints/{container_id}/{ifname}`.
    async fn endpoint(&self, owner: Attachment) -> Result<Option<Endpoint>, DaemonError>;
    /// `GET /endpoints`.
    async fn endpoints(&self) -> Result<Vec<Endpoint>, DaemonError>;
    /// `GET /ipam`.
    async fn ipam_state(&self) -> Result<IpamState, DaemonError>;
    /// `POST /gc`: removes every endpoint and allocation whose owner is not listed.
    async fn gc(&self, req: GcRequest) -> Result<GcReport, DaemonError>;

    /// `GET /daemon/status`: health, dataplane, pools, counts. The default
    /// builds it from [`health`](Self::health), [`config`](Self::config),
    /// [`ipam_state`](Self::ipam_state) and [`endpoints`](Self::endpoints);
    /// layers that know more (the dataplane's programs, the deletion queue,
    /// Kubernetes mode) fill it in.
    async fn status(&self) -> Result<DaemonStatus, DaemonError> {
        let health = self.health().await?;
        let mode = self.config().await?.dataplane;
        let ipam = self.ipam_state().await?;
        let endpoints = self.endpoints().await?.len() as u64;
        Ok(DaemonStatus::from_parts(health, &mode, &ipam, endpoints))
    }

    /// `GET /stats/endpoints`: every endpoint with its dataplane counters.
    /// The default has no dataplane, hence no counters.
    async fn endpoint_stats(&self) -> Result<Vec<EndpointStats>, DaemonError> {
        Ok(self
            .endpoints()
            .await?
            .into_iter()
            .map(|endpoint| EndpointStats {
                endpoint,
                counters: None,
                bandwidth: None,
            })
            .collect())
    }

    /// `GET /stats/endpoints/{container_id}/{ifname}`: one endpoint with its
    /// counters; `Ok(None)` for an unknown endpoint.
    async fn endpoint_stats_of(
        &self,
        owner: Attachment,
    ) -> Result<Option<EndpointStats>, DaemonError> {
        Ok(self.endpoint(owner).await?.map(|endpoint| EndpointStats {
            endpoint,
            counters: None,
            bandwidth: None,
        }))
    }
}
