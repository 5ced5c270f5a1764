//! The seams of Kubernetes mode, each mocked in the tests: the kernel
//! tables peer routing writes ([`RouteTable`], [`Overlay`]), peer routing
//! as a whole ([`PeerRouting`]), the node state a session opens
//! ([`NodeSessions`]) and the API server's side ([`ClusterApi`]).

use std::net::IpAddr;
use std::sync::Arc;

use async_trait::async_trait;

use super::error::ClusterError;
use super::pools::SessionParams;
use super::routes::PeerRoute;
use super::sync::SyncReport;
use super::types::{ClusterNode, ClusterView};
use super::vxlan::{FdbEntry, NeighbourEntry, VxlanDevice};
use super::vxlan_filter::{FilterDrops, VxlanFilter};
use crate::api::NodeApi;

/// The main routing table, as far as Sarena's peer routes go.
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
#[async_trait]
pub trait RouteTable: Send + Sync {
    /// Every route of protocol [`super::SARENA_PEER_ROUTE_PROTOCOL`] (both families).
    async fn peer_routes(&self) -> Result<Vec<PeerRoute>, ClusterError>;
    /// `ip route replace` the route (tagged with Sarena's peer protocol).
    async fn replace_route(&self, route: &PeerRoute) -> Result<(), ClusterError>;
    /// `ip route del` the route; a missing one is fine.
    async fn delete_route(&self, route: &PeerRoute) -> Result<(), ClusterError>;
}

/// The underlay (uplink) device: its name, index and MTU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Underlay {
    /// Its name.
    pub name: String,
    /// ifindex.
    pub index: u32,
    /// MTU.
    pub mtu: u32,
}

/// The VXLAN device and its tables.
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
#[async_trait]
pub trait Overlay: Send + Sync {
    /// The device `name` if given, else the one holding `local`.
    async fn underlay(&self, local: IpAddr, name: Option<String>)
    -> Result<Underlay, ClusterError>;
    /// Creates the device, or brings an existing one in line (recreating it
    /// when its VNI, port, local address or underlay differ); its ifindex.
    async fn ensure_device(&self, device: &VxlanDevice) -> Result<u32, ClusterError>;
    /// Removes the device `name` if it is a VXLAN device; whether it existed.
    async fn remove_device(&self, name: &str) -> Result<bool, ClusterError>;
    /// Creates or rewrites the filter in front of the device (Sarena's own
    /// nftables table).
    async fn ensure_filter(&self, filter: &VxlanFilter) -> Result<(), ClusterError>;
    /// Removes the filter's table, if any.
    async fn remove_filter(&self) -> Result<(), ClusterError>;
    /// What the filter dropped since it was created.
    async fn vxlan_filter_drops(&self) -> Result<FilterDrops, ClusterError>;
    /// Every address on this node's devices.
    async fn local_addresses(&self) -> Result<Vec<IpAddr>, ClusterError>;
    /// The device's FDB entries with a remote.
    async fn fdb(&self, ifindex: u32) -> Result<Vec<FdbEntry>, ClusterError>;
    /// `bridge fdb replace`.
    async fn replace_fdb(&self, ifindex: u32, entry: &FdbEntry) -> Result<(), ClusterError>;
    /// `bridge fdb del`; a missing one is fine.
    async fn delete_fdb(&self, ifindex: u32, entry: &FdbEntry) -> Result<(), ClusterError>;
    /// The device's permanent neighbour entries.
    async fn neighbours(&self, ifindex: u32) -> Result<Vec<NeighbourEntry>, ClusterError>;
    /// `ip neigh replace … nud permanent`.
    async fn replace_neighbour(
        &self,
        ifindex: u32,
        entry: &NeighbourEntry,
    ) -> Result<(), ClusterError>;
    /// `ip neigh del`; a missing one is fine.
    async fn delete_neighbour(
        &self,
        ifindex: u32,
        entry: &NeighbourEntry,
    ) -> Result<(), ClusterError>;
}

/// Keeps the routes to the peers' podCIDRs in line with the cluster.
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
#[async_trait]
pub trait PeerRouting: Send + Sync {
    /// Adds what `view` asks for and is missing, replaces what differs,
    /// removes Sarena's own entries it no longer asks for. Per-peer failures
    /// are in the report; an `Err` means nothing could be compared.
    async fn sync(&self, view: &ClusterView) -> Result<SyncReport, ClusterError>;
}

/// The node state (IPAM, registry, dataplane) that each Kubernetes-mode
/// session opens for its podCIDRs, and closes when they change.
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
#[async_trait]
pub trait NodeSessions: Send + Sync {
    /// The session the state last ran with (persisted), if any.
    fn stored(&self) -> Result<Option<SessionParams>, ClusterError>;
    /// Opens the node state for `session` (pools from its podCIDRs),
    /// replays the deletion queue, sets up and reconciles the dataplane
    /// (gateways in place), persists `session`; what the API then serves.
    async fn open(&self, session: &SessionParams) -> Result<Arc<dyn NodeApi>, ClusterError>;
    /// Closes the open session (its background tasks; the store once the
    /// last handle to it is gone).
    async fn close(&self);
}

/// What Sarena tells the API server.
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
#[async_trait]
pub trait ClusterApi: Send + Sync {
    /// Sets the Node's condition `NetworkUnavailable` to `False`, reason
    /// `SarenaIsUp`.
    async fn mark_network_available(&self, node: &str) -> Result<(), ClusterError>;
    /// Deletes the Node's condition `NetworkUnavailable` when its reason is
    /// `SarenaIsUp` (Sarena set it); another reason, or no such condition,
    /// is left alone. `Ok(true)`: it was deleted.
    async fn clear_network_condition(&self, node: &str) -> Result<bool, ClusterError>;
    /// Records a Warning Event on the Node.
    async fn warn(
        &self,
        node: &ClusterNode,
        reason: &str,
        message: &str,
    ) -> Result<(), ClusterError>;
}
