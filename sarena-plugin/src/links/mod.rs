//! Netns handling and veth provisioning, behind the [`Links`] trait.
//!
//! [`RtnetlinkLinks`] is the real backend; the plugin sequences are written and
//! tested against the trait.
//!
//! # Ownership
//!
//! Both ends of every veth pair Sarena creates are born in link group
//! [`LINK_GROUP`] (`ip link show group 1397902913`), set in the very request
//! that creates them, so no crash can leave an unmarked pair behind. Every
//! removal checks the mark first: a link of the right name that is not in the
//! group (another plugin's `lxc…`, or one made by hand) is never deleted, and
//! [`Links::list_host_links`] lists only marked links, so GC and the daemon's
//! start-up sweep cannot touch anyone else's.

use std::path::Path;

use async_trait::async_trait;
use ipnet::IpNet;

use crate::api::RouteSpec;
use crate::mac::MacAddr;
use crate::netlink::NetlinkError;
use crate::sysctl::SysctlError;

mod rtnl;

pub use rtnl::{RtnetlinkLinks, link_local};

/// The link group that marks a link as Sarena's ("SRNA" in ASCII).
pub const LINK_GROUP: u32 = 0x5352_4e41;

/// One of Sarena's host links, as listed by [`Links::list_host_links`].
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HostLink {
    /// Its name (`lxc…`).
    pub ifname: String,
    /// Its ifindex.
    pub ifindex: u32,
}

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
    pub pod_mac: Option<MacAddr>,
    /// Whether the host end keeps IPv6: the pod has an IPv6 address, which
    /// the host routes to over this link. Without, IPv6 is off on the host
    /// end, so it adds nothing to the host's IPv6 table (see
    /// `links::rtnl::veth`).
    pub host_ipv6: bool,
}

/// The veth pair as created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VethPair {
    /// Host end name.
    pub host_ifname: String,
    /// Host end ifindex.
    pub host_ifindex: u32,
    /// Host end MAC.
    pub host_mac: MacAddr,
    /// Pod end name (final).
    pub pod_ifname: String,
    /// Pod end MAC.
    pub pod_mac: MacAddr,
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
    /// MAC (all-zero when the link has no Ethernet address).
    pub mac: MacAddr,
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
    /// The netns path cannot be opened, or no netlink socket made in it.
    #[error("cannot open netns {path}")]
    Netns {
        /// Path.
        path: String,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// A netlink request failed.
    #[error(transparent)]
    Netlink(#[from] NetlinkError),
    /// The pod end's name is taken in the pod netns (the caller did not
    /// remove the link first).
    #[error("netlink link add on {ifname}: {ifname} already exists in the pod netns")]
    PodIfnameTaken {
        /// The pod end's name.
        ifname: String,
        /// The kernel's `EEXIST`.
        #[source]
        source: NetlinkError,
    },
    /// The pod interface to configure is not in the pod netns.
    #[error("link get {ifname}: no such interface in the pod netns")]
    NoPodLink {
        /// The pod interface.
        ifname: String,
    },
    /// A route for the pod interface cannot be expressed (e.g. a gateway of
    /// the other address family).
    #[error("route add {dst} on {ifname}")]
    InvalidRoute {
        /// The pod interface.
        ifname: String,
        /// The route's destination.
        dst: IpNet,
        /// rtnetlink's route builder's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The host end was gone right after the veth was created.
    #[error("link get {ifname}: the host end vanished right after creation")]
    HostEndVanished {
        /// The host end.
        ifname: String,
    },
    /// A sysctl of a link (`rp_filter`) could not be written.
    #[error(transparent)]
    Sysctl(#[from] SysctlError),
    /// A link of the name asked for exists but does not carry Sarena's mark
    /// ([`LINK_GROUP`]): it belongs to someone else and was left alone.
    #[error("link del {ifname}: not Sarena's (group {group}, not {LINK_GROUP}); left alone")]
    NotOurs {
        /// The link.
        ifname: String,
        /// The group it is in.
        group: u32,
    },
    /// Something else went wrong with the OS.
    #[error("{call} on {ifname}")]
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

impl LinkError {
    /// The OS error code behind the failure, when there is one (the
    /// kernel's answer to a netlink request, or a system call's).
    pub fn errno(&self) -> Option<i32> {
        match self {
            LinkError::Netlink(e) | LinkError::PodIfnameTaken { source: e, .. } => e.errno(),
            LinkError::Netns { source, .. } | LinkError::Io { source, .. } => source.raw_os_error(),
            LinkError::Sysctl(e) => e.errno(),
            LinkError::NoPodLink { .. }
            | LinkError::InvalidRoute { .. }
            | LinkError::HostEndVanished { .. }
            | LinkError::NotOurs { .. } => None,
        }
    }
}

/// Netns and link operations the plugin sequences need.
///
/// Every removal deletes only links that carry Sarena's mark ([`LINK_GROUP`]):
/// a link of the name asked for that does not is [`LinkError::NotOurs`].
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
#[async_trait]
pub trait Links: Send + Sync {
    /// Deletes the link `ifname` inside `netns` if it exists. `Ok(false)`: there was none.
    async fn remove_pod_link(&self, netns: &Path, ifname: &str) -> Result<bool, LinkError>;
    /// Creates the veth pair, both ends marked: host end in the host netns (MTU
    /// set, `rp_filter` off, up), pod end created inside `spec.netns` under its
    /// final name (down); an existing link of that name there is an error
    /// (remove it first).
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
    /// Sarena's host links: `lxc*` and marked, for GC and the daemon's
    /// start-up sweep.
    async fn list_host_links(&self) -> Result<Vec<HostLink>, LinkError>;
    /// Forgets whatever the backend keeps open for the pod netns at `netns`
    /// (DEL calls it last: the pod is gone or going).
    fn release_netns(&self, netns: &Path);
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
