//! The pod side: addresses, routes and link state inside the pod netns.

use std::net::IpAddr;

use futures_util::TryStreamExt;
use ipnet::IpNet;
use rtnetlink::packet_route::address::AddressAttribute;
use rtnetlink::packet_route::route::{RouteAttribute, RouteMessage, RouteMetric, RouteScope};
use rtnetlink::{Handle, LinkUnspec, RouteMessageBuilder};

use super::ipv6;
use crate::api::RouteSpec;
use crate::links::{LinkError, PodIfaceConfig, PodIfaceState};
use crate::netlink::{NetlinkError, all_routes, link_by_name, link_is_up, link_mac, route_ip};

/// `ip addr add` each address, `ip link set IFNAME up`, then `ip route replace` each route.
/// With an IPv6 address, the link-local address and the flags of `ipv6` first.
pub(crate) async fn configure(
    handle: &Handle,
    ifname: &str,
    config: &PodIfaceConfig,
) -> Result<(), LinkError> {
    let Some(link) = link_by_name(handle, ifname).await? else {
        return Err(LinkError::NoPodLink {
            ifname: ifname.to_string(),
        });
    };
    let index = link.header.index;
    if config.addresses.iter().any(|a| matches!(a, IpNet::V6(_))) {
        let mac = link_mac(&link).unwrap_or_default();
        ipv6::prepare(handle, index, ifname, mac).await?;
    }
    let addresses = crate::phases::start(|| "netlink pod addresses");
    for address in &config.addresses {
        let flags = ipv6::address_flags(address);
        ipv6::add_address(handle, index, ifname, address, flags).await?;
    }
    drop(addresses);
    let _phase = crate::phases::start(|| "netlink pod link up, routes");
    handle
        .link()
        .set(LinkUnspec::new_with_index(index).up().build())
        .execute()
        .await
        .map_err(|e| NetlinkError::new("link set up", ifname, e))?;
    for route in &config.routes {
        let message = route_message(index, route).map_err(|source| LinkError::InvalidRoute {
            ifname: ifname.to_string(),
            dst: route.dst,
            source,
        })?;
        handle
            .route()
            .add(message)
            .replace()
            .execute()
            .await
            .map_err(|e| NetlinkError::new("route add", ifname, e))?;
    }
    Ok(())
}

type BoxedError = Box<dyn std::error::Error + Send + Sync>;

/// Builds the netlink message for one route out of `index`.
/// (rtnetlink does not export its error type; it is passed on boxed.)
fn route_message(index: u32, route: &RouteSpec) -> Result<RouteMessage, BoxedError> {
    let mut builder = RouteMessageBuilder::<IpAddr>::new()
        .destination_prefix(route.dst.addr(), route.dst.prefix_len())?
        .output_interface(index);
    builder = match route.gw {
        Some(gw) => builder.gateway(gw)?,
        None => builder.scope(RouteScope::Link),
    };
    let mut message = builder.build();
    if let Some(mtu) = route.mtu {
        message
            .attributes
            .push(RouteAttribute::Metrics(vec![RouteMetric::Mtu(mtu)]));
    }
    Ok(message)
}

/// Reads the pod interface: MAC, up, global addresses, routes out of it (main table).
pub(crate) async fn inspect(
    handle: &Handle,
    ifname: &str,
) -> Result<Option<PodIfaceState>, LinkError> {
    let Some(link) = link_by_name(handle, ifname).await? else {
        return Ok(None);
    };
    let index = link.header.index;
    let addresses = handle
        .address()
        .get()
        .set_link_index_filter(index)
        .execute()
        .try_collect::<Vec<_>>()
        .await
        .map_err(|e| NetlinkError::new("addr dump", ifname, e))?
        .into_iter()
        .filter(|a| a.header.index == index)
        .filter_map(|a| {
            let prefix = a.header.prefix_len;
            a.attributes.iter().find_map(|attr| match attr {
                AddressAttribute::Address(ip) => IpNet::new(*ip, prefix).ok(),
                _ => None,
            })
        })
        .filter(|net| !is_link_local(net.addr()))
        .collect();
    let routes = all_routes(handle, ifname)
        .await?
        .iter()
        .filter_map(|r| route_spec(r, index))
        .collect();
    Ok(Some(PodIfaceState {
        mac: link_mac(&link).unwrap_or_default(),
        addresses,
        routes,
        up: link_is_up(&link),
    }))
}

/// A [`RouteSpec`] for a main-table route out of `index`; `None` for others.
fn route_spec(route: &RouteMessage, index: u32) -> Option<RouteSpec> {
    const MAIN_TABLE: u32 = 254;
    let mut oif = None;
    let mut table = u32::from(route.header.table);
    let mut dst = None;
    let mut gw = None;
    let mut mtu = None;
    for attribute in &route.attributes {
        match attribute {
            RouteAttribute::Oif(i) => oif = Some(*i),
            RouteAttribute::Table(t) => table = *t,
            RouteAttribute::Destination(a) => dst = route_ip(a),
            RouteAttribute::Gateway(a) => gw = route_ip(a),
            RouteAttribute::Metrics(metrics) => {
                mtu = metrics.iter().find_map(|m| match m {
                    RouteMetric::Mtu(v) => Some(*v),
                    _ => None,
                })
            }
            _ => {}
        }
    }
    if oif != Some(index) || table != MAIN_TABLE {
        return None;
    }
    let prefix = route.header.destination_prefix_length;
    let dst = match dst {
        Some(ip) => IpNet::new(ip, prefix).ok()?,
        None if route.header.address_family == rtnetlink::packet_route::AddressFamily::Inet6 => {
            IpNet::new(IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED), 0).ok()?
        }
        None => IpNet::new(IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED), 0).ok()?,
    };
    Some(RouteSpec { dst, gw, mtu })
}

fn is_link_local(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_link_local(),
        IpAddr::V6(v6) => (v6.segments()[0] & 0xffc0) == 0xfe80,
    }
}
