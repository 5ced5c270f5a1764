//! Operator-facing answers: `GET /daemon/status` ([`DaemonStatus`]) and the
//! per-endpoint dataplane counters of `GET /stats/endpoints`
//! ([`EndpointStats`]). Field names are stable: `sarena status -o json` and
//! `sarena endpoint … -o json` print these types as they are.

use std::collections::BTreeMap;
use std::net::IpAddr;

use ipnet::IpNet;
use serde::{Deserialize, Serialize};
use strum::IntoEnumIterator;

use super::bandwidth::BandwidthStatus;
use super::endpoint::Endpoint;
use super::network::NetworkStatus;
use super::types::{Health, IpamState};
use sarena_common::{DropReason, EndpointCounters};

/// `GET /daemon/status`: the node at a glance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DaemonStatus {
    /// The daemon's version (its crate version).
    pub version: String,
    /// What `GET /daemon/health` answers.
    pub health: Health,
    /// The dataplane and whether its programs are in place.
    pub dataplane: DataplaneStatus,
    /// Every pool with its usage.
    pub pools: Vec<PoolUsage>,
    /// Registered endpoints.
    pub endpoints: u64,
    /// Allocations, with or without an endpoint.
    pub allocations: u64,
    /// Allocations without an endpoint yet (each has a lease).
    pub leases: u64,
    /// The plugin's deletion queue, when the daemon knows where it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_queue: Option<DeleteQueueStatus>,
    /// Kubernetes mode: absent when the daemon does not run in it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes: Option<KubernetesStatus>,
    /// The pods' MTU and egress masquerading, when the daemon reports them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkStatus>,
}

/// The dataplane part of [`DaemonStatus`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DataplaneStatus {
    /// `ebpf`, `kernel` or `none`.
    pub mode: String,
    /// The eBPF programs on the endpoints' host veths; absent in the modes
    /// that have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub programs: Option<ProgramsStatus>,
    /// eBPF host routing to and from the other nodes' pods; absent in the
    /// modes without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_routing: Option<HostRoutingStatus>,
}

/// eBPF host routing: the other nodes' pod CIDRs the programs route to and
/// from without the host stack, and what those paths did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostRoutingStatus {
    /// The other nodes' pod CIDRs in the programs' map, sorted (empty
    /// outside Kubernetes mode, or alone in the cluster).
    pub peer_pod_cidrs: Vec<IpNet>,
    /// The node-wide counters by field name (`sarena_common::peers::NodeCounters`),
    /// summed over CPUs, since the map was created.
    pub counters: BTreeMap<String, u64>,
}

impl HostRoutingStatus {
    /// The counter `name`, zero when absent.
    pub fn get(&self, name: &str) -> u64 {
        self.counters.get(name).copied().unwrap_or(0)
    }
}

/// Whether every endpoint has the daemon's programs on both hooks.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProgramsStatus {
    /// Endpoints whose host veth runs this daemon's programs on both hooks.
    pub attached: u64,
    /// Host ifnames of endpoints missing a program (or running other code),
    /// sorted. Empty when all is well.
    #[serde(default)]
    pub detached: Vec<String>,
}

/// One pool of [`DaemonStatus`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolUsage {
    /// Pool name.
    pub name: String,
    /// Its CIDR.
    pub cidr: IpNet,
    /// Its gateway.
    pub gateway: IpAddr,
    /// Addresses handed out.
    pub used: u64,
    /// Addresses still free.
    pub free: u64,
    /// `used + free`.
    pub capacity: u64,
}

/// The plugin's deletion queue in [`DaemonStatus`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeleteQueueStatus {
    /// The queue directory.
    pub dir: String,
    /// Deletions waiting in it (DELs made while the daemon was unreachable).
    pub pending: u64,
}

/// Kubernetes mode in [`DaemonStatus`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KubernetesStatus {
    /// The Node this daemon serves.
    pub node_name: String,
    /// The Node's `spec.podCIDRs` in use (empty while waiting for them).
    #[serde(default)]
    pub pod_cidrs: Vec<IpNet>,
}

impl DaemonStatus {
    /// The status a registry alone can give: health, the configured
    /// dataplane mode, pools and counts from `ipam`, `endpoints` endpoints.
    /// Layers above fill in what they know (programs, queue, Kubernetes).
    pub fn from_parts(health: Health, mode: &str, ipam: &IpamState, endpoints: u64) -> Self {
        let pools = ipam
            .pools
            .iter()
            .map(|p| PoolUsage {
                name: p.name.clone(),
                cidr: p.cidr,
                gateway: p.gateway,
                used: p.allocated,
                free: p.capacity.saturating_sub(p.allocated),
                capacity: p.capacity,
            })
            .collect();
        let leases = ipam
            .allocations
            .iter()
            .filter(|a| a.lease_expires_at.is_some())
            .count();
        DaemonStatus {
            version: env!("CARGO_PKG_VERSION").to_owned(),
            health,
            dataplane: DataplaneStatus {
                mode: mode.to_owned(),
                programs: None,
                host_routing: None,
            },
            pools,
            endpoints,
            allocations: ipam.allocations.len() as u64,
            leases: leases as u64,
            delete_queue: None,
            kubernetes: None,
            network: None,
        }
    }
}

/// `GET /stats/endpoints[/{container_id}/{ifname}]`: an endpoint and its
/// dataplane counters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndpointStats {
    /// The registered endpoint.
    pub endpoint: Endpoint,
    /// Its counters; absent when the dataplane keeps none (`kernel`, `none`)
    /// or the endpoint is not in the dataplane's counter map.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counters: Option<DataplaneCounters>,
    /// For an endpoint with bandwidth limits, whether the dataplane has them
    /// in place (read from the kernel at request time); absent otherwise,
    /// and in the answers of daemons that predate limits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bandwidth: Option<BandwidthStatus>,
}

impl EndpointStats {
    /// The stats a registry without a dataplane gives: the endpoint, no
    /// counters, no bandwidth state.
    pub fn registry_only(endpoint: Endpoint) -> Self {
        EndpointStats {
            endpoint,
            counters: None,
            bandwidth: None,
        }
    }
}

/// An endpoint's eBPF counters, summed over CPUs, by name.
///
/// `counters` holds every scalar field of
/// [`EndpointCounters`](sarena_common::EndpointCounters) under its
/// field name (`from_pod_packets`, `from_pod_bytes`, `to_pod_packets`,
/// `to_pod_bytes`, `redirected_packets`, `arp_replies`, …; arrays such as
/// the spare slots are left out); `drops` every
/// [`DropReason`](sarena_common::DropReason) under its snake-case
/// name (`malformed_ethernet`, …), zero included. Counters and reasons added
/// to the programs appear here without a change to this type.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DataplaneCounters {
    /// Scalar counters by field name.
    pub counters: BTreeMap<String, u64>,
    /// Drops by reason.
    pub drops: BTreeMap<String, u64>,
}

impl DataplaneCounters {
    /// All drops, whatever the reason.
    pub fn total_drops(&self) -> u64 {
        self.drops.values().sum()
    }

    /// The counter `name`, zero when absent.
    pub fn get(&self, name: &str) -> u64 {
        self.counters.get(name).copied().unwrap_or(0)
    }
}

impl From<&EndpointCounters> for DataplaneCounters {
    fn from(raw: &EndpointCounters) -> Self {
        let mut counters = BTreeMap::new();
        // Serializing a plain struct of integers into a JSON value cannot
        // fail; should it, the counters are simply empty.
        if let Ok(serde_json::Value::Object(fields)) = serde_json::to_value(raw) {
            for (name, value) in fields {
                if let Some(n) = value.as_u64() {
                    counters.insert(name, n);
                }
            }
        }
        let drops = DropReason::iter()
            .map(|reason| {
                let slot = reason as usize;
                let name: &'static str = reason.into();
                (name.to_owned(), raw.drops.get(slot).copied().unwrap_or(0))
            })
            .collect();
        DataplaneCounters { counters, drops }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_by_name_cover_every_field_and_reason() {
        let mut raw = EndpointCounters {
            from_pod_packets: 3,
            to_pod_bytes: 700,
            arp_replies: 1,
            ..Default::default()
        };
        raw.drops[DropReason::MalformedIpv4 as usize] = 2;
        let named = DataplaneCounters::from(&raw);
        assert_eq!(named.get("from_pod_packets"), 3);
        assert_eq!(named.get("to_pod_bytes"), 700);
        assert_eq!(named.get("arp_replies"), 1);
        assert_eq!(named.counters.get("redirected_packets"), Some(&0));
        assert!(
            !named.counters.contains_key("drops"),
            "arrays are not scalars"
        );
        assert!(
            !named.counters.contains_key("spare"),
            "nor are the spare slots"
        );
        assert_eq!(named.drops.len(), DropReason::iter().count());
        assert_eq!(named.drops.get("malformed_ipv4"), Some(&2));
        assert_eq!(named.drops.get("malformed_ethernet"), Some(&0));
        assert_eq!(named.total_drops(), 2);
    }

    #[test]
    fn status_counts_usage_and_leases() {
        let ipam: IpamState = serde_json::from_value(serde_json::json!({
            "pools": [{"name": "p", "cidr": "10.9.0.0/29", "gateway": "10.9.0.1",
                       "allocated": 2, "capacity": 5}],
            "allocations": [
                {"owner": {"container_id": "a", "ifname": "eth0"}, "address": "10.9.0.2",
                 "pool": "p", "allocated_at": 1},
                {"owner": {"container_id": "b", "ifname": "eth0"}, "address": "10.9.0.3",
                 "pool": "p", "allocated_at": 1, "lease_expires_at": 9}
            ]
        }))
        .unwrap();
        let health = Health {
            ready: true,
            message: "ok".into(),
        };
        let status = DaemonStatus::from_parts(health, "none", &ipam, 1);
        assert_eq!(status.pools[0].used, 2);
        assert_eq!(status.pools[0].free, 3);
        assert_eq!(status.allocations, 2);
        assert_eq!(status.leases, 1);
        assert_eq!(status.endpoints, 1);
        let json = serde_json::to_value(&status).unwrap();
        assert!(json.get("kubernetes").is_none(), "{json}");
        assert_eq!(json["dataplane"], serde_json::json!({"mode": "none"}));
    }
}
