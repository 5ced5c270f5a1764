//! [`NodeUpdates`]: the node-wide update path into a dataplane, apart from
//! the per-endpoint [`super::Dataplane`] calls. The node pushes what it
//! learns about the pods (today: an endpoint's identity; later: policy,
//! the identities of remote pods) as [`NodeUpdate`]s, and every dataplane
//! answers each one with an [`UpdateOutcome`]: a backend that does not use
//! an update yet says [`UpdateOutcome::Ignored`] explicitly, there is no
//! default that drops data silently.

use async_trait::async_trait;
use ipnet::IpNet;

use super::DataplaneError;
use super::KernelDataplane;
use super::ebpf::AyaDataplane;
use crate::api::{Attachment, PodIdentity};

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

/// Routes only: nothing of a pod's identity is enforced in kernel mode yet.
#[async_trait]
impl NodeUpdates for KernelDataplane {
    async fn apply(&self, update: &NodeUpdate) -> Result<UpdateOutcome, DataplaneError> {
        match update {
            NodeUpdate::Identity { .. } => Ok(UpdateOutcome::Ignored),
        }
    }
}

/// The programs carry no identity yet (NetworkPolicy will).
#[async_trait]
impl NodeUpdates for AyaDataplane {
    async fn apply(&self, update: &NodeUpdate) -> Result<UpdateOutcome, DataplaneError> {
        match update {
            NodeUpdate::Identity { .. } => Ok(UpdateOutcome::Ignored),
        }
    }
}
