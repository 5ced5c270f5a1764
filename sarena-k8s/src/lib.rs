//! Sarena's Kubernetes client: the side of Kubernetes mode that talks to
//! the API server (kube-rs), kept out of `sarena-core` so the plugin binary
//! never links it.
//!
//! - `client.rs`: [`connect`], a client from a kubeconfig or the in-cluster
//!   service account;
//! - `node.rs`: [`PeerNode`], a Node object decoded to the fields peer
//!   routing reads;
//! - `view.rs`: Node objects → [`sarena_core::cluster::ClusterView`], kept
//!   one event at a time by [`NodeTable`];
//! - `watch.rs`: [`watch_nodes`], a watch of the Node objects that
//!   publishes a view on every change (never polling);
//! - `forward.rs`: a watch's events, translated, into a channel;
//! - `identity.rs`: [`watch_identity`], the Pods on this node and the
//!   Namespaces, metadata-only, as `sarena_core::identity` events;
//! - `policy/`: NetworkPolicy's adapters, [`policy::network_policy`] and
//!   [`policy::watch_policy`] (every Pod, Namespace, NetworkPolicy and
//!   Service as `sarena_core::policy` events);
//! - `status.rs`: [`KubeClusterApi`], the `NetworkUnavailable` condition
//!   and Warning Events on the Node.
//!
//! RBAC it needs: `get`, `list`, `watch` on `nodes`, `pods`, `namespaces`,
//! `services` and `networking.k8s.io` `networkpolicies`; `patch` on
//! `nodes/status`; `create` on `events` (core group).
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

mod client;
mod error;
mod forward;
mod identity;
mod node;
pub mod policy;
mod status;
mod view;
mod watch;

pub use client::connect;
pub use error::K8sError;
pub use identity::{namespace_event, namespace_meta, pod_event, pod_meta, watch_identity};
pub use node::{PeerNode, PeerNodeAddress, PeerNodeSpec, PeerNodeStatus};
pub use status::{CONDITION_REASON, KubeClusterApi, event_for, network_available_patch};
pub use view::{NodeTable, cluster_node, cluster_view};
pub use watch::watch_nodes;
