//! [`WithDataplane`]: the node composed with its dataplane. A [`Daemon`] that
//! wraps the endpoint registry (the [`Registry`](super::Registry)), keeps a
//! [`Dataplane`] in step with it, and can take on removing deleted endpoints'
//! veth pairs, durably (see [`VethLedger`]). Its start-up repair is in
//! `start_up.rs`.

mod pod_netns;
mod start_up;

use std::sync::Arc;

use async_trait::async_trait;
use tokio::sync::mpsc;

pub use pod_netns::HostNetns;
pub use start_up::{StartUpError, StartUpReport};

use crate::api::ApiErrorKind;
use crate::api::{
    AllocateRequest, Allocation, Attachment, BandwidthLimits, Daemon, DaemonConfig, DaemonError,
    DaemonStatus, Deleted, Endpoint, EndpointCreate, EndpointStats, GcReport, GcRequest, Health,
    Inspect, IpamState, NodeApi,
};
use crate::dataplane::{Dataplane, DataplaneError};
use crate::links::{LinkError, Links};

use super::veth_ledger::{OwedRemoval, VethLedger};

/// The dataplane could not attach an endpoint being registered (answered as
/// `internal`; the registration is not committed).
#[derive(Debug, thiserror::Error)]
#[error("attaching {host_ifname}")]
pub struct AttachError {
    /// The endpoint's host-side interface.
    pub host_ifname: String,
    /// The dataplane's error.
    #[source]
    pub source: DataplaneError,
}

/// An endpoint with bandwidth limits on a dataplane that does not enforce
/// them (answered as `bad_request`; nothing is registered).
#[derive(Debug, thiserror::Error)]
#[error(
    "bandwidth limits ({limits}) need the eBPF dataplane; this daemon runs the {mode} dataplane"
)]
pub struct BandwidthUnsupported {
    /// The limits asked for.
    pub limits: BandwidthLimits,
    /// The daemon's dataplane mode.
    pub mode: &'static str,
}

/// Wraps a registry (e.g. the daemon's `Registry`) so that registering an
/// endpoint also attaches it to the dataplane and removing one detaches it.
///
/// Order matters for consistency: an endpoint is attached *before* it is
/// committed (a failed attach fails the registration, and the plugin rolls
/// back), and detached *after* it is removed. Whatever a crash leaves
/// half-done is fixed by [`Dataplane::reconcile`] at the next start.
#[derive(Clone)]
pub struct WithDataplane {
    pub(super) registry: Arc<dyn NodeApi>,
    pub(super) dataplane: Arc<dyn Dataplane>,
    veths: Option<VethRemoval>,
}

/// What removing deleted endpoints' veths takes: the links, the ledger of
/// owed removals, and the channel to the task that settles them.
#[derive(Clone)]
struct VethRemoval {
    links: Arc<dyn Links>,
    ledger: Arc<dyn VethLedger>,
    done: mpsc::UnboundedSender<OwedRemoval>,
}

impl VethRemoval {
    /// Removes the link of `owed` (only if name, index and mark still
    /// match) and hands the record to the settling task; a failure leaves it
    /// owed for the next start.
    async fn remove(&self, owed: OwedRemoval) {
        let (ifindex, ifname) = (owed.host_ifindex, &owed.host_ifname);
        match self.links.remove_host_link_index(ifindex, ifname).await {
            Ok(existed) => tracing::debug!(%ifname, ifindex, existed, "veth removed"),
            Err(error @ LinkError::NotOurs { .. }) => {
                tracing::warn!(%ifname, ifindex, error = %crate::error_chain(&error), "veth left alone")
            }
            Err(error) => {
                tracing::warn!(%ifname, ifindex, error = %crate::error_chain(&error), "could not remove veth; owed until the next start");
                return;
            }
        }
        // The settling task lives as long as any sender: it cannot be gone.
        let _ = self.done.send(owed);
    }
}

/// Settles removed veths' records, a batch per commit.
async fn settle(ledger: Arc<dyn VethLedger>, mut done: mpsc::UnboundedReceiver<OwedRemoval>) {
    const BATCH: usize = 256;
    while let Some(first) = done.recv().await {
        let mut batch = vec![first];
        while batch.len() < BATCH {
            match done.try_recv() {
                Ok(more) => batch.push(more),
                Err(_) => break,
            }
        }
        let count = batch.len();
        if let Err(error) = ledger.settle_removals(batch).await {
            tracing::warn!(error = %crate::error_chain(&error), count, "cannot settle veth removals; redone at the next start");
        }
    }
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
    pub fn new(registry: Arc<dyn NodeApi>, dataplane: Arc<dyn Dataplane>) -> Self {
        WithDataplane {
            registry,
            dataplane,
            veths: None,
        }
    }

    /// Also takes on removing a deleted endpoint's veth pair, with `links`,
    /// when asked to ([`Daemon::delete_endpoint_and_veth`]): the endpoint is
    /// deleted and its veth's removal recorded in `ledger` in one commit, and
    /// the endpoint detached, before the answer; the link goes after it, in
    /// the background, and its record is settled then. A removal a killed
    /// daemon still owes is done by [`WithDataplane::start_up`]. `ledger`
    /// must keep the registry's own state (the daemon passes its `Registry` as
    /// both). Call inside a tokio runtime (the settling task is spawned).
    pub fn with_veth_removal(mut self, links: Arc<dyn Links>, ledger: Arc<dyn VethLedger>) -> Self {
        let (done, settled) = mpsc::unbounded_channel();
        tokio::spawn(settle(ledger.clone(), settled));
        self.veths = Some(VethRemoval {
            links,
            ledger,
            done,
        });
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
            tracing::warn!(error = %crate::error_chain(&error), host_ifname = %endpoint.spec.host_ifname, "detach failed; reconcile will retry");
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
        if let Some(limits) = req.spec.bandwidth
            && !self.dataplane.mode().enforces_bandwidth()
        {
            return Err(DaemonError::local(
                ApiErrorKind::BadRequest,
                BandwidthUnsupported {
                    limits,
                    mode: self.dataplane.mode().as_str(),
                },
            ));
        }
        pod_netns::check_pod_netns(&req.spec.netns)
            .map_err(|e| DaemonError::local(ApiErrorKind::BadRequest, e))?;
        let endpoint = provisional(&req);
        if let Err(source) = self.dataplane.attach(&endpoint).await {
            let kind = if matches!(source, DataplaneError::NotAPodVeth { .. }) {
                // Not a pod veth: the caller's mistake (or attack), and
                // nothing was touched; a detach would touch it.
                ApiErrorKind::BadRequest
            } else {
                // What the attach put in place before it failed (entries,
                // pacers, filters) goes too: nothing of the endpoint is left.
                self.detach_logged(&endpoint).await;
                ApiErrorKind::Internal
            };
            return Err(DaemonError::local(
                kind,
                AttachError {
                    host_ifname: req.spec.host_ifname.clone(),
                    source,
                },
            ));
        }
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
        let Some(veths) = self.veths.clone() else {
            let (deleted, _) = self.remove(owner).await?;
            return Ok(Deleted {
                deleted,
                veth_removal: false,
            });
        };
        let (deleted, existing) = veths.ledger.delete_owing_removal(owner).await?;
        let Some(endpoint) = existing else {
            return Ok(Deleted {
                deleted,
                veth_removal: false,
            });
        };
        self.detach_logged(&endpoint).await;
        let owed = OwedRemoval {
            host_ifname: endpoint.spec.host_ifname,
            host_ifindex: endpoint.spec.host_ifindex,
        };
        tokio::spawn(async move { veths.remove(owed).await });
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

    async fn gc(&self, req: GcRequest) -> Result<GcReport, DaemonError> {
        let before = self.registry.endpoints().await?;
        let report = self.registry.gc(req).await?;
        for endpoint in before
            .iter()
            .filter(|e| report.endpoints_removed.contains(&e.spec.owner))
        {
            self.detach_logged(endpoint).await;
        }
        Ok(report)
    }

    async fn endpoint_stats_of(
        &self,
        owner: Attachment,
    ) -> Result<Option<EndpointStats>, DaemonError> {
        let Some(endpoint) = self.registry.endpoint(owner).await? else {
            return Ok(None);
        };
        let bandwidth = self.bandwidth_status(&endpoint).await;
        Ok(Some(EndpointStats {
            bandwidth,
            ..self.stats(endpoint)
        }))
    }
}

#[async_trait]
impl Inspect for WithDataplane {
    async fn endpoints(&self) -> Result<Vec<Endpoint>, DaemonError> {
        self.registry.endpoints().await
    }

    async fn ipam_state(&self) -> Result<IpamState, DaemonError> {
        self.registry.ipam_state().await
    }

    async fn status(&self) -> Result<DaemonStatus, DaemonError> {
        self.dataplane_status().await
    }

    async fn endpoint_stats(&self) -> Result<Vec<EndpointStats>, DaemonError> {
        let endpoints = self.registry.endpoints().await?;
        Ok(endpoints.into_iter().map(|e| self.stats(e)).collect())
    }

    async fn policy_endpoints(&self) -> Result<Vec<crate::api::PolicyEndpoint>, DaemonError> {
        self.registry.policy_endpoints().await
    }

    async fn policy_explain(
        &self,
        query: crate::api::PolicyQuery,
    ) -> Result<crate::api::PolicyExplanation, DaemonError> {
        self.registry.policy_explain(query).await
    }
}

#[cfg(test)]
#[path = "with_dataplane_tests.rs"]
mod tests;
