//! Per-pod host routes, tagged with Sarena's own route protocol so that
//! reconciliation can tell ours from everyone else's.

use std::net::IpAddr;

use ipnet::IpNet;
use rtnetlink::Handle;
use rtnetlink::RouteMessageBuilder;
use rtnetlink::packet_route::route::{RouteAttribute, RouteMessage, RouteProtocol, RouteScope};

use crate::dataplane::DataplaneError;
use crate::netlink::{NetlinkError, all_routes, errno, route_ip};

/// The `proto` of Sarena's host routes (`ip route show proto 90`).
pub const SARENA_ROUTE_PROTOCOL: u8 = 90;

/// A host route of ours: pod address → host-side veth.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PodRoute {
    /// The pod address as a host prefix (/32 or /128).
    pub dst: IpNet,
    /// The host veth's ifindex.
    pub oif: u32,
}

fn message(route: &PodRoute) -> Result<RouteMessage, DataplaneError> {
    let builder = RouteMessageBuilder::<IpAddr>::new()
        .destination_prefix(route.dst.addr(), route.dst.prefix_len())
        .map_err(|source| DataplaneError::InvalidRoute {
            dst: route.dst,
            source: Box::new(source),
        })?;
    Ok(builder
        .output_interface(route.oif)
        .scope(RouteScope::Link)
        .protocol(RouteProtocol::Other(SARENA_ROUTE_PROTOCOL))
        .build())
}

/// `ip route replace DST dev OIF scope link proto 90`.
pub(crate) async fn add(handle: &Handle, route: &PodRoute) -> Result<(), DataplaneError> {
    handle
        .route()
        .add(message(route)?)
        .replace()
        .execute()
        .await
        .map_err(|e| NetlinkError::new("route replace", route.dst, e).into())
}

/// `ip route del DST dev OIF proto 90`; a missing route is fine.
pub(crate) async fn remove(handle: &Handle, route: &PodRoute) -> Result<(), DataplaneError> {
    match handle.route().del(message(route)?).execute().await {
        Ok(()) => Ok(()),
        Err(e)
            if matches!(
                errno(&e),
                Some(libc::ESRCH) | Some(libc::ENODEV) | Some(libc::ENOENT)
            ) =>
        {
            Ok(())
        }
        Err(e) => Err(NetlinkError::new("route del", route.dst, e).into()),
    }
}

/// Every route of ours in the main table (both families).
pub(crate) async fn list(handle: &Handle) -> Result<Vec<PodRoute>, DataplaneError> {
    let routes = all_routes(handle, "main").await?;
    Ok(routes.iter().filter_map(ours).collect())
}

fn ours(route: &RouteMessage) -> Option<PodRoute> {
    if route.header.protocol != RouteProtocol::Other(SARENA_ROUTE_PROTOCOL) {
        return None;
    }
    let mut dst = None;
    let mut oif = None;
    for attribute in &route.attributes {
        match attribute {
            RouteAttribute::Destination(address) => dst = route_ip(address),
            RouteAttribute::Oif(index) => oif = Some(*index),
            _ => {}
        }
    }
    Some(PodRoute {
        dst: IpNet::new(dst?, route.header.destination_prefix_length).ok()?,
        oif: oif?,
    })
}
