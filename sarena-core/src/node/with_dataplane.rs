//! [`WithDataplane`]: the node composed with its dataplane. A [`Daemon`] that
//! wraps the endpoint registry (the [`Node`](super::Node)), keeps a
//! [`Dataplane`] in step with it, and can take on removing deleted endpoints'
//! veth pairs.

use std::sync::Arc;

use async_trait::async_trait;

use crate::api::ApiErrorKind;
use crate::api::{
    AllocateRequest, Allocation, Attachment, Daemon, DaemonConfig, DaemonError, Deleted, Endpoint,
    EndpointCreate, GcReport, GcRequest, Health, IpamState,
};
use crate::dataplane::{Dataplane, DataplaneError};
use crate::links::Links;

/// The dataplane could not attach an endpoint being registered (answered as
/// `internal`; the registration is not committed).
#[derive(Debug, thiserror::Error)]
#[error("attaching {host_ifname}: {source}")]
pub struct AttachError {
    /// The endpoint's host-side interface.
    pub host_ifname: String,
    /// The dataplane's error.
    #[source]
    pub source: DataplaneError,
}

/// Wraps a registry (e.g. the daemon's `Node`) so that registering an
/// endpoint also attaches it to the dataplane and removing one detaches it.
///
/// Order matters for consistency: an endpoint is attached *before* it is
/// committed (a failed attach fails the registration, and the plugin rolls
/// back), and detached *after* it is removed. Whatever a crash leaves
/// half-done is fixed by [`Dataplane::reconcile`] at the next start.
#[derive(Clone)]
pub struct WithDataplane {
    registry: Arc<dyn Daemon>,
    dataplane: Arc<dyn Dataplane>,
    veths: Option<Arc<dyn Links>>,
}

impl std::fmt::Debug for WithDataplane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WithDataplane")
            .field("mode", &self.dataplane.mode())
            .finish()
    }
}

impl WithDataplane {
    /// Wraps `registry`, driving `dataplane`.
    pub fn new(registry: Arc<dyn Daemon>, dataplane: Arc<dyn Dataplane>) -> Self {
        WithDataplane {
            registry,
            dataplane,
            veths: None,
        }
    }

    /// Also takes on removing a deleted endpoint's veth pair, with `links`,
    /// when asked to ([`Daemon::delete_endpoint_and_veth`]): the endpoint is
    /// removed and detached before the answer, the link after it, in the
    /// background. If the daemon dies in between, the veth goes when the
    /// pod's netns does (runtimes delete it after DEL), and an ADD of the
    /// same attachment removes it as a stale link.
    pub fn with_veth_removal(mut self, links: Arc<dyn Links>) -> Self {
        self.veths = Some(links);
        self
    }

    /// Removes `owner` from the registry, then detaches what it had; returns
    /// whether anything existed and the endpoint that did.
    async fn remove(&self, owner: Attachment) -> Result<(bool, Option<Endpoint>), DaemonError> {
        let existing = self.registry.endpoint(owner.clone()).await?;
        let deleted = self.registry.delete_endpoint(owner).await?;
        if let Some(endpoint) = &existing {
            self.detach_logged(endpoint).await;
        }
        Ok((deleted, existing))
    }

    async fn detach_logged(&self, endpoint: &Endpoint) {
        if let Err(error) = self.dataplane.detach(endpoint).await {
            tracing::warn!(%error, host_ifname = %endpoint.host_ifname, "detach failed; reconcile will retry");
        }
    }
}

/// The endpoint as it will be registered (the registry sets the real creation time).
fn provisional(req: &EndpointCreate) -> Endpoint {
    req.clone().into_endpoint(0)
}

#[async_trait]
impl Daemon for WithDataplane {
    async fn config(&self) -> Result<DaemonConfig, DaemonError> {
        self.registry.config().await
    }

    async fn health(&self) -> Result<Health, DaemonError> {
        self.registry.health().await
    }

    async fn allocate(&self, req: AllocateRequest) -> Result<Allocation, DaemonError> {
        self.registry.allocate(req).await
    }

    async fn release(&self, owner: Attachment) -> Result<bool, DaemonError> {
        self.registry.release(owner).await
    }

    async fn create_endpoint(&self, req: EndpointCreate) -> Result<Endpoint, DaemonError> {
        let endpoint = provisional(&req);
        self.dataplane.attach(&endpoint).await.map_err(|source| {
            DaemonError::local(
                ApiErrorKind::Internal,
                AttachError {
                    host_ifname: req.host_ifname.clone(),
                    source,
                },
            )
        })?;
        match self.registry.create_endpoint(req).await {
            Ok(created) => Ok(created),
            Err(error) => {
                self.detach_logged(&endpoint).await;
                Err(error)
            }
        }
    }

    async fn delete_endpoint(&self, owner: Attachment) -> Result<bool, DaemonError> {
        Ok(self.remove(owner).await?.0)
    }

    async fn delete_endpoint_and_veth(&self, owner: Attachment) -> Result<Deleted, DaemonError> {
        let (deleted, existing) = self.remove(owner).await?;
        let (Some(endpoint), Some(links)) = (existing, self.veths.clone()) else {
            return Ok(Deleted {
                deleted,
                veth_removal: false,
            });
        };
        tokio::spawn(async move {
            let (ifindex, ifname) = (endpoint.host_ifindex, endpoint.host_ifname);
            match links.remove_host_link_index(ifindex, &ifname).await {
                Ok(existed) => tracing::debug!(%ifname, ifindex, existed, "veth removed"),
                Err(error) => tracing::warn!(%ifname, ifindex, %error, "could not remove veth"),
            }
        });
        Ok(Deleted {
            deleted,
            veth_removal: true,
        })
    }

    async fn unregister_endpoint(
        &self,
        owner: Attachment,
    ) -> Result<Option<Endpoint>, DaemonError> {
        let removed = self.registry.unregister_endpoint(owner).await?;
        if let Some(endpoint) = &removed {
            self.detach_logged(endpoint).await;
        }
        Ok(removed)
    }

    async fn endpoint(&self, owner: Attachment) -> Result<Option<Endpoint>, DaemonError> {
        self.registry.endpoint(owner).await
    }

    async fn endpoints(&self) -> Result<Vec<Endpoint>, DaemonError> {
        self.registry.endpoints().await
    }

    async fn ipam_state(&self) -> Result<IpamState, DaemonError> {
        self.registry.ipam_state().await
    }

    async fn gc(&self, req: GcRequest) -> Result<GcReport, DaemonError> {
        let before = self.registry.endpoints().await?;
        let report = self.registry.gc(req).await?;
        for endpoint in before
            .iter()
            .filter(|e| report.endpoints_removed.contains(&e.owner))
        {
            self.detach_logged(endpoint).await;
        }
        Ok(report)
    }
}

#[cfg(test)]
#[path = "with_dataplane_tests.rs"]
mod tests;
