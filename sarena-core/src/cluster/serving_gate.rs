//! [`ServingGate`]: the [`Daemon`] the API serves in Kubernetes mode, opened
//! and closed by the supervisor: waiting (no node state yet), serving, and
//! serving with ADD closed.
//!
//! - waiting: `health` answers not ready with the reason (the plugin's
//!   STATUS is 50 with it); every other call is `unavailable` with the
//!   reason (ADD fails with it; DEL is queued by the plugin and replayed).
//! - closed: `health` is not ready with the reason, `allocate` and
//!   `endpoint/create` are `unavailable`; everything else is served, so the
//!   pods on the node can still be deleted.
//! - open: everything goes to the node state.

use std::sync::{Arc, RwLock};

use async_trait::async_trait;

use crate::api::{
    AllocateRequest, Allocation, ApiErrorKind, Attachment, Daemon, DaemonConfig, DaemonError,
    DaemonStatus, Deleted, Endpoint, EndpointCreate, EndpointStats, GcReport, GcRequest, Health,
    Inspect, IpamState, NodeApi,
};

/// Why the daemon does not serve a request now.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not serving {what}: {reason}")]
pub struct NotServing {
    /// What was asked (`ADD`, `requests`).
    pub what: &'static str,
    /// Why.
    pub reason: String,
}

#[derive(Clone)]
enum Serving {
    Waiting(String),
    Node {
        daemon: Arc<dyn NodeApi>,
        closed: Option<String>,
    },
}

/// The gate: what the API serves, opened and closed by the supervisor. Cheap to share; every call looks at the state once.
pub struct ServingGate {
    state: RwLock<Serving>,
}

impl std::fmt::Debug for ServingGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = match self.current() {
            Serving::Waiting(reason) => format!("waiting: {reason}"),
            Serving::Node { closed: None, .. } => "open".into(),
            Serving::Node {
                closed: Some(reason),
                ..
            } => format!("closed: {reason}"),
        };
        f.debug_struct("ServingGate")
            .field("state", &state)
            .finish()
    }
}

impl ServingGate {
    /// A gate that waits, for `reason`.
    pub fn waiting(reason: impl Into<String>) -> Self {
        ServingGate {
            state: RwLock::new(Serving::Waiting(reason.into())),
        }
    }

    fn current(&self) -> Serving {
        // A panic while the lock was held cannot leave a half-written enum.
        self.state
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    fn set(&self, serving: Serving) {
        *self
            .state
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = serving;
    }

    /// Waits (no node state), for `reason`; drops the node state it served.
    pub fn wait(&self, reason: impl Into<String>) {
        self.set(Serving::Waiting(reason.into()));
    }

    /// Serves `daemon`, ADD included.
    pub fn open(&self, daemon: Arc<dyn NodeApi>) {
        self.set(Serving::Node {
            daemon,
            closed: None,
        });
    }

    /// Serves `daemon` with ADD closed, for `reason`.
    pub fn close(&self, daemon: Arc<dyn NodeApi>, reason: impl Into<String>) {
        self.set(Serving::Node {
            daemon,
            closed: Some(reason.into()),
        });
    }

    /// Whether ADD is served.
    pub fn is_open(&self) -> bool {
        matches!(self.current(), Serving::Node { closed: None, .. })
    }

    /// The node state, for every call but ADD's.
    fn node(&self) -> Result<Arc<dyn NodeApi>, DaemonError> {
        match self.current() {
            Serving::Waiting(reason) => Err(unavailable("requests", reason)),
            Serving::Node { daemon, .. } => Ok(daemon),
        }
    }

    /// The node state, for ADD's calls.
    fn node_for_add(&self) -> Result<Arc<dyn NodeApi>, DaemonError> {
        match self.current() {
            Serving::Waiting(reason)
            | Serving::Node {
                closed: Some(reason),
                ..
            } => Err(unavailable("ADD", reason)),
            Serving::Node {
                daemon,
                closed: None,
            } => Ok(daemon),
        }
    }
}

fn unavailable(what: &'static str, reason: String) -> DaemonError {
    DaemonError::local(ApiErrorKind::Unavailable, NotServing { what, reason })
}

#[async_trait]
impl Daemon for ServingGate {
    async fn config(&self) -> Result<DaemonConfig, DaemonError> {
        self.node_for_add()?.config().await
    }

    async fn health(&self) -> Result<Health, DaemonError> {
        match self.current() {
            Serving::Waiting(reason) => Ok(Health {
                ready: false,
                message: reason,
            }),
            Serving::Node {
                closed: Some(reason),
                ..
            } => Ok(Health {
                ready: false,
                message: reason,
            }),
            Serving::Node {
                daemon,
                closed: None,
            } => daemon.health().await,
        }
    }

    async fn allocate(&self, req: AllocateRequest) -> Result<Allocation, DaemonError> {
        self.node_for_add()?.allocate(req).await
    }

    async fn release(&self, owner: Attachment) -> Result<bool, DaemonError> {
        self.node()?.release(owner).await
    }

    async fn create_endpoint(&self, req: EndpointCreate) -> Result<Endpoint, DaemonError> {
        self.node_for_add()?.create_endpoint(req).await
    }

    async fn delete_endpoint(&self, owner: Attachment) -> Result<bool, DaemonError> {
        self.node()?.delete_endpoint(owner).await
    }

    async fn delete_endpoint_and_veth(&self, owner: Attachment) -> Result<Deleted, DaemonError> {
        self.node()?.delete_endpoint_and_veth(owner).await
    }

    /// Part of a repeated ADD (the allocation is kept for it): not while ADD is closed.
    async fn unregister_endpoint(
        &self,
        owner: Attachment,
    ) -> Result<Option<Endpoint>, DaemonError> {
        self.node_for_add()?.unregister_endpoint(owner).await
    }

    async fn endpoint(&self, owner: Attachment) -> Result<Option<Endpoint>, DaemonError> {
        self.node()?.endpoint(owner).await
    }

    async fn gc(&self, req: GcRequest) -> Result<GcReport, DaemonError> {
        self.node()?.gc(req).await
    }

    async fn endpoint_stats_of(
        &self,
        owner: Attachment,
    ) -> Result<Option<EndpointStats>, DaemonError> {
        self.node()?.endpoint_stats_of(owner).await
    }
}

#[async_trait]
impl Inspect for ServingGate {
    async fn endpoints(&self) -> Result<Vec<Endpoint>, DaemonError> {
        self.node()?.endpoints().await
    }

    async fn ipam_state(&self) -> Result<IpamState, DaemonError> {
        self.node()?.ipam_state().await
    }

    /// Waiting: not ready with the reason, nothing else known yet; closed:
    /// the node state's status, not ready with the reason.
    async fn status(&self) -> Result<DaemonStatus, DaemonError> {
        match self.current() {
            Serving::Waiting(reason) => Ok(DaemonStatus::from_parts(
                Health {
                    ready: false,
                    message: reason,
                },
                "unknown",
                &IpamState::default(),
                0,
            )),
            Serving::Node { daemon, closed } => {
                let mut status = daemon.status().await?;
                if let Some(reason) = closed {
                    status.health = Health {
                        ready: false,
                        message: reason,
                    };
                }
                Ok(status)
            }
        }
    }

    async fn endpoint_stats(&self) -> Result<Vec<EndpointStats>, DaemonError> {
        self.node()?.endpoint_stats().await
    }

    async fn policy_endpoints(&self) -> Result<Vec<crate::api::PolicyEndpoint>, DaemonError> {
        self.node()?.policy_endpoints().await
    }

    async fn policy_explain(
        &self,
        query: crate::api::PolicyQuery,
    ) -> Result<crate::api::PolicyExplanation, DaemonError> {
        self.node()?.policy_explain(query).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::MockNodeApi;

    fn owner() -> Attachment {
        Attachment {
            container_id: "c".into(),
            ifname: "eth0".into(),
        }
    }

    fn node() -> Arc<dyn NodeApi> {
        let mut d = MockNodeApi::new();
        d.expect_health().returning(|| {
            Ok(Health {
                ready: true,
                message: "store open".into(),
            })
        });
        d.expect_delete_endpoint().returning(|_| Ok(true));
        d.expect_config().returning(|| {
            Ok(DaemonConfig {
                mtu: 1450,
                dataplane: "ebpf".into(),
            })
        });
        Arc::new(d)
    }

    fn reason_of(e: DaemonError) -> String {
        assert_eq!(e.kind(), Some(ApiErrorKind::Unavailable));
        e.local_source::<NotServing>().unwrap().reason.clone()
    }

    #[tokio::test]
    async fn waiting_is_not_ready_and_refuses_everything_with_the_reason() {
        let s = ServingGate::waiting("node n1 has no spec.podCIDRs yet");
        let h = s.health().await.unwrap();
        assert!(!h.ready);
        assert_eq!(h.message, "node n1 has no spec.podCIDRs yet");
        assert_eq!(reason_of(s.config().await.unwrap_err()), h.message);
        let e = s.delete_endpoint(owner()).await.unwrap_err();
        assert!(
            crate::error_chain(&e).contains("not serving requests: node n1"),
            "{e}"
        );
        assert!(!s.is_open());
    }

    #[tokio::test]
    async fn closed_refuses_add_but_serves_deletions() {
        let s = ServingGate::waiting("start");
        s.close(node(), "podCIDR changed");
        assert!(!s.health().await.unwrap().ready);
        let e = s.config().await.unwrap_err();
        assert!(
            crate::error_chain(&e).contains("not serving ADD: podCIDR changed"),
            "{e}"
        );
        assert!(s.delete_endpoint(owner()).await.unwrap());
        assert!(!s.is_open());
    }

    #[tokio::test]
    async fn open_serves_the_node_and_wait_drops_it() {
        let s = ServingGate::waiting("start");
        s.open(node());
        assert!(s.is_open());
        assert!(s.health().await.unwrap().ready);
        assert_eq!(s.config().await.unwrap().mtu, 1450);
        s.wait("switching podCIDRs");
        assert!(s.delete_endpoint(owner()).await.is_err());
    }

    #[tokio::test]
    async fn status_says_why_while_waiting_and_while_closed() {
        let s = ServingGate::waiting("node n1 has no spec.podCIDRs yet");
        let status = s.status().await.unwrap();
        assert!(!status.health.ready);
        assert_eq!(status.health.message, "node n1 has no spec.podCIDRs yet");
        assert!(status.pools.is_empty() && status.endpoints == 0);

        let mut d = MockNodeApi::new();
        d.expect_status().returning(|| {
            Ok(DaemonStatus::from_parts(
                Health {
                    ready: true,
                    message: "store open".into(),
                },
                "ebpf",
                &IpamState::default(),
                3,
            ))
        });
        let d: Arc<dyn NodeApi> = Arc::new(d);
        s.open(d.clone());
        let status = s.status().await.unwrap();
        assert!(status.health.ready);
        assert_eq!(
            (status.dataplane.mode.as_str(), status.endpoints),
            ("ebpf", 3)
        );
        s.close(d, "podCIDR changed");
        let status = s.status().await.unwrap();
        assert_eq!(
            (
                status.health.ready,
                status.health.message.as_str(),
                status.endpoints
            ),
            (false, "podCIDR changed", 3)
        );
    }
}
