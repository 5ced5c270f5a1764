//! The node configuration of a Kubernetes-mode session: the configured one
//! with the default pool's CIDRs replaced by the Node's podCIDRs and the MTU
//! the routing mode leaves the pods.

use std::net::IpAddr;

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

use super::types::{ClusterNode, RoutingMode};
use crate::node::{ConfigError, NodeConfig};

/// VXLAN's overhead over an IPv4 underlay: outer IPv4 (20) + UDP (8) +
/// VXLAN (8) + inner Ethernet (14).
pub const VXLAN_OVERHEAD_V4: u32 = 50;

/// VXLAN's overhead over an IPv6 underlay (the outer header is 40 bytes).
pub const VXLAN_OVERHEAD_V6: u32 = 70;

/// What a Kubernetes-mode session of the node state runs with; persisted,
/// so a restarted daemon reopens the same session before it hears from the
/// API server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionParams {
    /// The Node's `spec.podCIDRs`, sorted (IPv4 first).
    pub pod_cidrs: Vec<IpNet>,
    /// The pods' MTU.
    pub mtu: u32,
}

impl SessionParams {
    /// The session for `local`'s podCIDRs under `routing`, with `mtu` the
    /// configured (underlay) MTU.
    pub fn for_node(local: &ClusterNode, routing: RoutingMode, mtu: u32) -> SessionParams {
        SessionParams {
            pod_cidrs: sorted(&local.pod_cidrs),
            mtu: pod_mtu(mtu, routing, local.underlay_ip()),
        }
    }
}

/// `cidrs` in canonical order (IPv4 first, then by address), deduplicated.
pub fn sorted(cidrs: &[IpNet]) -> Vec<IpNet> {
    let mut out: Vec<IpNet> = cidrs.iter().map(IpNet::trunc).collect();
    out.sort_by_key(|c| (c.addr().is_ipv6(), *c));
    out.dedup();
    out
}

/// The pods' MTU: `mtu` (the configured or the uplink's) in native
/// routing; less the VXLAN overhead of the underlay's family in `vxlan`
/// routing ([`overhead`]).
pub fn pod_mtu(mtu: u32, routing: RoutingMode, underlay: Option<IpAddr>) -> u32 {
    mtu.saturating_sub(overhead(routing, underlay))
}

/// What `routing`'s encapsulation takes of the MTU: nothing in native
/// routing; VXLAN's headers over the underlay's family in `vxlan` routing.
pub fn overhead(routing: RoutingMode, underlay: Option<IpAddr>) -> u32 {
    match routing {
        RoutingMode::Native => 0,
        RoutingMode::Vxlan => match underlay {
            Some(IpAddr::V6(_)) => VXLAN_OVERHEAD_V6,
            _ => VXLAN_OVERHEAD_V4,
        },
    }
}

/// `base` for a session: the default pool (the one without namespaces) gets
/// the session's podCIDRs as its CIDRs; of its configured gateways only
/// those inside a podCIDR are kept (the others fall back to the first usable
/// address of the podCIDR of their family); `reserved` and the per-namespace
/// pools apply as written; the MTU is the session's. The result is validated.
pub fn session_config(
    base: &NodeConfig,
    session: &SessionParams,
) -> Result<NodeConfig, ConfigError> {
    let mut config = base.clone();
    config.mtu = Some(session.mtu);
    let pools = &mut config.ipam.pools;
    let Some(default) = pools.iter_mut().find(|p| p.namespaces.is_empty()) else {
        return Err(ConfigError::invalid(
            "ipam.pools",
            "(no default pool)",
            "Kubernetes mode puts the podCIDRs into the default pool (the one without namespaces)",
        ));
    };
    default.cidrs = session.pod_cidrs.clone();
    default
        .gateways
        .retain(|gw| session.pod_cidrs.iter().any(|c| c.contains(gw)));
    config.validate()?;
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(s: &str) -> IpNet {
        s.parse().unwrap()
    }

    fn session(cidrs: &[&str]) -> SessionParams {
        SessionParams {
            pod_cidrs: cidrs.iter().map(|c| net(c)).collect(),
            mtu: 1450,
        }
    }

    #[test]
    fn the_default_pool_takes_the_pod_cidrs_and_drops_gateways_outside_them() {
        let base = NodeConfig::default();
        let cfg =
            session_config(&base, &session(&["10.244.1.0/24", "fd00:10:244:1::/64"])).unwrap();
        assert_eq!(cfg.mtu, Some(1450));
        let pool = &cfg.ipam.pools[0];
        assert_eq!(
            pool.cidrs,
            vec![net("10.244.1.0/24"), net("fd00:10:244:1::/64")]
        );
        assert!(pool.gateways.is_empty(), "10.200.0.1 is not in the podCIDR");
        let network = cfg.node_network().unwrap();
        assert_eq!(
            network.gateways,
            vec![
                "10.244.1.1".parse::<IpAddr>().unwrap(),
                "fd00:10:244:1::1".parse().unwrap()
            ]
        );
    }

    #[test]
    fn configured_gateways_inside_and_namespace_pools_stay() {
        let base = NodeConfig::from_toml_str(
            "[[ipam.pools]]\nname = \"d\"\ncidrs = [\"10.244.1.0/24\"]\ngateways = [\"10.244.1.254\"]\nreserved = [\"10.244.1.200-10.244.1.210\"]\n\
             [[ipam.pools]]\nname = \"team\"\ncidrs = [\"10.99.0.0/24\"]\nnamespaces = [\"team\"]\n",
        )
        .unwrap();
        let cfg = session_config(&base, &session(&["10.244.1.0/24"])).unwrap();
        assert_eq!(
            cfg.ipam.pools[0].gateways,
            vec!["10.244.1.254".parse::<IpAddr>().unwrap()]
        );
        assert_eq!(cfg.ipam.pools[1], base.ipam.pools[1]);
        let mut plain = base.clone();
        plain.ipam.pools[0].reserved.clear();
        let err = session_config(&plain, &session(&["10.99.0.0/16"])).unwrap_err();
        assert!(err.to_string().contains("overlap"), "{err}");
    }

    #[test]
    fn a_reserved_range_outside_the_pod_cidr_is_an_error_naming_it() {
        let base = NodeConfig::from_toml_str(
            "[[ipam.pools]]\nname = \"d\"\ncidrs = [\"10.0.0.0/8\"]\nreserved = [\"10.9.0.0/28\"]\n",
        )
        .unwrap();
        let err = session_config(&base, &session(&["10.244.1.0/24"])).unwrap_err();
        assert!(err.to_string().contains("reserved"), "{err}");
    }

    #[test]
    fn vxlan_lowers_the_mtu_by_the_underlay_overhead() {
        assert_eq!(pod_mtu(1500, RoutingMode::Native, None), 1500);
        assert_eq!(
            pod_mtu(
                1500,
                RoutingMode::Vxlan,
                Some("172.30.0.11".parse().unwrap())
            ),
            1450
        );
        assert_eq!(
            pod_mtu(9000, RoutingMode::Vxlan, Some("fd00::11".parse().unwrap())),
            8930
        );
        assert_eq!(pod_mtu(1500, RoutingMode::Vxlan, None), 1450);
        let node = ClusterNode {
            name: "n".into(),
            uid: "u".into(),
            internal_ips: vec!["172.30.0.11".parse().unwrap()],
            pod_cidrs: vec![
                net("fd00:1::/64"),
                net("10.244.1.0/24"),
                net("10.244.1.0/24"),
            ],
        };
        let params = SessionParams::for_node(&node, RoutingMode::Vxlan, 1500);
        assert_eq!(
            params.pod_cidrs,
            vec![net("10.244.1.0/24"), net("fd00:1::/64")]
        );
        assert_eq!(params.mtu, 1450);
    }
}
