//! The VXLAN device's FDB entries (family `AF_BRIDGE`, flag `self`) and
//! permanent neighbour entries.

use std::net::IpAddr;

use futures_util::TryStreamExt;
use rtnetlink::Handle;
use rtnetlink::packet_route::AddressFamily;
use rtnetlink::packet_route::neighbour::{
    NeighbourAddress, NeighbourAttribute, NeighbourFlags, NeighbourMessage, NeighbourState,
};

use crate::cluster::error::ClusterError;
use crate::cluster::vxlan::{FdbEntry, NeighbourEntry};
use crate::mac::MacAddr;
use crate::netlink::{NetlinkError, errno};

fn address(ip: IpAddr) -> NeighbourAddress {
    match ip {
        IpAddr::V4(v4) => NeighbourAddress::Inet(v4),
        IpAddr::V6(v6) => NeighbourAddress::Inet6(v6),
    }
}

/// An address attribute as an IP: the kernel's FDB dump (family
/// `AF_BRIDGE`) carries the remote as raw bytes.
fn ip_of(address: &NeighbourAddress) -> Option<IpAddr> {
    match address {
        NeighbourAddress::Inet(v4) => Some(IpAddr::V4(*v4)),
        NeighbourAddress::Inet6(v6) => Some(IpAddr::V6(*v6)),
        NeighbourAddress::Other(bytes) => match bytes.len() {
            4 => <[u8; 4]>::try_from(bytes.as_slice()).ok().map(IpAddr::from),
            16 => <[u8; 16]>::try_from(bytes.as_slice())
                .ok()
                .map(IpAddr::from),
            _ => None,
        },
        _ => None,
    }
}

fn parse(message: &NeighbourMessage) -> Option<(IpAddr, MacAddr)> {
    let mut ip = None;
    let mut mac = None;
    for attribute in &message.attributes {
        match attribute {
            NeighbourAttribute::Destination(address) => ip = ip_of(address),
            NeighbourAttribute::LinkLayerAddress(lla) => mac = MacAddr::from_slice(lla),
            _ => {}
        }
    }
    Some((ip?, mac?))
}

async fn dump(
    handle: &Handle,
    family: AddressFamily,
    ifindex: u32,
    what: &'static str,
) -> Result<Vec<NeighbourMessage>, ClusterError> {
    let all: Vec<NeighbourMessage> = handle
        .neighbours()
        .get()
        .set_address_family(family)
        .execute()
        .try_collect()
        .await
        .map_err(|e| NetlinkError::new(what, ifindex, e))?;
    Ok(all
        .into_iter()
        .filter(|m| m.header.ifindex == ifindex)
        .collect())
}

fn ignore_missing(
    result: Result<(), rtnetlink::Error>,
    call: &'static str,
    object: String,
) -> Result<(), ClusterError> {
    match result {
        Ok(()) => Ok(()),
        Err(e) if matches!(errno(&e), Some(libc::ENOENT) | Some(libc::ESRCH)) => Ok(()),
        Err(e) => Err(NetlinkError::new(call, object, e).into()),
    }
}

/// The device's FDB entries that have a remote.
pub(super) async fn fdb(handle: &Handle, ifindex: u32) -> Result<Vec<FdbEntry>, ClusterError> {
    let messages = dump(handle, AddressFamily::Bridge, ifindex, "fdb dump").await?;
    Ok(messages
        .iter()
        .filter_map(parse)
        .map(|(dst, mac)| FdbEntry { mac, dst })
        .collect())
}

/// `bridge fdb replace MAC dev IFINDEX dst DST self permanent`.
pub(super) async fn replace_fdb(
    handle: &Handle,
    ifindex: u32,
    entry: &FdbEntry,
) -> Result<(), ClusterError> {
    handle
        .neighbours()
        .add_bridge(ifindex, &entry.mac.octets())
        .destination(entry.dst)
        .flags(NeighbourFlags::Own)
        .state(NeighbourState::Permanent)
        .replace()
        .execute()
        .await
        .map_err(|e| {
            NetlinkError::new("fdb replace", format!("{} dst {}", entry.mac, entry.dst), e).into()
        })
}

/// `bridge fdb del MAC dev IFINDEX dst DST self`.
pub(super) async fn delete_fdb(
    handle: &Handle,
    ifindex: u32,
    entry: &FdbEntry,
) -> Result<(), ClusterError> {
    let mut message = NeighbourMessage::default();
    message.header.family = AddressFamily::Bridge;
    message.header.ifindex = ifindex;
    message.header.flags = NeighbourFlags::Own;
    message.attributes = vec![
        NeighbourAttribute::LinkLayerAddress(entry.mac.octets().to_vec()),
        NeighbourAttribute::Destination(address(entry.dst)),
    ];
    let result = handle.neighbours().del(message).execute().await;
    ignore_missing(
        result,
        "fdb del",
        format!("{} dst {}", entry.mac, entry.dst),
    )
}

/// The device's permanent neighbour entries (both families).
pub(super) async fn neighbours(
    handle: &Handle,
    ifindex: u32,
) -> Result<Vec<NeighbourEntry>, ClusterError> {
    let mut out = Vec::new();
    for family in [AddressFamily::Inet, AddressFamily::Inet6] {
        let messages = dump(handle, family, ifindex, "neigh dump").await?;
        out.extend(
            messages
                .iter()
                .filter(|m| m.header.state == NeighbourState::Permanent)
                .filter_map(parse)
                .map(|(ip, mac)| NeighbourEntry { ip, mac }),
        );
    }
    Ok(out)
}

/// `ip neigh replace IP lladdr MAC dev IFINDEX nud permanent`.
pub(super) async fn replace_neighbour(
    handle: &Handle,
    ifindex: u32,
    entry: &NeighbourEntry,
) -> Result<(), ClusterError> {
    handle
        .neighbours()
        .add(ifindex, entry.ip)
        .link_layer_address(&entry.mac.octets())
        .state(NeighbourState::Permanent)
        .replace()
        .execute()
        .await
        .map_err(|e| NetlinkError::new("neigh replace", entry.ip, e).into())
}

/// `ip neigh del IP dev IFINDEX`.
pub(super) async fn delete_neighbour(
    handle: &Handle,
    ifindex: u32,
    entry: &NeighbourEntry,
) -> Result<(), ClusterError> {
    let mut message = NeighbourMessage::default();
    message.header.family = match entry.ip {
        IpAddr::V4(_) => AddressFamily::Inet,
        IpAddr::V6(_) => AddressFamily::Inet6,
    };
    message.header.ifindex = ifindex;
    message.attributes = vec![NeighbourAttribute::Destination(address(entry.ip))];
    let result = handle.neighbours().del(message).execute().await;
    ignore_missing(result, "neigh del", entry.ip.to_string())
}
