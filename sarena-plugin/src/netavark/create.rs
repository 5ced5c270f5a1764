//! `create`: checks a new network's config and completes it from the
//! daemon's pools. Sarena's daemon hands out every address, from its own
//! pools, so a Sarena network's subnets are those pools (the default ones:
//! a container has no Kubernetes namespace), and its IPAM driver is
//! [`IPAM_DRIVER`] so that podman does not hand out addresses too.

use std::collections::BTreeMap;

use crate::api::{Inspect, PoolState};

use super::error::NetavarkError;
use super::settings::{IPAM_DRIVER, NetworkSettings};
use super::types::{Network, Subnet};

/// `create`: `network` checked ([`NetworkSettings::of`]) and completed:
/// without subnets it gets every default pool of `daemon` (with its
/// gateway); subnets asked for must be those pools, all of them (the
/// daemon hands out addresses from any; a gateway asked for must be the
/// pool's); `ipv6_enabled` follows the subnets (asked for
/// without an IPv6 pool, it is an error); the IPAM driver is set to
/// [`IPAM_DRIVER`]. Name, id, driver and every field Sarena does not read
/// are left as they came.
pub async fn create(daemon: &dyn Inspect, mut network: Network) -> Result<Network, NetavarkError> {
    NetworkSettings::of(&network)?;
    let state = daemon
        .ipam_state()
        .await
        .map_err(|source| NetavarkError::Pools {
            network: network.name.clone(),
            source,
        })?;
    let pools: Vec<&PoolState> = state
        .pools
        .iter()
        .filter(|p| p.namespaces.is_empty())
        .collect();
    if pools.is_empty() {
        return Err(NetavarkError::NoDefaultPool {
            network: network.name.clone(),
        });
    }
    let listed = || {
        pools
            .iter()
            .map(|p| p.cidr.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let asked = network.subnets.take().unwrap_or_default();
    let subnets: Vec<Subnet> = if asked.is_empty() {
        pools.iter().map(|p| subnet_of(p)).collect()
    } else {
        let mut subnets = Vec::with_capacity(asked.len());
        for s in asked {
            let pool = pools
                .iter()
                .find(|p| p.cidr.trunc() == s.subnet.trunc())
                .ok_or_else(|| NetavarkError::SubnetNotAPool {
                    network: network.name.clone(),
                    subnet: s.subnet,
                    pools: listed(),
                })?;
            if let Some(asked) = s.gateway.filter(|g| *g != pool.gateway) {
                return Err(NetavarkError::GatewayMismatch {
                    network: network.name.clone(),
                    subnet: s.subnet,
                    asked,
                    pool_gateway: pool.gateway,
                });
            }
            let subnet = subnet_of(pool);
            if !subnets.contains(&subnet) {
                subnets.push(subnet);
            }
        }
        if subnets.len() < pools.len() {
            return Err(NetavarkError::SubnetsNotAllPools {
                network: network.name.clone(),
                asked: subnets
                    .iter()
                    .map(|s| s.subnet.to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
                pools: listed(),
            });
        }
        subnets
    };
    let has_ipv6 = subnets.iter().any(|s| s.subnet.addr().is_ipv6());
    if network.ipv6_enabled && !has_ipv6 {
        return Err(NetavarkError::NoIpv6Pool {
            network: network.name.clone(),
            pools: listed(),
        });
    }
    network.ipv6_enabled = has_ipv6;
    network.subnets = Some(subnets);
    network.ipam_options = Some(BTreeMap::from([(
        "driver".to_string(),
        IPAM_DRIVER.to_string(),
    )]));
    Ok(network)
}

fn subnet_of(pool: &PoolState) -> Subnet {
    Subnet {
        subnet: pool.cidr,
        gateway: Some(pool.gateway),
        lease_range: None,
    }
}
