//! [`RtnetlinkLinks`]: the [`Links`] trait over rtnetlink.

mod pod;
pub(crate) mod query;
mod veth;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use async_trait::async_trait;
use rtnetlink::Handle;

use super::netns::{handle_in_file, host_handle, open_netns};
use super::{LinkError, Links, PodIfaceConfig, PodIfaceState, VethPair, VethSpec};

/// The [`Links`] backend for a real kernel.
///
/// Holds one netlink socket in the host netns and one per pod netns it has
/// touched (each created on a throwaway thread; see the `netns` module), so an
/// ADD opens each namespace once. Must be created and used inside a tokio runtime.
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
        Ok(RtnetlinkLinks {
            host: host_handle()?,
            pods: Mutex::new(HashMap::new()),
        })
    }

    /// A handle in the pod netns at `netns`, cached per path.
    fn pod_handle(&self, netns: &Path) -> Result<Handle, LinkError> {
        if let Some(handle) = self.cached(netns) {
            return Ok(handle);
        }
        let file = open_netns(netns)?;
        let handle = handle_in_file(&file, netns)?;
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
        query::delete_link_by_name(&pod, ifname).await
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
        query::delete_link_by_name(&self.host, host_ifname).await
    }

    async fn remove_host_link_index(
        &self,
        ifindex: u32,
        host_ifname: &str,
    ) -> Result<bool, LinkError> {
        query::delete_link_by_index(&self.host, ifindex, host_ifname).await
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
        Ok(query::link_by_name(&self.host, host_ifname)
            .await?
            .map(|l| l.header.index))
    }

    async fn list_host_links(&self) -> Result<Vec<String>, LinkError> {
        let links = query::all_links(&self.host).await?;
        Ok(links
            .iter()
            .filter_map(query::link_name)
            .filter(|name| name.starts_with("lxc"))
            .map(str::to_string)
            .collect())
    }
}
