//! [`RtnetlinkLinks`]: the [`Links`] trait over rtnetlink.

mod ipv6;
mod pod;
mod veth;

pub use ipv6::link_local;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use async_trait::async_trait;
use rtnetlink::Handle;

use super::{LinkError, Links, PodIfaceConfig, PodIfaceState, VethPair, VethSpec};
use crate::netlink;

/// The [`Links`] backend for a real kernel.
///
/// Holds one netlink socket in the host netns and one per pod netns it has
/// touched (created inside it without moving a runtime worker there; see
/// the crate's netlink module), so an ADD opens each namespace once. Must be created and used inside a tokio runtime.
///
/// ```no_run
/// # async fn demo() -> Result<(), sarena_core::links::LinkError> {
/// use sarena_core::links::{Links, RtnetlinkLinks};
/// let links = RtnetlinkLinks::new()?;
/// let lxc = links.list_host_links().await?;
/// println!("{lxc:?}");
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct RtnetlinkLinks {
    host: Handle,
    pods: Mutex<HashMap<PathBuf, Handle>>,
}

impl RtnetlinkLinks {
    /// Opens the host-netns netlink socket.
    pub fn new() -> Result<Self, LinkError> {
        let host = netlink::host_handle().map_err(|source| LinkError::Io {
            call: "netlink socket",
            ifname: String::new(),
            source,
        })?;
        Ok(RtnetlinkLinks {
            host,
            pods: Mutex::new(HashMap::new()),
        })
    }

    /// A handle in the pod netns at `netns`, cached per path.
    fn pod_handle(&self, netns: &Path) -> Result<Handle, LinkError> {
        if let Some(handle) = self.cached(netns) {
            return Ok(handle);
        }
        let handle = open_netns(netns)
            .and_then(|file| netlink::handle_in(&file).map_err(|e| netns_error(netns, e)))?;
        if let Ok(mut pods) = self.pods.lock() {
            pods.insert(netns.to_path_buf(), handle.clone());
        }
        Ok(handle)
    }

    fn cached(&self, netns: &Path) -> Option<Handle> {
        self.pods
            .lock()
            .ok()
            .and_then(|pods| pods.get(netns).cloned())
    }
}

#[async_trait]
impl Links for RtnetlinkLinks {
    async fn remove_pod_link(&self, netns: &Path, ifname: &str) -> Result<bool, LinkError> {
        let pod = self.pod_handle(netns)?;
        Ok(netlink::delete_link_by_name(&pod, ifname).await?)
    }

    async fn create_veth(&self, spec: &VethSpec) -> Result<VethPair, LinkError> {
        let file = open_netns(&spec.netns)?;
        veth::create(&self.host, &file, spec).await
    }

    async fn configure_pod(
        &self,
        netns: &Path,
        ifname: &str,
        config: &PodIfaceConfig,
    ) -> Result<(), LinkError> {
        let pod = self.pod_handle(netns)?;
        pod::configure(&pod, ifname, config).await
    }

    async fn remove_host_link(&self, host_ifname: &str) -> Result<bool, LinkError> {
        Ok(netlink::delete_link_by_name(&self.host, host_ifname).await?)
    }

    async fn remove_host_link_index(
        &self,
        ifindex: u32,
        host_ifname: &str,
    ) -> Result<bool, LinkError> {
        Ok(netlink::delete_link_by_index(&self.host, ifindex, host_ifname).await?)
    }

    async fn inspect_pod(
        &self,
        netns: &Path,
        ifname: &str,
    ) -> Result<Option<PodIfaceState>, LinkError> {
        let pod = self.pod_handle(netns)?;
        pod::inspect(&pod, ifname).await
    }

    async fn host_link_index(&self, host_ifname: &str) -> Result<Option<u32>, LinkError> {
        Ok(netlink::link_index(&self.host, host_ifname).await?)
    }

    async fn list_host_links(&self) -> Result<Vec<String>, LinkError> {
        let links = netlink::all_links(&self.host).await?;
        Ok(links
            .iter()
            .filter_map(netlink::link_name)
            .filter(|name| name.starts_with("lxc"))
            .map(str::to_string)
            .collect())
    }
}

/// Opens a netns file (`/var/run/netns/NAME` or `/proc/PID/ns/net`).
fn open_netns(path: &Path) -> Result<std::fs::File, LinkError> {
    std::fs::File::open(path).map_err(|e| netns_error(path, e))
}

fn netns_error(path: &Path, source: std::io::Error) -> LinkError {
    LinkError::Netns {
        path: path.display().to_string(),
        source,
    }
}
