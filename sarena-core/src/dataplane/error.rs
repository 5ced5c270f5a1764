//! [`DataplaneError`]: what a dataplane backend reports.

use std::path::PathBuf;

use ipnet::IpNet;

use super::ebpf::BpfError;
use crate::netlink::NetlinkError;
use crate::sysctl::SysctlError;

/// Errors from a dataplane backend.
#[derive(Debug, thiserror::Error)]
pub enum DataplaneError {
    /// A netlink request failed (links, addresses, routes, tc filters).
    #[error("dataplane")]
    Netlink(#[from] NetlinkError),
    /// No netlink socket could be opened in the host netns.
    #[error("dataplane: netlink socket in the host netns")]
    Socket {
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// A link the dataplane needs is not there.
    #[error("dataplane: link get {ifname}: {reason}")]
    NoLink {
        /// The link.
        ifname: String,
        /// Which link it is and why it should be there.
        reason: &'static str,
    },
    /// An endpoint's host interface is not one of Sarena's pod veths: it
    /// was left untouched.
    #[error(
        "dataplane: host interface {ifname} is not a Sarena pod veth: {reason}; left untouched"
    )]
    NotAPodVeth {
        /// The interface.
        ifname: String,
        /// What it lacks.
        reason: &'static str,
    },
    /// A route cannot be expressed as a netlink message.
    #[error("dataplane: route build for {dst}")]
    InvalidRoute {
        /// The route's destination.
        dst: IpNet,
        /// rtnetlink's route builder's error (its type is not exported).
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A sysctl write failed.
    #[error("dataplane")]
    Sysctl(#[from] SysctlError),
    /// A file or directory operation failed (the pin directory).
    #[error("dataplane: {call} {}", .path.display())]
    Io {
        /// What was done.
        call: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// An external command (e.g. `nft` for masquerading) could not be run.
    #[error("dataplane: {command}")]
    Spawn {
        /// The command line.
        command: &'static str,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// An external command ran and failed.
    #[error("dataplane: {command} failed: {stderr}")]
    Command {
        /// The command line.
        command: &'static str,
        /// What it printed on stderr.
        stderr: String,
    },
    /// The blocking task running an external command did not complete.
    #[error("dataplane: {command}: the task did not complete")]
    Task {
        /// The command line.
        command: &'static str,
        /// Cause.
        #[source]
        source: tokio::task::JoinError,
    },
    /// eBPF load, attach or map operations failed.
    #[error("dataplane")]
    Ebpf(#[from] BpfError),
    /// The host-changes ledger could not record a change about to be
    /// made: the change was not made.
    #[error("dataplane: the host change was not made")]
    Ledger(#[from] crate::host_ledger::LedgerError),
}

impl DataplaneError {
    /// The OS error code behind the failure, when there is one (the
    /// kernel's answer to a netlink request or a system call).
    pub fn errno(&self) -> Option<i32> {
        match self {
            DataplaneError::Netlink(e) => e.errno(),
            DataplaneError::Sysctl(e) => e.errno(),
            DataplaneError::Socket { source }
            | DataplaneError::Io { source, .. }
            | DataplaneError::Spawn { source, .. } => source.raw_os_error(),
            DataplaneError::Ebpf(e) => e.errno(),
            DataplaneError::NoLink { .. }
            | DataplaneError::NotAPodVeth { .. }
            | DataplaneError::InvalidRoute { .. }
            | DataplaneError::Command { .. }
            | DataplaneError::Task { .. }
            | DataplaneError::Ledger(_) => None,
        }
    }

    /// The maps a policy update found full, by name (empty for every
    /// other failure): what an operator must enlarge or relieve.
    pub fn full_maps(&self) -> &[&'static str] {
        match self {
            DataplaneError::Ebpf(BpfError::PolicyWrites { full_maps, .. }) => full_maps,
            _ => &[],
        }
    }
}
