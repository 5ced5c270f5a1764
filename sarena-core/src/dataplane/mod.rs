//! The node's dataplane: how pod traffic is forwarded, behind the [`Dataplane`] trait.
//!
//! Two backends: the kernel's routing table (`kernel` mode: per-pod host routes,
//! the host answering for the gateway) and eBPF programs on each pod's host-side
//! veth (`ebpf` mode, the default). The daemon calls [`Dataplane::attach`] when
//! an endpoint is registered, [`Dataplane::detach`] when it is removed, and
//! [`Dataplane::reconcile`] at start-up with the registry's endpoints (through
//! [`crate::node::WithDataplane`], which composes the two). What the node
//! learns about pods beyond one endpoint (their identities) reaches a
//! dataplane through [`NodeUpdates`] (`updates.rs`).

mod error;
pub mod kernel;
pub(crate) mod pod_veth;
pub mod policy_plan;
mod updates;

use std::net::{IpAddr, Ipv6Addr};

use async_trait::async_trait;
use ipnet::IpNet;

pub use crate::api::DataplaneMode;
use crate::api::{BandwidthStatus, Endpoint, HostRoutingStatus, ProgramsStatus};
pub use error::DataplaneError;
pub use kernel::KernelDataplane;
#[cfg(any(test, feature = "mocks"))]
pub use updates::MockNodeUpdates;
pub use updates::{ClusterNetworks, NodeUpdate, NodeUpdates, UpdateOutcome};

pub mod ebpf;

/// The pods' IPv6 next hop, on every pod's link: the default route of an
/// IPv6 pod goes via this link-local address, which the host end of its
/// veth answers for (the eBPF programs' neighbour-discovery responder; in
/// kernel mode the address itself, on every pod's host veth). A pool's own
/// IPv6 gateway address stays the host's, never a pod's.
pub const POD_IPV6_GATEWAY: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1);

/// Node-wide settings the dataplane needs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeNetwork {
    /// Gateway address of every pool (the pods' next hop).
    pub gateways: Vec<IpAddr>,
    /// Every pool CIDR (for masquerading).
    pub pools: Vec<IpNet>,
    /// Masquerade traffic from the pools to destinations outside the
    /// cluster's pod CIDRs.
    pub masquerade: bool,
    /// Configured destinations never masqueraded (besides the pools and
    /// what [`NodeUpdate::ClusterNetworks`] says).
    pub exempt: Vec<IpNet>,
}

/// What [`Dataplane::reconcile`] changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReconcileReport {
    /// Host ifnames attached (they were missing).
    pub attached: Vec<String>,
    /// Stale entries removed (pod addresses or ifnames).
    pub removed: Vec<String>,
}

/// How pod traffic is forwarded on this node: the verbs every dataplane has.
/// What a dataplane can tell or do beyond forwarding is a capability trait
/// of its own, a supertrait here ([`EndpointReports`]): each dataplane
/// implements it and says in its own impl what it has, so no feature is a
/// defaulted method that a new dataplane silently answers "nothing" to.
#[async_trait]
pub trait Dataplane: EndpointReports + Send + Sync {
    /// The mode this backend implements.
    fn mode(&self) -> DataplaneMode;
    /// Node-level set-up: forwarding, the gateway addresses, masquerading. Idempotent.
    async fn setup(&self, node: &NodeNetwork) -> Result<(), DataplaneError>;
    /// Makes an endpoint reachable. Idempotent. Refuses
    /// ([`DataplaneError::NotAPodVeth`]) an endpoint whose host interface
    /// is not one of Sarena's pod veths, before touching anything.
    async fn attach(&self, endpoint: &Endpoint) -> Result<(), DataplaneError>;
    /// Removes what [`Dataplane::attach`] set up. Idempotent; missing pieces are fine.
    async fn detach(&self, endpoint: &Endpoint) -> Result<(), DataplaneError>;
    /// Brings the dataplane in line with the registry: attaches what is
    /// missing, removes what is stale.
    async fn reconcile(&self, endpoints: &[Endpoint]) -> Result<ReconcileReport, DataplaneError>;
}

/// What a dataplane reports about its endpoints, read from the kernel at
/// request time (`GET /daemon/status`, `GET /stats/endpoints`, CHECK's
/// bandwidth check). Read-only: nothing here changes the dataplane. A
/// dataplane that keeps no per-endpoint state answers `None` in its impl.
#[async_trait]
pub trait EndpointReports: Send + Sync {
    /// Whether each of `endpoints` has this dataplane's programs in place;
    /// `None` for a dataplane without programs.
    async fn programs_status(
        &self,
        endpoints: &[Endpoint],
    ) -> Result<Option<ProgramsStatus>, DataplaneError>;

    /// For an endpoint with bandwidth limits, what the dataplane enforces and
    /// what is missing; `None` for a dataplane without limits or an endpoint
    /// without any.
    async fn bandwidth_status(
        &self,
        endpoint: &Endpoint,
    ) -> Result<Option<BandwidthStatus>, DataplaneError>;

    /// The counters the dataplane keeps for `endpoint`, summed over CPUs;
    /// `None` when it keeps none. Reading them costs the dataplane nothing
    /// per packet: the programs count anyway.
    fn endpoint_counters(
        &self,
        endpoint: &Endpoint,
    ) -> Result<Option<ebpf::EndpointCounters>, DataplaneError>;

    /// Host routing to and from the other nodes' pods without the host
    /// stack: their pod CIDRs and the node-wide counters; `None` for a
    /// dataplane without it.
    fn host_routing(&self) -> Result<Option<HostRoutingStatus>, DataplaneError>;
}

#[cfg(any(test, feature = "mocks"))]
mockall::mock! {
    /// A mock dataplane, every capability included (feature `mocks`).
    pub Dataplane {}

    #[async_trait]
    impl Dataplane for Dataplane {
        fn mode(&self) -> DataplaneMode;
        async fn setup(&self, node: &NodeNetwork) -> Result<(), DataplaneError>;
        async fn attach(&self, endpoint: &Endpoint) -> Result<(), DataplaneError>;
        async fn detach(&self, endpoint: &Endpoint) -> Result<(), DataplaneError>;
        async fn reconcile(&self, endpoints: &[Endpoint]) -> Result<ReconcileReport, DataplaneError>;
    }

    #[async_trait]
    impl EndpointReports for Dataplane {
        async fn programs_status(
            &self,
            endpoints: &[Endpoint],
        ) -> Result<Option<ProgramsStatus>, DataplaneError>;
        async fn bandwidth_status(
            &self,
            endpoint: &Endpoint,
        ) -> Result<Option<BandwidthStatus>, DataplaneError>;
        fn endpoint_counters(
            &self,
            endpoint: &Endpoint,
        ) -> Result<Option<ebpf::EndpointCounters>, DataplaneError>;
        fn host_routing(&self) -> Result<Option<HostRoutingStatus>, DataplaneError>;
    }
}

/// `sysctl KEY=VALUE` for a node-wide key (forwarding), recorded first in
/// `ledger` when there is one: the current value is read, the change
/// written down (write-ahead), then made. A ledger that cannot record it
/// fails the write, so the host is never changed unrecorded.
pub(crate) fn write_node_sysctl(
    ledger: Option<&crate::host_ledger::HostLedger>,
    key: &str,
    value: &str,
) -> Result<(), DataplaneError> {
    if let Some(ledger) = ledger {
        let before = crate::sysctl::read(key)?;
        ledger.record_sysctl(key, &before, value)?;
    }
    crate::sysctl::write(key, value)?;
    Ok(())
}
