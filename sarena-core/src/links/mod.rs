//! Netns handling and veth provisioning, behind the [`Links`] trait.
//!
//! [`RtnetlinkLinks`] is the real backend; the plugin sequences are written and
//! tested against the trait.

use std::path::Path;

use async_trait::async_trait;
use ipnet::IpNet;

use crate::api::RouteSpec;

pub mod mac;
pub(crate) mod netns;
pub(crate) mod rtnl;

pub use rtnl::RtnetlinkLinks;

/// What to create for one pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VethSpec {
    /// Host end name (`lxc` + hash, see [`host_ifname`]).
    pub host_ifname: String,
    /// The pod's netns path.
    pub netns: std::path::PathBuf,
    /// Final name of the pod end (`CNI_IFNAME`).
    pub pod_ifname: String,
    /// MTU for both ends.
    pub mtu: u32,
    /// Pod-side MAC, when the runtime asked for one (`CNI_ARGS MAC=`); random otherwise.
    pub pod_mac: Option<String>,
}

/// The veth pair as created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VethPair {
    /// Host end name.
    pub host_ifname: String,
    /// Host end ifindex.
    pub host_ifindex: u32,
    /// Host end MAC.
    pub host_mac: String,
    /// Pod end name (final).
    pub pod_ifname: String,
    /// Pod end MAC.
    pub pod_mac: String,
}

/// Addresses and routes for the pod interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodIfaceConfig {
    /// Addresses with prefix.
    pub addresses: Vec<IpNet>,
    /// Routes, in order (a gateway's host route before the default via it).
    pub routes: Vec<RouteSpec>,
}

/// What is found on the pod interface (for CHECK).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodIfaceState {
    /// MAC.
    pub mac: String,
    /// Addresses with prefix.
    pub addresses: Vec<IpNet>,
    /// Routes through this interface.
    pub routes: Vec<RouteSpec>,
    /// Administratively and operationally up.
    pub up: bool,
}

/// Errors from a [`Links`] backend.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    /// The netns path cannot be opened.
    #[error("cannot open netns {path}: {source}")]
    Netns {
        /// Path.
        path: String,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// A netlink request failed.
    #[error("netlink {call} on {ifname}: {message}")]
    Netlink {
        /// What was asked, e.g. `link add`.
        call: &'static str,
        /// The interface involved.
        ifname: String,
        /// The kernel's answer.
        message: String,
    },
    /// Something else went wrong with the OS.
    #[error("{call} on {ifname}: {source}")]
    Io {
        /// What was done.
        call: &'static str,
        /// The interface involved.
        ifname: String,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
}

/// Netns and link operations the plugin sequences need.
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
#[async_trait]
pub trait Links: Send + Sync {
    /// Deletes the link `ifname` inside `netns` if it exists. `Ok(false)`: there was none.
    async fn remove_pod_link(&self, netns: &Path, ifname: &str) -> Result<bool, LinkError>;
    /// Creates the veth pair: host end in the host netns (MTU set, `rp_filter` off, up),
    /// pod end created inside `spec.netns` under its final name (down); an
    /// existing link of that name there is an error (remove it first).
    async fn create_veth(&self, spec: &VethSpec) -> Result<VethPair, LinkError>;
    /// Puts addresses and routes on the pod interface and brings it up.
    async fn configure_pod(
        &self,
        netns: &Path,
        ifname: &str,
        config: &PodIfaceConfig,
    ) -> Result<(), LinkError>;
    /// Deletes a host-side link (and with it its veth peer). `Ok(false)`: there was none.
    async fn remove_host_link(&self, host_ifname: &str) -> Result<bool, LinkError>;
    /// Deletes the host link `ifindex` (and its veth peer) if it still has the
    /// name `host_ifname`: a newer link may have taken the name, never the
    /// index. `Ok(false)`: it was gone.
    async fn remove_host_link_index(
        &self,
        ifindex: u32,
        host_ifname: &str,
    ) -> Result<bool, LinkError>;
    /// Reads the pod interface; `Ok(None)` when it does not exist.
    async fn inspect_pod(
        &self,
        netns: &Path,
        ifname: &str,
    ) -> Result<Option<PodIfaceState>, LinkError>;
    /// The ifindex of a host link, `Ok(None)` when it does not exist.
    async fn host_link_index(&self, host_ifname: &str) -> Result<Option<u32>, LinkError>;
    /// Names of Sarena's host links (`lxc*`), for GC.
    async fn list_host_links(&self) -> Result<Vec<String>, LinkError>;
}

/// The host-side veth name for an attachment: `lxc` + the leading hex of
/// sha256(`containerid:ifname`), 15 bytes in all (the kernel's limit).
pub fn host_ifname(container_id: &str, ifname: &str) -> String {
    format!(
        "lxc{:.12x}",
        crate::digest::attachment_digest(container_id, ifname)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_ifname_is_15_bytes_and_stable() {
        let a = host_ifname("abc123", "eth0");
        assert_eq!(a.len(), 15);
        assert!(a.starts_with("lxc"));
        assert_eq!(a, host_ifname("abc123", "eth0"));
        assert_ne!(a, host_ifname("abc123", "eth1"));
        assert_ne!(a, host_ifname("abc124", "eth0"));
    }
}
