//! JSON bodies of the daemon API.

use std::net::IpAddr;

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

/// What owns an allocation or an endpoint: one interface of one container.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Attachment {
    /// `CNI_CONTAINERID`.
    pub container_id: String,
    /// `CNI_IFNAME`.
    pub ifname: String,
}

/// The pod an attachment belongs to (from `CNI_ARGS`; all optional outside Kubernetes).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PodRef {
    /// `K8S_POD_NAMESPACE`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// `K8S_POD_NAME`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `K8S_POD_UID`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
}

/// `GET /daemon/config`: what the plugin needs from the daemon.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DaemonConfig {
    /// MTU of both veth ends and of the pod's default route.
    pub mtu: u32,
    /// The dataplane mode the daemon runs (`ebpf` or `kernel`).
    pub dataplane: String,
}

/// `GET /daemon/health`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Health {
    /// True when the daemon can serve ADD.
    pub ready: bool,
    /// Human-readable state.
    #[serde(default)]
    pub message: String,
}

/// `POST /ipam/allocate`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AllocateRequest {
    /// Who the address is for; a repeated request by the same owner gets the same address.
    pub owner: Attachment,
    /// The pod, used to pick a per-namespace pool.
    #[serde(default)]
    pub pod: PodRef,
    /// Static addresses asked for (`CNI_ARGS IP=` or runtimeConfig `ips`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requested: Vec<IpAddr>,
    /// A pool asked for by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
}

/// One address of an allocation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllocatedAddress {
    /// The pod's address with the pool's prefix length.
    pub address: IpNet,
    /// The gateway the pod routes through.
    pub gateway: IpAddr,
    /// The pool it came from.
    pub pool: String,
}

/// A route the plugin installs in the pod.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouteSpec {
    /// Destination.
    pub dst: IpNet,
    /// Next hop; absent for an on-link route.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gw: Option<IpAddr>,
    /// Route MTU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u32>,
}

/// The answer to `POST /ipam/allocate`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Allocation {
    /// The owner.
    pub owner: Attachment,
    /// One address per family served.
    pub addresses: Vec<AllocatedAddress>,
    /// Routes for the pod: a host route to each gateway, a default route via it.
    pub routes: Vec<RouteSpec>,
    /// Unix time (seconds) after which an allocation without an endpoint is released.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_expires_at: Option<u64>,
}

/// `POST /gc`: everything not listed is garbage.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GcRequest {
    /// Attachments still in use.
    pub valid: Vec<Attachment>,
}

/// What GC removed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GcReport {
    /// Endpoints removed (their addresses released with them).
    pub endpoints_removed: Vec<Attachment>,
    /// Allocations released that had no endpoint.
    pub allocations_released: Vec<Attachment>,
}

/// State of one pool, for operators.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolState {
    /// Pool name.
    pub name: String,
    /// Its CIDR.
    pub cidr: IpNet,
    /// Its gateway.
    pub gateway: IpAddr,
    /// Kubernetes namespaces it serves (empty: the default pool).
    #[serde(default)]
    pub namespaces: Vec<String>,
    /// Addresses handed out.
    pub allocated: u64,
    /// Addresses it can hand out in all (excluding gateway, reserved, network, broadcast).
    pub capacity: u64,
}

/// One allocation, for operators.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllocationRecord {
    /// Owner.
    pub owner: Attachment,
    /// Address.
    pub address: IpAddr,
    /// Pool.
    pub pool: String,
    /// Unix time of allocation.
    pub allocated_at: u64,
    /// Set while no endpoint holds it: when it is released.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_expires_at: Option<u64>,
}

/// `GET /ipam`: pools and allocations.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IpamState {
    /// Pools.
    pub pools: Vec<PoolState>,
    /// Allocations.
    pub allocations: Vec<AllocationRecord>,
}
