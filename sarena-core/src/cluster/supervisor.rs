//! [`Supervisor`]: Kubernetes mode's control loop. On every change of the
//! [`ClusterView`] (and on a timer, to repair and to retry) it
//!
//! 0. keeps out of the view the peers whose Node objects it must not trust
//!    ([`super::screen_peers`]: error log, a Warning Event on that Node, a
//!    count by reason in the status and metrics);
//! 1. decides about this node's podCIDRs ([`decide`]) and carries it out:
//!    waits, keeps serving, (re)opens the node state with pools from the
//!    podCIDRs, or refuses a change under live endpoints (error log, a
//!    Warning Event on the Node, ADD closed);
//! 2. syncs the routes to the peers ([`PeerRouting`]);
//! 3. hands the cluster's networks (every Node's podCIDRs and addresses)
//!    to the dataplane when they changed, for masquerading;
//! 4. once ADD is served and the routes are in place, marks the Node
//!    `NetworkUnavailable=False` (again for a re-created Node).
//!
//! The pods' MTU is looked up every round (the uplink's, less the routing
//! mode's overhead, unless configured): a changed uplink MTU reopens the
//! session, so new pods get the new MTU (old ones keep theirs).
//!
//! At start-up ([`Supervisor::resume`]) it reopens the session of the last
//! run, ADD closed until the API server confirms the podCIDRs: pods can be
//! deleted, and the dataplane is reconciled, before the API server answers.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use ipnet::IpNet;
use tokio::sync::watch;

use super::egress::{cluster_networks, masquerade_status, session_mtu};
use super::error::ClusterError;
use super::podcidr::{PodCidrDecision, Refusal, decide};
use super::pools::SessionParams;
use super::serving_gate::ServingGate;
use super::traits::{ClusterApi, NodeSessions, Overlay, PeerRouting, Underlay};
use super::types::{ClusterView, RoutingMode};
use crate::api::{MtuStatus, NodeApi};
use crate::dataplane::{ClusterNetworks, NodeUpdate, NodeUpdates};
use crate::node::NetworkCell;

/// How often the supervisor re-syncs when all is well (repairs routes
/// removed by hand; the API server is watched, not polled).
pub const RESYNC_EVERY: Duration = Duration::from_secs(30);

/// How soon it tries again after a failure.
pub const RETRY_AFTER: Duration = Duration::from_secs(2);

/// The reason of a refused podCIDR change, in Events.
pub const REFUSED_EVENT_REASON: &str = "PodCIDRChangeRefused";

/// What the supervisor works with.
pub struct SupervisorParts {
    /// This node's name.
    pub node_name: String,
    /// The routing mode.
    pub routing: RoutingMode,
    /// The configured MTU; `None`: the uplink's.
    pub mtu: Option<u32>,
    /// Where the uplink is looked up (the device holding the node's
    /// `InternalIP`, or `underlay`).
    pub uplink: Arc<dyn Overlay>,
    /// The configured underlay device (`[kubernetes] underlay`).
    pub underlay: Option<String>,
    /// Masquerading: the switch, the configuration, where the cluster's
    /// networks go.
    pub egress: EgressParts,
    /// Where the MTU in use and masquerading are reported.
    pub network: NetworkCell,
    /// The node state.
    pub state: Arc<dyn NodeSessions>,
    /// Peer routing.
    pub peers: Arc<dyn PeerRouting>,
    /// The API server.
    pub api: Arc<dyn ClusterApi>,
}

impl std::fmt::Debug for SupervisorParts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SupervisorParts")
            .field("node_name", &self.node_name)
            .field("routing", &self.routing)
            .field("mtu", &self.mtu)
            .finish_non_exhaustive()
    }
}

/// What the supervisor needs for masquerading.
#[derive(Default)]
pub struct EgressParts {
    /// Whether masquerading is on (for the status).
    pub masquerade: bool,
    /// The configured `cluster_cidrs` (empty: every Node's podCIDRs).
    pub cluster_cidrs: Vec<IpNet>,
    /// The configured exemptions (`cluster_cidrs`, `no_masquerade`; for the status).
    pub exempt: Vec<IpNet>,
    /// The dataplane's update path; `None`: no dataplane.
    pub updates: Option<Arc<dyn NodeUpdates>>,
}

impl std::fmt::Debug for EgressParts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EgressParts")
            .field("masquerade", &self.masquerade)
            .field("cluster_cidrs", &self.cluster_cidrs)
            .field("exempt", &self.exempt)
            .finish_non_exhaustive()
    }
}

/// The control loop: on every change of the cluster view, the podCIDR
/// decision, the peer routes, then the Node condition (see the `cluster`
/// module's docs).
pub struct Supervisor {
    parts: SupervisorParts,
    gate: Arc<ServingGate>,
    session: Option<(SessionParams, Arc<dyn NodeApi>)>,
    /// The uid of the Node marked `NetworkUnavailable=False` in this session.
    marked: Option<String>,
    /// The offer already refused (logged and recorded once).
    refused: Option<SessionParams>,
    /// The pods' MTU of this round.
    mtu: Option<MtuStatus>,
    /// The uplink last found (used while a look-up fails).
    uplink: Option<Underlay>,
    /// The cluster's networks the dataplane has.
    sent: Option<ClusterNetworks>,
    /// Peer trust and the VXLAN filter's counter.
    trust: trust::Trust,
}

impl std::fmt::Debug for Supervisor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Supervisor")
            .field("node", &self.parts.node_name)
            .field("gate", &self.gate)
            .field("session", &self.session.as_ref().map(|(p, _)| p))
            .field("marked", &self.marked)
            .finish_non_exhaustive()
    }
}

impl Supervisor {
    /// A supervisor whose [`ServingGate`] waits for the Node.
    pub fn new(parts: SupervisorParts) -> Self {
        let reason = format!(
            "waiting for the Node {} from the API server",
            parts.node_name
        );
        Supervisor {
            parts,
            gate: Arc::new(ServingGate::waiting(reason)),
            session: None,
            marked: None,
            refused: None,
            mtu: None,
            uplink: None,
            sent: None,
            trust: trust::Trust::default(),
        }
    }

    /// What the API serves.
    pub fn gate(&self) -> Arc<ServingGate> {
        Arc::clone(&self.gate)
    }

    /// Reopens the session of the last run, if there was one, with ADD
    /// closed until the Node confirms it.
    pub async fn resume(&mut self) -> Result<(), ClusterError> {
        let Some(params) = self.parts.state.stored()? else {
            return Ok(());
        };
        let daemon = self.parts.state.open(&params).await?;
        tracing::info!(pod_cidrs = ?params.pod_cidrs, mtu = params.mtu, "reopened the last run's session");
        self.gate.close(
            Arc::clone(&daemon),
            format!(
                "waiting for the Node {} from the API server (the last run's podCIDRs {:?} are open for deletions)",
                self.parts.node_name, params.pod_cidrs
            ),
        );
        self.session = Some((params, daemon));
        Ok(())
    }

    /// One round for `view`; whether everything converged (else the caller
    /// retries soon).
    pub async fn on_view(&mut self, view: &ClusterView) -> bool {
        let screened = self.screen(view).await;
        let view = &screened;
        let mtu = self.pod_mtu(view).await;
        self.mtu = Some(mtu);
        let mut converged = self.pod_cidrs(view).await;
        let routes_in_place = match self.parts.peers.sync(view).await {
            Ok(report) => {
                for what in &report.changed {
                    tracing::info!(node = %self.parts.node_name, "peer routing: {what}");
                }
                for what in &report.removed {
                    tracing::info!(node = %self.parts.node_name, "peer routing: removed {what}");
                }
                for what in &report.skipped {
                    tracing::debug!("peer routing: skipped: {what}");
                }
                for what in &report.failed {
                    tracing::warn!("peer routing: failed: {what}");
                    converged = false;
                }
                !report.deferred
            }
            Err(e) => {
                tracing::warn!("peer routing: {}", crate::error_chain(&e));
                converged = false;
                false
            }
        };
        self.read_filter().await;
        converged &= self.cluster_networks(view).await;
        self.report();
        if routes_in_place
            && self.gate.is_open()
            && let Some(local) = &view.local
            && self.marked.as_deref() != Some(local.uid.as_str())
        {
            match self.parts.api.mark_network_available(&local.name).await {
                Ok(()) => {
                    tracing::info!(node = %local.name, "NetworkUnavailable=False (SarenaIsUp)");
                    self.marked = Some(local.uid.clone());
                }
                Err(e) => {
                    tracing::warn!("{}", crate::error_chain(&e));
                    converged = false;
                }
            }
        }
        converged
    }

    /// The pods' MTU for this round: configured, else the uplink's (the
    /// last one found while a look-up fails), less the routing overhead.
    async fn pod_mtu(&mut self, view: &ClusterView) -> MtuStatus {
        let local = view.local.as_ref();
        if self.parts.mtu.is_none()
            && let Some(ip) = local.and_then(|l| l.underlay_ip())
        {
            match self
                .parts
                .uplink
                .underlay(ip, self.parts.underlay.clone())
                .await
            {
                Ok(uplink) => self.uplink = Some(uplink),
                Err(e) => tracing::warn!(
                    "cannot look up the uplink for the pods' MTU: {}",
                    crate::error_chain(&e)
                ),
            }
        }
        session_mtu(
            local,
            self.parts.routing,
            self.parts.mtu,
            self.uplink.as_ref(),
        )
    }

    /// Step 3 of [`Supervisor::on_view`]: the cluster's networks to the
    /// dataplane, when they changed.
    async fn cluster_networks(&mut self, view: &ClusterView) -> bool {
        let Some(updates) = &self.parts.egress.updates else {
            return true;
        };
        let networks = cluster_networks(view, &self.parts.egress.cluster_cidrs);
        if self.sent.as_ref() == Some(&networks) {
            return true;
        }
        match updates
            .apply(&NodeUpdate::ClusterNetworks(networks.clone()))
            .await
        {
            Ok(outcome) => {
                tracing::info!(
                    pod_cidrs = ?networks.pod_cidrs,
                    nodes = ?networks.node_addresses,
                    ?outcome,
                    "the cluster's networks (never masqueraded)"
                );
                self.sent = Some(networks);
                true
            }
            Err(e) => {
                tracing::warn!(
                    "cannot hand the cluster's networks to the dataplane: {}",
                    crate::error_chain(&e)
                );
                false
            }
        }
    }

    /// Reports the MTU of the session in place and masquerading.
    fn report(&self) {
        let mut network = self
            .parts
            .network
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let own = self.session.as_ref().map(|(p, _)| p.pod_cidrs.as_slice());
        if let (Some((params, _)), Some(mtu)) = (&self.session, &self.mtu)
            && params.mtu == mtu.mtu
        {
            network.mtu = Some(mtu.clone());
        }
        network.peers = Some(self.peers_status());
        network.vxlan_filter = self.filter_status();
        let egress = &self.parts.egress;
        network.masquerade = Some(masquerade_status(
            egress.masquerade,
            own.unwrap_or_default(),
            &egress.exempt,
            self.sent.as_ref().unwrap_or(&ClusterNetworks::default()),
        ));
    }

    /// Step 1 of [`Supervisor::on_view`].
    async fn pod_cidrs(&mut self, view: &ClusterView) -> bool {
        let endpoints = match &self.session {
            Some((_, daemon)) => match daemon.endpoints().await {
                Ok(endpoints) => endpoints,
                Err(e) => {
                    tracing::warn!(
                        "cannot list the endpoints for the podCIDR decision: {}",
                        crate::error_chain(&e)
                    );
                    return false;
                }
            },
            None => Vec::new(),
        };
        let current = self.session.as_ref().map(|(p, _)| p);
        let base = self
            .mtu
            .as_ref()
            .map_or(crate::node::DEFAULT_MTU, |m| m.base);
        match decide(view, current, &endpoints, self.parts.routing, base) {
            PodCidrDecision::Wait(reason) => {
                match &self.session {
                    Some((_, daemon)) => self.gate.close(Arc::clone(daemon), reason),
                    None => self.gate.wait(reason),
                }
                true
            }
            PodCidrDecision::Keep => {
                if let Some((_, daemon)) = &self.session
                    && !self.gate.is_open()
                {
                    tracing::info!(node = %self.parts.node_name, "podCIDRs confirmed; serving ADD");
                    self.gate.open(Arc::clone(daemon));
                }
                self.refused = None;
                true
            }
            PodCidrDecision::Adopt(params) => self.adopt(params).await,
            PodCidrDecision::Refuse(refusal) => {
                self.refuse(view, refusal).await;
                // Not converged: look again soon, the pods may be gone by then.
                false
            }
        }
    }

    async fn adopt(&mut self, params: SessionParams) -> bool {
        if let Some((old, _)) = self.session.take() {
            if old.mtu != params.mtu
                && let Some(mtu) = &self.mtu
            {
                tracing::info!(
                    from = old.mtu,
                    to = params.mtu,
                    "the pods' MTU changed: now {mtu}; new pods get it, running ones keep theirs"
                );
            }
            tracing::info!(from = ?old, to = ?params, "switching the node state to new podCIDRs");
            self.gate.wait(format!(
                "switching node {} to podCIDRs {:?}",
                self.parts.node_name, params.pod_cidrs
            ));
            self.parts.state.close().await;
        }
        match self.parts.state.open(&params).await {
            Ok(daemon) => {
                tracing::info!(pod_cidrs = ?params.pod_cidrs, mtu = params.mtu, "serving the Node's podCIDRs");
                self.gate.open(Arc::clone(&daemon));
                self.session = Some((params, daemon));
                self.marked = None;
                self.refused = None;
                true
            }
            Err(e) => {
                let e = crate::error_chain(&e);
                tracing::error!("{e}");
                self.gate.wait(e);
                false
            }
        }
    }

    async fn refuse(&mut self, view: &ClusterView, refusal: Refusal) {
        let message = refusal.message(&self.parts.node_name);
        if self.refused.as_ref() != Some(&refusal.offered) {
            tracing::error!("{message}");
            if let Some(local) = &view.local
                && let Err(e) = self
                    .parts
                    .api
                    .warn(local, REFUSED_EVENT_REASON, &message)
                    .await
            {
                tracing::warn!(
                    "cannot record the refusal as an Event: {}",
                    crate::error_chain(&e)
                );
            }
            self.refused = Some(refusal.offered.clone());
        }
        if let Some((_, daemon)) = &self.session {
            self.gate.close(Arc::clone(daemon), message);
        }
    }

    /// Runs until `shutdown`: a round per view change, else every
    /// [`RESYNC_EVERY`] ([`RETRY_AFTER`] after a failure). `views` holds
    /// `None` until the watcher's first complete list. Fails when the
    /// watcher goes away.
    pub async fn run(
        mut self,
        mut views: watch::Receiver<Option<ClusterView>>,
        shutdown: impl Future<Output = ()>,
    ) -> Result<(), ClusterError> {
        let mut shutdown = std::pin::pin!(shutdown);
        let outcome = loop {
            let view = views.borrow_and_update().clone();
            let converged = match &view {
                Some(view) => self.on_view(view).await,
                None => true,
            };
            let pause = if converged { RESYNC_EVERY } else { RETRY_AFTER };
            tokio::select! {
                () = &mut shutdown => break Ok(()),
                changed = views.changed() => if changed.is_err() {
                    break Err(ClusterError::WatchEnded);
                },
                () = tokio::time::sleep(pause) => {}
            }
        };
        self.parts.state.close().await;
        outcome
    }
}

#[path = "supervisor_trust.rs"]
mod trust;
pub use trust::PEER_REJECTED_EVENT_REASON;

#[cfg(test)]
#[path = "supervisor_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "supervisor_egress_tests.rs"]
mod egress_tests;
