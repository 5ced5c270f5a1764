//! Kubernetes mode, without Kubernetes: the logic that turns the cluster's
//! Node objects (as a [`ClusterView`], built by the `sarena-k8s` crate, so
//! nothing here links a Kubernetes client and the plugin stays small) into
//! this node's pools, routes to the other nodes, and the Node's
//! `NetworkUnavailable` condition.
//!
//! - `types.rs`: [`ClusterNode`], [`ClusterView`], [`RoutingMode`];
//! - `config.rs`: the `[kubernetes]` table ([`KubernetesConfig`]);
//! - `pools.rs`: a session's parameters and node configuration
//!   ([`SessionParams`], [`session_config`]);
//! - `podcidr.rs`: the podCIDR decision ([`decide`]);
//! - `peer_trust.rs`: which peers' Node objects are trusted ([`screen_peers`]);
//! - `cidr_set.rs`: [`CidrSet`], a union of prefixes asked for overlaps in
//!   O(log n), so a thousand peers are checked in O(n log n);
//! - `egress.rs`: the cluster's networks (never masqueraded) and the pods'
//!   MTU from the uplink ([`cluster_networks`], [`session_mtu`]);
//! - `routes.rs`, `vxlan.rs`: the routes, FDB and neighbour entries a view
//!   asks for, in native and `vxlan` routing (pure);
//! - `vxlan_filter.rs`: [`VxlanFilter`], the nftables table that lets only
//!   current peers reach the VXLAN device (pure);
//! - `sync.rs`: [`PeerSync`], which applies them through the kernel-table
//!   traits of `traits.rs`, implemented over rtnetlink in `rtnl/`;
//! - `serving_gate.rs`: [`ServingGate`], the daemon the API serves (waiting, closed
//!   for ADD, open);
//! - `supervisor.rs`: [`Supervisor`], the control loop over all of it;
//! - `session_file.rs`: the persisted [`SessionParams`].
//!
//! Peer routes are tagged [`SARENA_PEER_ROUTE_PROTOCOL`] (91), apart from the
//! kernel dataplane's pod routes (90), so each reconciler only ever touches
//! its own routes.

mod cidr_set;
mod config;
mod egress;
mod error;
mod peer_trust;
mod podcidr;
mod pools;
mod routes;
pub mod rtnl;
mod serving_gate;
mod session_file;
mod supervisor;
mod sync;
mod traits;
mod types;
mod vxlan;
mod vxlan_filter;

pub use cidr_set::CidrSet;
pub use config::{DEFAULT_VXLAN_PORT, DEFAULT_VXLAN_VNI, KubernetesConfig, VXLAN_DEVICE};
pub use egress::{cluster_networks, masquerade_status, session_mtu};
pub use error::ClusterError;
pub use peer_trust::{RejectReason, RejectedPeer, TrustAnchors, screen_peers};
pub use podcidr::{PodCidrDecision, Refusal, decide};
pub use pools::{
    SessionParams, VXLAN_OVERHEAD_V4, VXLAN_OVERHEAD_V6, overhead, pod_mtu, session_config, sorted,
};
pub use routes::{PeerRoute, SARENA_PEER_ROUTE_PROTOCOL, native_routes};
pub use serving_gate::{NotServing, ServingGate};
pub use session_file::{SESSION_FILE, SessionFile};
pub use supervisor::{
    EgressParts, PEER_REJECTED_EVENT_REASON, REFUSED_EVENT_REASON, RESYNC_EVERY, RETRY_AFTER,
    Supervisor, SupervisorParts,
};
pub use sync::{PeerSync, SyncReport};
pub use traits::{ClusterApi, NodeSessions, Overlay, PeerRouting, RouteTable, Underlay};
#[cfg(any(test, feature = "mocks"))]
pub use traits::{MockClusterApi, MockNodeSessions, MockOverlay, MockPeerRouting, MockRouteTable};
pub use types::{ClusterNode, ClusterView, RoutingMode};
pub use vxlan::{
    FdbEntry, NeighbourEntry, OverlayState, VxlanDevice, overlay_state, vtep_address, vtep_mac,
};
pub use vxlan_filter::{
    FilterDrops, UnwritableName, VXLAN_FILTER_COUNTER, VXLAN_FILTER_TABLE, VxlanFilter,
};
