//! [`RtnetlinkPeers`]: the kernel side of peer routing over rtnetlink, in
//! the daemon's network namespace: the main table's peer routes
//! ([`RouteTable`](super::RouteTable), `routes.rs`), the VXLAN device
//! (`device.rs`) and its FDB and neighbour entries (`neigh.rs`)
//! ([`Overlay`](super::Overlay)); the VXLAN filter goes through `nft`
//! (`filter.rs`).

mod device;
mod filter;
mod neigh;
mod routes;

use rtnetlink::Handle;

use super::error::ClusterError;
use crate::netlink;

/// Peer routing's kernel tables. Create inside a tokio runtime.
#[derive(Debug, Clone)]
pub struct RtnetlinkPeers {
    handle: Handle,
}

impl RtnetlinkPeers {
    /// Opens a netlink socket in the caller's network namespace.
    pub fn new() -> Result<Self, ClusterError> {
        let handle = netlink::host_handle().map_err(|source| ClusterError::Socket { source })?;
        Ok(RtnetlinkPeers { handle })
    }
}

#[async_trait::async_trait]
impl super::Overlay for RtnetlinkPeers {
    async fn underlay(
        &self,
        local: std::net::IpAddr,
        name: Option<String>,
    ) -> Result<super::Underlay, ClusterError> {
        device::underlay(&self.handle, local, name).await
    }

    async fn ensure_device(&self, device: &super::VxlanDevice) -> Result<u32, ClusterError> {
        device::ensure(&self.handle, device).await
    }

    async fn remove_device(&self, name: &str) -> Result<bool, ClusterError> {
        device::remove(&self.handle, name).await
    }

    async fn ensure_filter(&self, filter: &super::VxlanFilter) -> Result<(), ClusterError> {
        filter::ensure(filter).await
    }

    async fn remove_filter(&self) -> Result<(), ClusterError> {
        filter::remove().await
    }

    async fn vxlan_filter_drops(&self) -> Result<super::FilterDrops, ClusterError> {
        filter::drops().await
    }

    async fn local_addresses(&self) -> Result<Vec<std::net::IpAddr>, ClusterError> {
        device::local_addresses(&self.handle).await
    }

    async fn fdb(&self, ifindex: u32) -> Result<Vec<super::FdbEntry>, ClusterError> {
        neigh::fdb(&self.handle, ifindex).await
    }

    async fn replace_fdb(&self, ifindex: u32, entry: &super::FdbEntry) -> Result<(), ClusterError> {
        neigh::replace_fdb(&self.handle, ifindex, entry).await
    }

    async fn delete_fdb(&self, ifindex: u32, entry: &super::FdbEntry) -> Result<(), ClusterError> {
        neigh::delete_fdb(&self.handle, ifindex, entry).await
    }

    async fn neighbours(&self, ifindex: u32) -> Result<Vec<super::NeighbourEntry>, ClusterError> {
        neigh::neighbours(&self.handle, ifindex).await
    }

    async fn replace_neighbour(
        &self,
        ifindex: u32,
        entry: &super::NeighbourEntry,
    ) -> Result<(), ClusterError> {
        neigh::replace_neighbour(&self.handle, ifindex, entry).await
    }

    async fn delete_neighbour(
        &self,
        ifindex: u32,
        entry: &super::NeighbourEntry,
    ) -> Result<(), ClusterError> {
        neigh::delete_neighbour(&self.handle, ifindex, entry).await
    }
}
