//! [`NodeUpdates`]: the node-wide update path into a dataplane, apart from
//! the per-endpoint [`super::Dataplane`] calls. The node pushes what it
//! learns about the pods and the cluster (an endpoint's identity, the
//! cluster's networks; later: policy, the identities of remote pods) as
//! [`NodeUpdate`]s, and every dataplane
//! answers each one with an [`UpdateOutcome`]: a backend that does not use
//! an update yet says [`UpdateOutcome::Ignored`] explicitly, there is no
//! default that drops data silently.

use std::net::IpAddr;
use std::sync::Arc;

use async_trait::async_trait;
use ipnet::IpNet;

use super::DataplaneError;
use super::KernelDataplane;
use super::ebpf::{AyaDataplane, BpfError};
use crate::api::{Attachment, PodIdentity};
use crate::policy::CompiledPolicy;

/// Something the node learned that a dataplane may enforce.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum NodeUpdate {
    /// The endpoint of `owner` (with these addresses) now has `identity`.
    Identity {
        /// The endpoint's owner.
        owner: Attachment,
        /// Its addresses.
        addresses: Vec<IpNet>,
        /// Its labels and its namespace's.
        identity: PodIdentity,
    },
    /// The cluster's networks changed (Kubernetes mode: a Node came, went
    /// or got a podCIDR): traffic to them is never masqueraded.
    ClusterNetworks(ClusterNetworks),
    /// NetworkPolicy compiled anew: the whole state the dataplane enforces
    /// (address → identity, every local endpoint's isolation and entries).
    Policy(Arc<CompiledPolicy>),
}

/// The cluster's networks: the destinations pod traffic reaches with its
/// own source address.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterNetworks {
    /// The cluster's pod CIDRs (configured, or every Node's podCIDRs).
    pub pod_cidrs: Vec<IpNet>,
    /// Every Node's `InternalIP`s.
    pub node_addresses: Vec<IpAddr>,
    /// The podCIDRs of the other nodes this node routes to (trusted peers
    /// only, never this node's own): the eBPF dataplane sends traffic to
    /// their pods, and delivers traffic from them, without the host stack.
    pub peer_pod_cidrs: Vec<IpNet>,
}

impl ClusterNetworks {
    /// Both lists as networks (addresses as host prefixes), sorted and
    /// merged where they overlap or touch.
    pub fn destinations(&self) -> Vec<IpNet> {
        let all: Vec<IpNet> = self
            .pod_cidrs
            .iter()
            .map(IpNet::trunc)
            .chain(self.node_addresses.iter().map(|a| IpNet::from(*a)))
            .collect();
        IpNet::aggregate(&all)
    }
}

/// What a dataplane did with a [`NodeUpdate`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpdateOutcome {
    /// It is in effect.
    Applied,
    /// This dataplane has no use for it (yet); nothing changed.
    Ignored,
}

/// A dataplane's node-wide update path: the node pushes each [`NodeUpdate`]
/// and the dataplane says what it did with it; there is no default method.
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
#[async_trait]
pub trait NodeUpdates: Send + Sync {
    /// Takes `update` into account; idempotent.
    async fn apply(&self, update: &NodeUpdate) -> Result<UpdateOutcome, DataplaneError>;
}

/// NetworkPolicy goes into the policy table (`kernel/policy.rs`); pod
/// identities reach it through the policy state, not one by one; the
/// cluster's networks go into the masquerading exemptions.
#[async_trait]
impl NodeUpdates for KernelDataplane {
    async fn apply(&self, update: &NodeUpdate) -> Result<UpdateOutcome, DataplaneError> {
        match update {
            NodeUpdate::Identity { .. } => Ok(UpdateOutcome::Ignored),
            NodeUpdate::ClusterNetworks(networks) => self.set_cluster_networks(networks).await,
            NodeUpdate::Policy(compiled) => self.set_policy(compiled.clone()).await,
        }
    }
}

/// NetworkPolicy goes into the programs' maps (`ebpf/policy.rs`); a
/// failed write (a full map) is an error, and what it would have allowed
/// stays denied. Pod identities reach the programs through the policy
/// state, not one by one. Egress to the
/// cluster's networks and beyond goes through the host stack (the
/// programs short-cut only pod -> pod on this node), whose masquerading
/// takes the cluster's networks.
#[async_trait]
impl NodeUpdates for AyaDataplane {
    async fn apply(&self, update: &NodeUpdate) -> Result<UpdateOutcome, DataplaneError> {
        match update {
            NodeUpdate::Identity { .. } => Ok(UpdateOutcome::Ignored),
            NodeUpdate::ClusterNetworks(networks) => {
                let host = match self.host_stack_updates() {
                    Some(host) => host.apply(update).await?,
                    None => UpdateOutcome::Ignored,
                };
                // The node's devices first, then the map (see set_peer_pods).
                if !networks.peer_pod_cidrs.is_empty() {
                    let hooked = self.ensure_network_hooks().await?;
                    tracing::debug!(devices = ?hooked, "eBPF host routing: node devices");
                }
                let change = self.set_peer_pods(&networks.peer_pod_cidrs)?;
                if !change.added.is_empty() || !change.removed.is_empty() {
                    tracing::info!(
                        added = ?change.added,
                        removed = ?change.removed,
                        "eBPF host routing: other nodes' pod CIDRs"
                    );
                }
                if networks.peer_pod_cidrs.is_empty() {
                    Ok(host)
                } else {
                    Ok(UpdateOutcome::Applied)
                }
            }
            NodeUpdate::Policy(compiled) => {
                let applied = self.apply_policy(compiled.clone());
                // The deferred egress check where traffic leaves the node:
                // only once some policy isolates egress (the node's own
                // devices are left alone otherwise).
                if compiled.isolates_egress()
                    && let Err(error) = self.ensure_network_hooks().await
                {
                    tracing::warn!(
                        error = %crate::error_chain(&error),
                        "NetworkPolicy: the exit devices could not be listed"
                    );
                }
                if applied.failed > 0 {
                    return Err(DataplaneError::Ebpf(BpfError::PolicyWrites {
                        failed: applied.failed,
                        writes: applied.writes,
                        full_maps: applied.full_maps,
                    }));
                }
                Ok(UpdateOutcome::Applied)
            }
        }
    }
}
