//! What a pod is told about its addresses: the gateway of each and the
//! routes through them. One definition for the daemon's answer to
//! `POST /ipam/allocate` and for anyone who sets a pod up by hand (tests).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;

use crate::api::{AllocatedAddress, RouteSpec};
use crate::dataplane::POD_IPV6_GATEWAY;

/// The next hop a pod uses for `address`, whose pool's gateway is
/// `pool_gateway`: that gateway for IPv4; for IPv6 the link-local
/// [`POD_IPV6_GATEWAY`], which the host end of every pod's veth answers for.
pub fn pod_gateway(address: &IpNet, pool_gateway: IpAddr) -> IpAddr {
    match address {
        IpNet::V4(_) => pool_gateway,
        IpNet::V6(_) => IpAddr::V6(POD_IPV6_GATEWAY),
    }
}

/// The routes for a pod whose addresses (and their gateways, as
/// [`pod_gateway`] gives them) are `addresses`: per address a host route to
/// its gateway, then the default route of its family via it.
///
/// ```
/// use sarena_core::api::AllocatedAddress;
/// use sarena_core::node::pod_routes;
/// let v6 = AllocatedAddress {
///     address: "fd00:1::2/64".parse()?,
///     gateway: "fe80::1".parse()?,
///     pool: "p".into(),
/// };
/// let routes = pod_routes(&[v6]);
/// assert_eq!(routes[0].dst.to_string(), "fe80::1/128");
/// assert_eq!(routes[1].dst.to_string(), "::/0");
/// assert_eq!(routes[1].gw, Some("fe80::1".parse()?));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn pod_routes(addresses: &[AllocatedAddress]) -> Vec<RouteSpec> {
    let mut out = Vec::with_capacity(addresses.len() * 2);
    for a in addresses {
        let any = match a.gateway {
            IpAddr::V4(_) => IpNet::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0),
            IpAddr::V6(_) => IpNet::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), 0),
        };
        let Ok(any) = any else { continue };
        out.push(RouteSpec {
            dst: IpNet::from(a.gateway),
            gw: None,
            mtu: None,
        });
        out.push(RouteSpec {
            dst: any,
            gw: Some(a.gateway),
            mtu: None,
        });
    }
    out
}

/// `addresses` as the pod sees them: each with the gateway it routes through.
pub(super) fn as_pod_sees(addresses: &[AllocatedAddress]) -> Vec<AllocatedAddress> {
    addresses
        .iter()
        .map(|a| AllocatedAddress {
            gateway: pod_gateway(&a.address, a.gateway),
            ..a.clone()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allocated(address: &str, gateway: &str) -> AllocatedAddress {
        AllocatedAddress {
            address: address.parse().unwrap(),
            gateway: gateway.parse().unwrap(),
            pool: "p".into(),
        }
    }

    #[test]
    fn a_dual_stack_pod_routes_ipv4_via_the_pool_gateway_and_ipv6_via_the_link_local_one() {
        let seen = as_pod_sees(&[
            allocated("10.1.0.2/24", "10.1.0.1"),
            allocated("fd00:1::2/64", "fd00:1::1"),
        ]);
        assert_eq!(seen[0].gateway.to_string(), "10.1.0.1");
        assert_eq!(seen[1].gateway.to_string(), "fe80::1");
        assert_eq!(seen[1].address.to_string(), "fd00:1::2/64");
        let routes: Vec<String> = pod_routes(&seen)
            .iter()
            .map(|r| format!("{} via {:?}", r.dst, r.gw.map(|g| g.to_string())))
            .collect();
        assert_eq!(
            routes,
            [
                "10.1.0.1/32 via None",
                "0.0.0.0/0 via Some(\"10.1.0.1\")",
                "fe80::1/128 via None",
                "::/0 via Some(\"fe80::1\")",
            ]
        );
    }

    #[test]
    fn an_ipv6_only_pod_has_only_ipv6_routes() {
        let routes = pod_routes(&as_pod_sees(&[allocated("fd00:2::5/120", "fd00:2::1")]));
        assert_eq!(routes.len(), 2);
        assert!(routes.iter().all(|r| r.dst.addr().is_ipv6()));
    }
}
