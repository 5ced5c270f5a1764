//! [`ClusterError`]: what can fail in Kubernetes mode, with the call and the
//! object it was about.

use std::net::IpAddr;
use std::path::PathBuf;

use crate::api::DaemonError;
use crate::netlink::NetlinkError;

/// Errors of the cluster module and of the backends behind its traits.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// A netlink request failed.
    #[error(transparent)]
    Netlink(#[from] NetlinkError),
    /// The netlink socket could not be opened.
    #[error("cannot open a netlink socket")]
    Socket {
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// No device holds the node's underlay address (VXLAN needs one).
    #[error("no device holds this node's InternalIP {address}; set [kubernetes] underlay")]
    NoUnderlay {
        /// The address.
        address: IpAddr,
    },
    /// A device Sarena needs does not exist.
    #[error("device {name} does not exist: {reason}")]
    NoDevice {
        /// The device.
        name: String,
        /// Why it was needed, or what happened to it.
        reason: &'static str,
    },
    /// A route Sarena built was invalid (a bug, or a bad address from the API).
    #[error("invalid peer route {route}")]
    InvalidRoute {
        /// The route.
        route: String,
        /// rtnetlink's objection.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The persisted session could not be read or written.
    #[error("{call} {path}")]
    SessionFile {
        /// The call, e.g. `read`.
        call: &'static str,
        /// The file.
        path: PathBuf,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// The persisted session is not valid JSON of the expected shape.
    #[error("the session file {path} is damaged")]
    SessionFormat {
        /// The file.
        path: PathBuf,
        /// Cause.
        #[source]
        source: serde_json::Error,
    },
    /// The node state could not be opened for a session.
    #[error("cannot open the node state for podCIDRs {pod_cidrs}")]
    Open {
        /// The session's podCIDRs.
        pod_cidrs: String,
        /// Cause (the daemon's start-up error).
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A request to the API server failed.
    #[error("Kubernetes API: {call} {object}")]
    Api {
        /// The request, e.g. `patch nodes/status`.
        call: &'static str,
        /// The object, e.g. the Node's name.
        object: String,
        /// The client's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The VXLAN filter's nftables table could not be written or read.
    #[error("VXLAN filter: cannot {call}")]
    Filter {
        /// What was being done, e.g. `apply the rules`.
        call: &'static str,
        /// Cause (`nft`'s error).
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The node's own addresses could not be listed.
    #[error("cannot list this node's addresses")]
    LocalAddresses {
        /// Cause.
        #[source]
        source: NetlinkError,
    },
    /// The watcher of the Node objects stopped.
    #[error("the watcher of the Node objects stopped")]
    WatchEnded,
    /// The API server has no Node of this name (a wrong --node-name).
    #[error("Kubernetes API: no Node named {node}")]
    NoSuchNode {
        /// The name looked for.
        node: String,
    },
    /// The node state refused a request (listing the endpoints).
    #[error("node state")]
    Daemon(#[from] DaemonError),
}
