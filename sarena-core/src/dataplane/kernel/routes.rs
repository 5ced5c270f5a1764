//! Per-pod host routes, tagged with Sarena's own route protocol so that
//! reconciliation can tell ours from everyone else's.

use std::net::IpAddr;

use futures_util::TryStreamExt;
use ipnet::IpNet;
use rtnetlink::Handle;
use rtnetlink::RouteMessageBuilder;
use rtnetlink::packet_route::route::{
    RouteAddress, RouteAttribute, RouteMessage, RouteProtocol, RouteScope,
};

use crate::dataplane::DataplaneError;

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

fn netlink_error(
    call: &'static str,
    object: impl ToString,
    error: rtnetlink::Error,
) -> DataplaneError {
    let message = match &error {
        rtnetlink::Error::NetlinkError(m) => m.to_io().to_string(),
        other => other.to_string(),
    };
    DataplaneError::Netlink {
        call,
        object: object.to_string(),
        message,
    }
}

fn errno(error: &rtnetlink::Error) -> Option<i32> {
    match error {
        rtnetlink::Error::NetlinkError(m) => Some(m.raw_code().abs()),
        _ => None,
    }
}

fn message(route: &PodRoute) -> Result<RouteMessage, DataplaneError> {
    let builder = RouteMessageBuilder::<IpAddr>::new()
        .destination_prefix(route.dst.addr(), route.dst.prefix_len())
        .map_err(|e| DataplaneError::Netlink {
            call: "route build",
            object: route.dst.to_string(),
            message: e.to_string(),
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
        .map_err(|e| netlink_error("route replace", route.dst, e))
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
        Err(e) => Err(netlink_error("route del", route.dst, e)),
    }
}

/// Every route of ours in the main table (both families).
pub(crate) async fn list(handle: &Handle) -> Result<Vec<PodRoute>, DataplaneError> {
    let mut found = Vec::new();
    let dumps = [
        RouteMessageBuilder::<std::net::Ipv4Addr>::new().build(),
        RouteMessageBuilder::<std::net::Ipv6Addr>::new().build(),
    ];
    for dump in dumps {
        let routes: Vec<RouteMessage> = handle
            .route()
            .get(dump)
            .execute()
            .try_collect()
            .await
            .map_err(|e| netlink_error("route dump", "main", e))?;
        found.extend(routes.iter().filter_map(ours));
    }
    Ok(found)
}

fn ours(route: &RouteMessage) -> Option<PodRoute> {
    if route.header.protocol != RouteProtocol::Other(SARENA_ROUTE_PROTOCOL) {
        return None;
    }
    let mut dst = None;
    let mut oif = None;
    for attribute in &route.attributes {
        match attribute {
            RouteAttribute::Destination(RouteAddress::Inet(v4)) => dst = Some(IpAddr::V4(*v4)),
            RouteAttribute::Destination(RouteAddress::Inet6(v6)) => dst = Some(IpAddr::V6(*v6)),
            RouteAttribute::Oif(index) => oif = Some(*index),
            _ => {}
        }
    }
    Some(PodRoute {
        dst: IpNet::new(dst?, route.header.destination_prefix_length).ok()?,
        oif: oif?,
    })
}
