//! [`WithDataplane`]: the node composed with its dataplane. A [`Daemon`] that
//! wraps the endpoint registry (the [`Node`](super::Node)), keeps a
//! [`Dataplane`] in step with it, and can take on removing deleted endpoints'
//! veth pairs.

use std::sync::Arc;

use async_trait::async_trait;

use crate::api::ApiErrorKind;
use crate::api::{
    AllocateRequest, Allocation, Attachment, BandwidthLimits, Daemon, DaemonConfig, DaemonError,
    DaemonStatus, Deleted, Endpoint, EndpointCreate, EndpointStats, GcReport, GcRequest, Health,
    IpamState,
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

/// Wraps a registry (e.g. the daemon's `Node`) so that registering an
/// endpoint also attaches it to the dataplane and removing one detaches it.
///
/// Order matters for consistency: an endpoint is attached *before* it is
/// committed (a failed attach fails the registration, and the plugin rolls
/// back), and detached *after* it is removed. Whatever a crash leaves
/// half-done is fixed by [`Dataplane::reconcile`] at the next start.
#[derive(Clone)]
pub struct WithDataplane {
    pub(super) registry: Arc<dyn Daemon>,
    pub(super) dataplane: Arc<dyn Dataplane>,
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
        if let Some(limits) = req.bandwidth
            && !self.dataplane.enforces_bandwidth()
        {
            return Err(DaemonError::local(
                ApiErrorKind::BadRequest,
                BandwidthUnsupported {
                    limits,
                    mode: self.dataplane.mode().as_str(),
                },
            ));
        }
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

    async fn status(&self) -> Result<DaemonStatus, DaemonError> {
        self.dataplane_status().await
    }

    async fn endpoint_stats(&self) -> Result<Vec<EndpointStats>, DaemonError> {
        let endpoints = self.registry.endpoints().await?;
        Ok(endpoints.into_iter().map(|e| self.stats(e)).collect())
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{ApiErrorKind, MockDaemon};
    use crate::dataplane::{DataplaneError, DataplaneMode, MockDataplane};
    use mockall::Sequence;

    fn create() -> EndpointCreate {
        EndpointCreate {
            owner: Attachment {
                container_id: "c1".into(),
                ifname: "eth0".into(),
            },
            pod: Default::default(),
            host_ifname: "lxc0123456789ab".into(),
            host_ifindex: 7,
            host_mac: "02:00:00:00:00:01".parse().unwrap(),
            pod_mac: "02:00:00:00:00:02".parse().unwrap(),
            addresses: vec!["10.200.0.5/16".parse().unwrap()],
            netns: "/var/run/netns/x".into(),
            bandwidth: None,
        }
    }

    fn endpoint() -> Endpoint {
        Endpoint {
            created_at: 1,
            ..provisional(&create())
        }
    }

    fn wrap(registry: MockDaemon, mut dataplane: MockDataplane) -> WithDataplane {
        dataplane.expect_mode().return_const(DataplaneMode::Kernel);
        WithDataplane::new(Arc::new(registry), Arc::new(dataplane))
    }

    #[tokio::test]
    async fn create_attaches_before_committing() {
        let mut seq = Sequence::new();
        let (mut registry, mut dataplane) = (MockDaemon::new(), MockDataplane::new());
        dataplane
            .expect_attach()
            .times(1)
            .in_sequence(&mut seq)
            .returning(|_| Ok(()));
        registry
            .expect_create_endpoint()
            .times(1)
            .in_sequence(&mut seq)
            .returning(|_| Ok(endpoint()));
        dataplane.expect_detach().never();
        let daemon = wrap(registry, dataplane);
        assert_eq!(daemon.create_endpoint(create()).await.unwrap(), endpoint());
    }

    #[tokio::test]
    async fn failed_attach_registers_nothing() {
        let (mut registry, mut dataplane) = (MockDaemon::new(), MockDataplane::new());
        dataplane.expect_attach().returning(|_| {
            Err(DataplaneError::Netlink(crate::NetlinkError::new(
                "route add",
                "x",
                rtnetlink::Error::RequestFailed,
            )))
        });
        registry.expect_create_endpoint().never();
        let err = wrap(registry, dataplane)
            .create_endpoint(create())
            .await
            .unwrap_err();
        assert_eq!(err.kind(), Some(ApiErrorKind::Internal));
        let Some(AttachError {
            host_ifname,
            source,
        }) = err.local_source::<AttachError>()
        else {
            panic!("not an attach error: {err:?}");
        };
        assert_eq!(host_ifname, "lxc0123456789ab");
        let chained = std::error::Error::source(&err)
            .and_then(std::error::Error::source)
            .map(ToString::to_string);
        assert_eq!(
            chained,
            Some(source.to_string()),
            "the dataplane's error is the source"
        );
        let body = err.to_body();
        assert_eq!(body.kind, ApiErrorKind::Internal);
        assert!(
            body.message.starts_with("attaching lxc0123456789ab: "),
            "{}",
            body.message
        );
    }

    #[tokio::test]
    async fn failed_commit_detaches_again() {
        let (mut registry, mut dataplane) = (MockDaemon::new(), MockDataplane::new());
        dataplane.expect_attach().returning(|_| Ok(()));
        registry
            .expect_create_endpoint()
            .returning(|_| Err(DaemonError::api(ApiErrorKind::Conflict, "no allocation")));
        dataplane.expect_detach().times(1).returning(|_| Ok(()));
        let err = wrap(registry, dataplane)
            .create_endpoint(create())
            .await
            .unwrap_err();
        assert_eq!(err.kind(), Some(ApiErrorKind::Conflict));
    }

    #[tokio::test]
    async fn delete_detaches_what_existed_and_tolerates_detach_errors() {
        let (mut registry, mut dataplane) = (MockDaemon::new(), MockDataplane::new());
        registry
            .expect_endpoint()
            .returning(|_| Ok(Some(endpoint())));
        registry.expect_delete_endpoint().returning(|_| Ok(true));
        dataplane.expect_detach().times(1).returning(|_| {
            Err(DataplaneError::Netlink(crate::NetlinkError::new(
                "route del",
                "x",
                rtnetlink::Error::RequestFailed,
            )))
        });
        assert!(
            wrap(registry, dataplane)
                .delete_endpoint(create().owner)
                .await
                .unwrap()
        );
    }

    #[tokio::test]
    async fn delete_of_unknown_endpoint_detaches_nothing() {
        let (mut registry, mut dataplane) = (MockDaemon::new(), MockDataplane::new());
        registry.expect_endpoint().returning(|_| Ok(None));
        registry.expect_delete_endpoint().returning(|_| Ok(false));
        dataplane.expect_detach().never();
        assert!(
            !wrap(registry, dataplane)
                .delete_endpoint(create().owner)
                .await
                .unwrap()
        );
    }

    #[tokio::test]
    async fn delete_with_veth_removes_the_detached_endpoints_link_by_index() {
        let (mut registry, mut dataplane) = (MockDaemon::new(), MockDataplane::new());
        let ep = endpoint();
        let (index, name) = (ep.host_ifindex, ep.host_ifname.clone());
        registry
            .expect_endpoint()
            .returning(move |_| Ok(Some(endpoint())));
        registry.expect_delete_endpoint().returning(|_| Ok(true));
        dataplane.expect_detach().times(1).returning(|_| Ok(()));
        let (tx, rx) = tokio::sync::oneshot::channel();
        let tx = std::sync::Mutex::new(Some(tx));
        let mut links = crate::links::MockLinks::new();
        links
            .expect_remove_host_link_index()
            .withf(move |i, n| *i == index && n == name)
            .times(1)
            .returning(move |_, _| {
                if let Some(tx) = tx.lock().unwrap().take() {
                    let _ = tx.send(());
                }
                Ok(true)
            });
        let wrapped = wrap(registry, dataplane).with_veth_removal(Arc::new(links));
        let answer = wrapped
            .delete_endpoint_and_veth(create().owner)
            .await
            .unwrap();
        assert_eq!(
            answer,
            Deleted {
                deleted: true,
                veth_removal: true
            }
        );
        tokio::time::timeout(std::time::Duration::from_secs(5), rx)
            .await
            .unwrap()
            .unwrap();
    }

    #[tokio::test]
    async fn delete_with_veth_of_an_unknown_endpoint_leaves_the_links_to_the_caller() {
        let (mut registry, mut dataplane) = (MockDaemon::new(), MockDataplane::new());
        registry.expect_endpoint().returning(|_| Ok(None));
        registry.expect_delete_endpoint().returning(|_| Ok(false));
        dataplane.expect_detach().never();
        let mut links = crate::links::MockLinks::new();
        links.expect_remove_host_link_index().never();
        let answer = wrap(registry, dataplane)
            .with_veth_removal(Arc::new(links))
            .delete_endpoint_and_veth(create().owner)
            .await
            .unwrap();
        assert!(!answer.veth_removal && !answer.deleted, "{answer:?}");
    }

    #[tokio::test]
    async fn gc_detaches_removed_endpoints_only() {
        let (mut registry, mut dataplane) = (MockDaemon::new(), MockDataplane::new());
        let kept = Endpoint {
            owner: Attachment {
                container_id: "c2".into(),
                ifname: "eth0".into(),
            },
            host_ifname: "lxcffffffffffff".into(),
            ..endpoint()
        };
        let listed = vec![endpoint(), kept];
        registry
            .expect_endpoints()
            .returning(move || Ok(listed.clone()));
        registry.expect_gc().returning(|_| {
            Ok(GcReport {
                endpoints_removed: vec![create().owner],
                allocations_released: vec![],
            })
        });
        dataplane
            .expect_detach()
            .withf(|e| e.owner.container_id == "c1")
            .times(1)
            .returning(|_| Ok(()));
        let report = wrap(registry, dataplane)
            .gc(GcRequest::default())
            .await
            .unwrap();
        assert_eq!(report.endpoints_removed.len(), 1);
    }
}
