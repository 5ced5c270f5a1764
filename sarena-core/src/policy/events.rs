//! [`PolicyEvent`]: what the adapters (the Kubernetes watches) tell the
//! policy engine.

use std::net::IpAddr;

use super::model::{Policy, PolicyNamespace, PolicyPod};

/// Which list a relist or a completed list is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// Pods (every node's).
    Pods,
    /// Namespaces.
    Namespaces,
    /// NetworkPolicies.
    Policies,
    /// Services (their addresses).
    Services,
}

/// Something the policy engine learns. A list is complete at
/// [`PolicyEvent::Listed`]: between [`PolicyEvent::Relisting`] and it, the
/// objects of the earlier list stay in force (so nothing is briefly
/// forgotten, which would open or close traffic for nothing), and the ones
/// the new list did not name are dropped when it completes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PolicyEvent {
    /// A pod was listed, created or changed.
    Pod(PolicyPod),
    /// A pod is gone.
    PodGone {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
    /// A namespace was listed, created or changed.
    Namespace(PolicyNamespace),
    /// A namespace is gone.
    NamespaceGone {
        /// Its name.
        name: String,
    },
    /// A NetworkPolicy was listed, created or changed.
    Policy(Policy),
    /// A NetworkPolicy is gone.
    PolicyGone {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
    /// A Service was listed, created or changed: the addresses the host
    /// stack translates for it (ClusterIPs, external IPs, load-balancer
    /// ingress IPs).
    Service {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// Its addresses.
        addresses: Vec<IpAddr>,
    },
    /// A Service is gone.
    ServiceGone {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
    /// This node's own addresses (its Node's addresses and the daemon's
    /// view of its interfaces).
    NodeAddresses(Vec<IpAddr>),
    /// A list of `Kind` starts again (after a watch error).
    Relisting(Kind),
    /// A list of `Kind` is complete.
    Listed(Kind),
}
