//! Pod identity: which labels each registered endpoint carries, kept up to
//! date from the cluster (Kubernetes mode) without a Kubernetes client.
//!
//! An adapter (`sarena-k8s`) watches the Pods on this node and the
//! Namespaces and hands what it sees to an [`IdentityTracker`] as
//! [`IdentityEvent`]s, already reduced to [`PodMeta`] / [`NamespaceMeta`]
//! (labels, namespace, name, uid). The tracker works out which endpoints'
//! labels change, writes each change durably through an
//! [`IdentityRegistry`] (the [`crate::node::Registry`]) and pushes it to the
//! dataplane as a [`crate::dataplane::NodeUpdate::Identity`]. An endpoint
//! registered before its pod is seen gets its labels when the pod arrives;
//! one registered after, when the daemon reports it
//! ([`IdentityEvent::Registered`]).
//!
//! - `tracker.rs`: [`IdentityTracker`], the pure logic;
//! - `registry.rs`: [`IdentityRegistry`] for [`crate::node::Registry`].

mod registry;
#[cfg(test)]
mod tests;
mod tracker;

use crate::api::{Attachment, Endpoint, Labels, PodIdentity};

pub use tracker::IdentityTracker;

/// The longest namespace, pod name or uid kept (Kubernetes names are at
/// most 253 bytes); an object with a longer one is ignored.
pub const MAX_NAME_LEN: usize = 253;

/// What identity needs of a Pod object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodMeta {
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.uid` (empty when the object has none).
    pub uid: String,
    /// `metadata.labels`.
    pub labels: Labels,
}

/// What identity needs of a Namespace object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NamespaceMeta {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.labels`.
    pub labels: Labels,
}

/// Something the tracker learns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdentityEvent {
    /// A pod on this node was listed, created or changed.
    Pod(PodMeta),
    /// A pod is gone (its endpoints keep their labels until they go too).
    PodGone {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
    /// The pods are being listed anew: forget the ones known so far.
    PodsRelisted,
    /// A namespace was listed, created or changed.
    Namespace(NamespaceMeta),
    /// A namespace is gone.
    NamespaceGone {
        /// Its name.
        name: String,
    },
    /// The namespaces are being listed anew: forget the ones known so far.
    NamespacesRelisted,
    /// An endpoint was registered.
    Registered(Attachment),
    /// A list is complete: bring every endpoint up to date.
    Resync,
}

/// Why the tracker could not read or update the registry.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    /// The registry failed.
    #[error("endpoint registry")]
    Registry {
        /// Cause.
        #[source]
        source: crate::node::NodeError,
    },
}

/// Where endpoints' identities are kept (durably).
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
pub trait IdentityRegistry: Send + Sync {
    /// The registered endpoints.
    fn endpoints(&self) -> Result<Vec<Endpoint>, IdentityError>;
    /// The endpoint of `owner`, if registered.
    fn endpoint(&self, owner: &Attachment) -> Result<Option<Endpoint>, IdentityError>;
    /// Records `identity` for `owner`'s endpoint; the updated endpoint,
    /// `None` when it is no longer registered.
    fn set_identity(
        &self,
        owner: &Attachment,
        identity: &PodIdentity,
    ) -> Result<Option<Endpoint>, IdentityError>;
}
