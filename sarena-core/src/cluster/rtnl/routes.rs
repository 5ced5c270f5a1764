//! Peer routes in the main table, tagged [`SARENA_PEER_ROUTE_PROTOCOL`].

use std::net::IpAddr;

use async_trait::async_trait;
use ipnet::IpNet;
use rtnetlink::RouteMessageBuilder;
use rtnetlink::packet_route::route::{
    RouteAttribute, RouteFlags, RouteHeader, RouteMessage, RouteProtocol, RouteVia,
};

use super::RtnetlinkPeers;
use crate::cluster::error::ClusterError;
use crate::cluster::routes::{PeerRoute, SARENA_PEER_ROUTE_PROTOCOL};
use crate::cluster::traits::RouteTable;
use crate::netlink::{NetlinkError, all_routes, errno, route_ip};

fn message(route: &PeerRoute) -> Result<RouteMessage, ClusterError> {
    let invalid = |source: Box<dyn std::error::Error + Send + Sync>| ClusterError::InvalidRoute {
        route: route.to_string(),
        source,
    };
    let mut builder = RouteMessageBuilder::<IpAddr>::new()
        .destination_prefix(route.dst.addr(), route.dst.prefix_len())
        .map_err(|e| invalid(Box::new(e)))?
        .gateway(route.via)
        .map_err(|e| invalid(Box::new(e)))?
        .protocol(RouteProtocol::Other(SARENA_PEER_ROUTE_PROTOCOL));
    if let Some(dev) = route.dev {
        builder = builder.output_interface(dev);
    }
    if route.onlink {
        builder = builder.onlink();
    }
    Ok(builder.build())
}

/// A main-table route of ours as a [`PeerRoute`]; `None` for anyone else's.
fn ours(route: &RouteMessage) -> Option<PeerRoute> {
    if route.header.protocol != RouteProtocol::Other(SARENA_PEER_ROUTE_PROTOCOL) {
        return None;
    }
    let mut table = u32::from(route.header.table);
    let mut dst = None;
    let mut via = None;
    let mut dev = None;
    for attribute in &route.attributes {
        match attribute {
            RouteAttribute::Table(t) => table = *t,
            RouteAttribute::Destination(address) => dst = route_ip(address),
            RouteAttribute::Gateway(address) => via = route_ip(address),
            RouteAttribute::Via(RouteVia::Inet6(v6)) => via = Some(IpAddr::V6(*v6)),
            RouteAttribute::Oif(index) => dev = Some(*index),
            _ => {}
        }
    }
    if table != u32::from(RouteHeader::RT_TABLE_MAIN) {
        return None;
    }
    Some(PeerRoute {
        dst: IpNet::new(dst?, route.header.destination_prefix_length).ok()?,
        via: via?,
        dev,
        onlink: route.header.flags.contains(RouteFlags::Onlink),
    })
}

#[async_trait]
impl RouteTable for RtnetlinkPeers {
    async fn peer_routes(&self) -> Result<Vec<PeerRoute>, ClusterError> {
        let routes = all_routes(&self.handle, "peer routes").await?;
        Ok(routes.iter().filter_map(ours).collect())
    }

    async fn replace_route(&self, route: &PeerRoute) -> Result<(), ClusterError> {
        self.handle
            .route()
            .add(message(route)?)
            .replace()
            .execute()
            .await
            .map_err(|e| NetlinkError::new("route replace", route, e).into())
    }

    async fn delete_route(&self, route: &PeerRoute) -> Result<(), ClusterError> {
        match self.handle.route().del(message(route)?).execute().await {
            Ok(()) => Ok(()),
            Err(e) if matches!(errno(&e), Some(libc::ESRCH) | Some(libc::ENOENT)) => Ok(()),
            Err(e) => Err(NetlinkError::new("route del", route, e).into()),
        }
    }
}
