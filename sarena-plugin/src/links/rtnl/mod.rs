//! [`RtnetlinkLinks`]: the [`Links`] trait over rtnetlink.

mod handles;
mod ipv6;
mod pod;
mod veth;

pub use ipv6::link_local;

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::{Mutex, MutexGuard};

use async_trait::async_trait;
use rtnetlink::Handle;

use super::{
    HostLink, LINK_GROUP, LinkError, Links, PodIfaceConfig, PodIfaceState, VethPair, VethSpec,
};
use crate::netlink::{self, MarkedDeletion};
use handles::{NetnsId, PodHandles};

/// The [`Links`] backend for a real kernel.
///
/// Holds one netlink socket in the host netns and a bounded cache of sockets
/// in the pod netns it works in (created inside each without moving a
/// runtime worker there; see the crate's netlink module), so an ADD opens each
/// namespace once. A pod's socket is released by [`Links::release_netns`]
/// (DEL calls it) or, past [`RtnetlinkLinks::DEFAULT_POD_HANDLES`], when it is
/// the least recently used; a cached socket is only reused for the very
/// namespace it was made in. Must be created and used inside a tokio runtime.
///
/// ```no_run
/// # async fn demo() -> Result<(), sarena_plugin::links::LinkError> {
/// use sarena_plugin::links::{Links, RtnetlinkLinks};
/// let links = RtnetlinkLinks::new()?;
/// let lxc = links.list_host_links().await?;
/// println!("{lxc:?}");
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct RtnetlinkLinks {
    host: Handle,
    pods: Mutex<PodHandles<Handle>>,
}

impl RtnetlinkLinks {
    /// How many pod-netns sockets are kept open at most, unless
    /// [`RtnetlinkLinks::with_pod_handle_capacity`] says otherwise.
    pub const DEFAULT_POD_HANDLES: usize = 64;

    /// Opens the host-netns netlink socket.
    pub fn new() -> Result<Self, LinkError> {
        let host = netlink::host_handle().map_err(|source| LinkError::Io {
            call: "netlink socket",
            ifname: String::new(),
            source,
        })?;
        Ok(RtnetlinkLinks {
            host,
            pods: Mutex::new(PodHandles::new(Self::DEFAULT_POD_HANDLES)),
        })
    }

    /// Keeps at most `capacity` pod-netns sockets open (at least one).
    pub fn with_pod_handle_capacity(self, capacity: usize) -> Self {
        RtnetlinkLinks {
            pods: Mutex::new(PodHandles::new(capacity)),
            ..self
        }
    }

    /// How many pod-netns sockets are open now.
    pub fn pod_handles(&self) -> usize {
        self.lock_pods().len()
    }

    /// A handle in the pod netns at `netns`, cached per path and namespace.
    fn pod_handle(&self, netns: &Path) -> Result<Handle, LinkError> {
        let id = std::fs::metadata(netns)
            .map(|m| netns_id(&m))
            .map_err(|e| netns_error(netns, e))?;
        if let Some(handle) = self.lock_pods().get(netns, id) {
            return Ok(handle);
        }
        let _phase = crate::phases::start(|| "netlink socket in the pod netns");
        let file = open_netns(netns)?;
        let id = file
            .metadata()
            .map(|m| netns_id(&m))
            .map_err(|e| netns_error(netns, e))?;
        let handle = netlink::handle_in(&file).map_err(|e| netns_error(netns, e))?;
        self.lock_pods()
            .insert(netns.to_path_buf(), id, handle.clone());
        Ok(handle)
    }

    fn lock_pods(&self) -> MutexGuard<'_, PodHandles<Handle>> {
        // The cache holds no invariant a panic could break.
        self.pods.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn netns_id(meta: &std::fs::Metadata) -> NetnsId {
    (meta.dev(), meta.ino())
}

/// `Ok(true)` when removed, `Ok(false)` when absent, [`LinkError::NotOurs`]
/// when the link is someone else's.
fn removed(ifname: &str, deletion: MarkedDeletion) -> Result<bool, LinkError> {
    match deletion {
        MarkedDeletion::Removed => Ok(true),
        MarkedDeletion::Absent => Ok(false),
        MarkedDeletion::Foreign { group } => Err(LinkError::NotOurs {
            ifname: ifname.to_string(),
            group,
        }),
    }
}

#[async_trait]
impl Links for RtnetlinkLinks {
    async fn remove_pod_link(&self, netns: &Path, ifname: &str) -> Result<bool, LinkError> {
        let _phase = crate::phases::start(|| "netlink remove_pod_link");
        let pod = self.pod_handle(netns)?;
        let deletion = netlink::delete_marked_link(&pod, ifname, None, LINK_GROUP).await?;
        removed(ifname, deletion)
    }

    async fn create_veth(&self, spec: &VethSpec) -> Result<VethPair, LinkError> {
        let _phase = crate::phases::start(|| "netlink create_veth");
        let file = open_netns(&spec.netns)?;
        veth::create(&self.host, &file, spec).await
    }

    async fn configure_pod(
        &self,
        netns: &Path,
        ifname: &str,
        config: &PodIfaceConfig,
    ) -> Result<(), LinkError> {
        let _phase = crate::phases::start(|| "netlink configure_pod");
        let pod = self.pod_handle(netns)?;
        pod::configure(&pod, ifname, config).await
    }

    async fn remove_host_link(&self, host_ifname: &str) -> Result<bool, LinkError> {
        let _phase = crate::phases::start(|| "netlink remove_host_link");
        let deletion =
            netlink::delete_marked_link(&self.host, host_ifname, None, LINK_GROUP).await?;
        removed(host_ifname, deletion)
    }

    async fn remove_host_link_index(
        &self,
        ifindex: u32,
        host_ifname: &str,
    ) -> Result<bool, LinkError> {
        let _phase = crate::phases::start(|| "netlink remove_host_link_index");
        let deletion =
            netlink::delete_marked_link(&self.host, host_ifname, Some(ifindex), LINK_GROUP).await?;
        removed(host_ifname, deletion)
    }

    async fn inspect_pod(
        &self,
        netns: &Path,
        ifname: &str,
    ) -> Result<Option<PodIfaceState>, LinkError> {
        let _phase = crate::phases::start(|| "netlink inspect_pod");
        let pod = self.pod_handle(netns)?;
        pod::inspect(&pod, ifname).await
    }

    async fn host_link_index(&self, host_ifname: &str) -> Result<Option<u32>, LinkError> {
        let _phase = crate::phases::start(|| "netlink host_link_index");
        Ok(netlink::link_index(&self.host, host_ifname).await?)
    }

    async fn list_host_links(&self) -> Result<Vec<HostLink>, LinkError> {
        let _phase = crate::phases::start(|| "netlink list_host_links");
        let links = netlink::all_links(&self.host).await?;
        Ok(links
            .iter()
            .filter(|link| netlink::link_group(link) == LINK_GROUP)
            .filter_map(|link| {
                let name = netlink::link_name(link)?;
                name.starts_with("lxc").then(|| HostLink {
                    ifname: name.to_string(),
                    ifindex: link.header.index,
                })
            })
            .collect())
    }

    fn release_netns(&self, netns: &Path) {
        self.lock_pods().remove(netns);
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
