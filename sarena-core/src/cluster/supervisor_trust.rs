//! The supervisor's side of peer trust and the VXLAN filter: the view
//! without untrusted peers ([`screen_peers`]), each new rejection logged,
//! recorded as a Warning Event on the rejected Node and counted by reason;
//! the filter's drop counter read for the status.

use std::collections::BTreeMap;
use std::net::IpAddr;

use super::Supervisor;
use crate::api::{PeersStatus, RejectedPeerStatus, VxlanFilterStatus};
use crate::cluster::peer_trust::{RejectedPeer, TrustAnchors, screen_peers};
use crate::cluster::types::{ClusterView, RoutingMode};

/// The reason of the Event recorded on a rejected peer's Node.
pub const PEER_REJECTED_EVENT_REASON: &str = "PeerRejected";

/// What the supervisor keeps of peer trust between rounds.
#[derive(Debug, Default)]
pub(super) struct Trust {
    /// The peers rejected in the last round.
    rejected: Vec<RejectedPeer>,
    /// Rejections since start, by reason label.
    counts: BTreeMap<&'static str, u64>,
    /// The VXLAN filter's counter as last read.
    drops: Option<VxlanFilterStatus>,
}

impl Supervisor {
    /// `view` without the peers it must not trust; new rejections are
    /// reported (error log, Event, count).
    pub(super) async fn screen(&mut self, view: &ClusterView) -> ClusterView {
        let mut own: Vec<IpAddr> = match self.parts.uplink.local_addresses().await {
            Ok(ips) => ips,
            Err(e) => {
                tracing::warn!(
                    "cannot list this node's addresses to check the peers against: {}",
                    crate::error_chain(&e)
                );
                Vec::new()
            }
        };
        own.extend(
            view.local
                .iter()
                .flat_map(|l| l.internal_ips.iter().copied()),
        );
        let (screened, rejected) = screen_peers(
            view,
            TrustAnchors {
                own_addresses: &own,
                cluster_cidrs: &self.parts.egress.cluster_cidrs,
            },
        );
        for r in rejected.iter().filter(|r| !self.trust.rejected.contains(r)) {
            let message = r.message(&self.parts.node_name);
            tracing::error!(peer = %r.node, reason = r.reason.as_str(), "{message}");
            *self.trust.counts.entry(r.reason.as_str()).or_default() += 1;
            if let Some(node) = view.peers.iter().find(|p| p.name == r.node)
                && let Err(e) = self
                    .parts
                    .api
                    .warn(node, PEER_REJECTED_EVENT_REASON, &message)
                    .await
            {
                tracing::warn!(
                    "cannot record the rejection of node {} as an Event: {}",
                    r.node,
                    crate::error_chain(&e)
                );
            }
        }
        self.trust.rejected = rejected;
        screened
    }

    /// Reads the VXLAN filter's drop counter (`vxlan` routing only).
    pub(super) async fn read_filter(&mut self) {
        if self.parts.routing != RoutingMode::Vxlan {
            return;
        }
        match self.parts.uplink.vxlan_filter_drops().await {
            Ok(d) => {
                self.trust.drops = Some(VxlanFilterStatus {
                    dropped_packets: d.packets,
                    dropped_bytes: d.bytes,
                });
            }
            Err(e) => tracing::debug!(
                "cannot read the VXLAN filter's counter: {}",
                crate::error_chain(&e)
            ),
        }
    }

    /// The peers part of the status.
    pub(super) fn peers_status(&self) -> PeersStatus {
        PeersStatus {
            rejected: self
                .trust
                .rejected
                .iter()
                .map(|r| RejectedPeerStatus {
                    node: r.node.clone(),
                    reason: r.reason.as_str().to_owned(),
                    detail: r.detail.clone(),
                })
                .collect(),
            rejections: self
                .trust
                .counts
                .iter()
                .map(|(k, v)| ((*k).to_owned(), *v))
                .collect(),
        }
    }

    /// The VXLAN filter part of the status.
    pub(super) fn filter_status(&self) -> Option<VxlanFilterStatus> {
        self.trust.drops
    }
}

#[cfg(test)]
#[path = "supervisor_trust_tests.rs"]
mod tests;
