//! [`Step`]: the uninstall's steps, in the order they run.

/// One step of the uninstall. [`Step::ALL`] is the order: conflist first
/// (kubelet stops sending ADDs), the pods' links before the node devices'
/// hooks, the hooks before the pins, the set-aside configs restored after
/// every route of ours is gone, the run and state directories last (a
/// re-run needs the registry and the ledger they hold).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Step {
    /// Sarena's conflist and its temporary files.
    Conflist,
    /// The Node's `NetworkUnavailable` condition (Kubernetes mode).
    NodeCondition,
    /// The pods' host veths (and with them the pods' interfaces).
    PodLinks,
    /// The `to_network`/`from_network` filters on the node's devices.
    NetworkHooks,
    /// Routes to the other nodes' podCIDRs (proto 91, main table).
    PeerRoutes,
    /// The VXLAN device and its nftables filter.
    Vxlan,
    /// The gateway pair and the host stack's nftables tables.
    HostStack,
    /// The `clsact` qdiscs Sarena added to node devices.
    Clsact,
    /// The bpffs pin directory.
    Pins,
    /// The sysctls Sarena changed, written back.
    Sysctls,
    /// The plugin binary and its log.
    Plugin,
    /// Other networks' configs set aside at install, put back.
    SetAside,
    /// The socket directory.
    RunDir,
    /// The state directory.
    StateDir,
}

impl Step {
    /// Every step, in the order [`crate::uninstall::uninstall`] runs them.
    pub const ALL: [Step; 14] = [
        Step::Conflist,
        Step::NodeCondition,
        Step::PodLinks,
        Step::NetworkHooks,
        Step::PeerRoutes,
        Step::Vxlan,
        Step::HostStack,
        Step::Clsact,
        Step::Pins,
        Step::Sysctls,
        Step::Plugin,
        Step::SetAside,
        Step::RunDir,
        Step::StateDir,
    ];

    /// Its short name in the report.
    pub fn name(self) -> &'static str {
        match self {
            Step::Conflist => "conflist",
            Step::NodeCondition => "node condition",
            Step::PodLinks => "pod links",
            Step::NetworkHooks => "network hooks",
            Step::PeerRoutes => "peer routes",
            Step::Vxlan => "vxlan",
            Step::HostStack => "host stack",
            Step::Clsact => "clsact",
            Step::Pins => "pins",
            Step::Sysctls => "sysctls",
            Step::Plugin => "plugin",
            Step::SetAside => "set-aside configs",
            Step::RunDir => "run dir",
            Step::StateDir => "state dir",
        }
    }
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
