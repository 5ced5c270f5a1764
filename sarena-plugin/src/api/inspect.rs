//! [`Inspect`]: what an operator (the `sarena` CLI, the metrics endpoint)
//! and the node's own start-up read of a daemon, and [`NodeApi`], both faces
//! of a daemon together (what `sarena-daemon` serves).

use async_trait::async_trait;

use super::daemon::Daemon;
use super::endpoint::Endpoint;
use super::error::DaemonError;
use super::policy::{PolicyEndpoint, PolicyExplanation, PolicyQuery};
use super::status::{DaemonStatus, EndpointStats};
use super::types::IpamState;

/// The operator's reads of a daemon. No method has a default: a layer that
/// knows more (the dataplane's programs and counters, Kubernetes mode) and
/// one that only passes calls on both say so, in their own impl.
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
#[async_trait]
pub trait Inspect: Send + Sync {
    /// `GET /endpoints`.
    async fn endpoints(&self) -> Result<Vec<Endpoint>, DaemonError>;
    /// `GET /ipam`.
    async fn ipam_state(&self) -> Result<IpamState, DaemonError>;
    /// `GET /daemon/status`: health, dataplane, pools, counts
    /// ([`registry_status`] builds the registry's part).
    async fn status(&self) -> Result<DaemonStatus, DaemonError>;
    /// `GET /stats/endpoints`: every endpoint with its dataplane counters.
    async fn endpoint_stats(&self) -> Result<Vec<EndpointStats>, DaemonError>;
    /// `GET /policy/endpoints`: every endpoint of this node with its
    /// NetworkPolicy isolation (Kubernetes mode; elsewhere `unavailable`).
    async fn policy_endpoints(&self) -> Result<Vec<PolicyEndpoint>, DaemonError>;
    /// `GET /policy/explain`: whether policy lets a packet through, and why.
    async fn policy_explain(&self, query: PolicyQuery) -> Result<PolicyExplanation, DaemonError>;
}

/// Both faces of a daemon: what `sarena-daemon` serves, and what the
/// node-side layers (the dataplane, Kubernetes mode, the operated daemon)
/// wrap. Every type that is both a [`Daemon`] and an [`Inspect`] is one.
pub trait NodeApi: Daemon + Inspect {}

impl<T: Daemon + Inspect + ?Sized> NodeApi for T {}

/// The status a registry alone can give (no dataplane, no Kubernetes mode):
/// health, the dataplane's mode, the pools and counts, from `daemon`'s own
/// answers. The layers above fill in what they know.
pub async fn registry_status<D: NodeApi + ?Sized>(daemon: &D) -> Result<DaemonStatus, DaemonError> {
    let health = daemon.health().await?;
    let mode = daemon.config().await?.dataplane;
    let ipam = daemon.ipam_state().await?;
    let endpoints = daemon.endpoints().await?.len() as u64;
    Ok(DaemonStatus::from_parts(health, &mode, &ipam, endpoints))
}

#[cfg(any(test, feature = "mocks"))]
mockall::mock! {
    /// A mock of both faces ([`NodeApi`]), for the layers that wrap a whole
    /// daemon (feature `mocks`).
    pub NodeApi {}

    #[async_trait]
    impl Daemon for NodeApi {
        async fn config(&self) -> Result<super::types::DaemonConfig, DaemonError>;
        async fn health(&self) -> Result<super::types::Health, DaemonError>;
        async fn allocate(
            &self,
            req: super::types::AllocateRequest,
        ) -> Result<super::types::Allocation, DaemonError>;
        async fn release(&self, owner: super::types::Attachment) -> Result<bool, DaemonError>;
        async fn create_endpoint(
            &self,
            req: super::endpoint::EndpointCreate,
        ) -> Result<Endpoint, DaemonError>;
        async fn delete_endpoint(&self, owner: super::types::Attachment) -> Result<bool, DaemonError>;
        async fn delete_endpoint_and_veth(
            &self,
            owner: super::types::Attachment,
        ) -> Result<super::bodies::Deleted, DaemonError>;
        async fn unregister_endpoint(
            &self,
            owner: super::types::Attachment,
        ) -> Result<Option<Endpoint>, DaemonError>;
        async fn endpoint(&self, owner: super::types::Attachment) -> Result<Option<Endpoint>, DaemonError>;
        async fn endpoint_stats_of(
            &self,
            owner: super::types::Attachment,
        ) -> Result<Option<EndpointStats>, DaemonError>;
        async fn gc(&self, req: super::types::GcRequest) -> Result<super::types::GcReport, DaemonError>;
    }

    #[async_trait]
    impl Inspect for NodeApi {
        async fn endpoints(&self) -> Result<Vec<Endpoint>, DaemonError>;
        async fn ipam_state(&self) -> Result<IpamState, DaemonError>;
        async fn status(&self) -> Result<DaemonStatus, DaemonError>;
        async fn endpoint_stats(&self) -> Result<Vec<EndpointStats>, DaemonError>;
        async fn policy_endpoints(&self) -> Result<Vec<PolicyEndpoint>, DaemonError>;
        async fn policy_explain(&self, query: PolicyQuery) -> Result<PolicyExplanation, DaemonError>;
    }
}
