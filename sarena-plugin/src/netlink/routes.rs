//! Route dumps and route attributes, in whichever netns the handle is.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use futures_util::TryStreamExt;
use rtnetlink::packet_route::route::{RouteAddress, RouteMessage};
use rtnetlink::{Handle, RouteMessageBuilder};

use super::error::NetlinkError;

/// `ip route show` and `ip -6 route show`, every table: all routes of both
/// families. `object` names what the dump is for in an error.
pub async fn all_routes(handle: &Handle, object: &str) -> Result<Vec<RouteMessage>, NetlinkError> {
    let mut routes = Vec::new();
    let families = [
        RouteMessageBuilder::<Ipv4Addr>::new().build(),
        RouteMessageBuilder::<Ipv6Addr>::new().build(),
    ];
    for family in families {
        let found: Vec<RouteMessage> = handle
            .route()
            .get(family)
            .execute()
            .try_collect()
            .await
            .map_err(|e| NetlinkError::new("route dump", object, e))?;
        routes.extend(found);
    }
    Ok(routes)
}

/// The IP address of a route attribute (destination, gateway).
pub fn route_ip(address: &RouteAddress) -> Option<IpAddr> {
    match address {
        RouteAddress::Inet(v4) => Some(IpAddr::V4(*v4)),
        RouteAddress::Inet6(v6) => Some(IpAddr::V6(*v6)),
        _ => None,
    }
}
