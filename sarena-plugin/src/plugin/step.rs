//! [`Step`] and [`Operation`]: the named steps of the plugin sequences, used in
//! errors and logs, and the CNI operation each belongs to.

use std::fmt;

/// The CNI operation a step belongs to; decides how a failure maps to a CNI code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    /// ADD.
    Add,
    /// DEL.
    Del,
    /// CHECK.
    Check,
    /// STATUS.
    Status,
    /// GC.
    Gc,
}

/// One step of a plugin sequence, named in errors and logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Step {
    /// ADD 2: delete a stale link of the same name in the pod netns.
    RemoveStaleLink,
    /// ADD 2: unregister the endpoint a previous ADD registered for that stale
    /// link (its allocation is kept).
    RemoveStaleEndpoint,
    /// ADD 4: `GET /daemon/config`.
    DaemonConfig,
    /// ADD 5: `POST /ipam/allocate`.
    Allocate,
    /// ADD 6: create the veth pair.
    CreateVeth,
    /// ADD 7: addresses and routes on the pod interface.
    ConfigurePod,
    /// ADD 8: `POST /endpoint/create`.
    RegisterEndpoint,
    /// DEL: `DELETE /endpoints/…` at the daemon.
    DeleteEndpoint,
    /// DEL: queue the deletion on disk because the daemon cannot be reached.
    EnqueueDeletion,
    /// DEL / GC: remove the host end of the veth.
    RemoveHostLink,
    /// DEL: remove the pod end in the pod netns.
    RemovePodLink,
    /// CHECK: `GET /endpoints/…`.
    LookupEndpoint,
    /// CHECK: read the pod interface.
    InspectPod,
    /// CHECK: look up the host end.
    InspectHostLink,
    /// STATUS: `GET /daemon/health`.
    Health,
    /// GC: `POST /gc`.
    DaemonGc,
    /// GC: list Sarena's host links.
    ListHostLinks,
    /// ADD / DEL: replay the on-disk deletion queue.
    ReplayQueue,
}

impl Step {
    /// The operation this step is part of (for steps shared by several, the first one).
    pub fn operation(self) -> Operation {
        match self {
            Step::RemoveStaleLink
            | Step::RemoveStaleEndpoint
            | Step::DaemonConfig
            | Step::Allocate
            | Step::CreateVeth
            | Step::ConfigurePod
            | Step::RegisterEndpoint
            | Step::ReplayQueue => Operation::Add,
            Step::DeleteEndpoint
            | Step::EnqueueDeletion
            | Step::RemoveHostLink
            | Step::RemovePodLink => Operation::Del,
            Step::LookupEndpoint | Step::InspectPod | Step::InspectHostLink => Operation::Check,
            Step::Health => Operation::Status,
            Step::DaemonGc | Step::ListHostLinks => Operation::Gc,
        }
    }

    /// A short human-readable name, e.g. `allocate an address`.
    pub fn describe(self) -> &'static str {
        match self {
            Step::RemoveStaleLink => "remove a stale pod link",
            Step::RemoveStaleEndpoint => "remove the stale endpoint of a previous ADD",
            Step::DaemonConfig => "get the daemon config",
            Step::Allocate => "allocate an address",
            Step::CreateVeth => "create the veth pair",
            Step::ConfigurePod => "configure the pod interface",
            Step::RegisterEndpoint => "register the endpoint",
            Step::DeleteEndpoint => "delete the endpoint at the daemon",
            Step::EnqueueDeletion => "queue the deletion",
            Step::RemoveHostLink => "remove the host link",
            Step::RemovePodLink => "remove the pod link",
            Step::LookupEndpoint => "look up the endpoint at the daemon",
            Step::InspectPod => "inspect the pod interface",
            Step::InspectHostLink => "inspect the host link",
            Step::Health => "ask the daemon for its health",
            Step::DaemonGc => "garbage-collect at the daemon",
            Step::ListHostLinks => "list host links",
            Step::ReplayQueue => "replay the deletion queue",
        }
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.describe())
    }
}
