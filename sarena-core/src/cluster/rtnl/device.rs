//! The VXLAN device and the underlay it sends through.

use std::net::IpAddr;

use futures_util::TryStreamExt;
use ipnet::IpNet;
use rtnetlink::packet_route::address::{AddressAttribute, AddressFlags};
use rtnetlink::packet_route::link::{
    InfoData, InfoKind, InfoVxlan, LinkAttribute, LinkInfo, LinkMessage,
};
use rtnetlink::{Handle, LinkUnspec, LinkVxlan};

use crate::cluster::error::ClusterError;
use crate::cluster::traits::Underlay;
use crate::cluster::vxlan::VxlanDevice;
use crate::links::LINK_GROUP;
use crate::netlink::{self, MarkedDeletion, NetlinkError, errno, link_by_name};

use crate::uplink::{mtu_of, underlay_of};

/// The device `name`, else the one holding `local`.
pub(super) async fn underlay(
    handle: &Handle,
    local: IpAddr,
    name: Option<String>,
) -> Result<Underlay, ClusterError> {
    if let Some(name) = name {
        let link = link_by_name(handle, &name)
            .await?
            .ok_or(ClusterError::NoDevice {
                name,
                reason: "it is the configured VXLAN underlay",
            })?;
        return Ok(underlay_of(&link));
    }
    let index = address_dump(handle, local)
        .await?
        .into_iter()
        .find(|(_, ip)| *ip == local)
        .map(|(index, _)| index)
        .ok_or(ClusterError::NoUnderlay { address: local })?;
    let mut links = handle.link().get().match_index(index).execute();
    let link = links
        .try_next()
        .await
        .map_err(|e| NetlinkError::new("link get", index, e))?
        .ok_or(ClusterError::NoUnderlay { address: local })?;
    Ok(underlay_of(&link))
}

/// Every address on every device, with the device's index (`ip addr`);
/// `about` names the dump's purpose in errors.
async fn address_dump(
    handle: &Handle,
    about: impl std::fmt::Display,
) -> Result<Vec<(u32, IpAddr)>, NetlinkError> {
    let messages: Vec<_> = handle
        .address()
        .get()
        .execute()
        .try_collect()
        .await
        .map_err(|e| NetlinkError::new("addr dump", about, e))?;
    Ok(messages
        .iter()
        .flat_map(|a| {
            a.attributes.iter().filter_map(|attr| match attr {
                AddressAttribute::Address(ip) | AddressAttribute::Local(ip) => {
                    Some((a.header.index, *ip))
                }
                _ => None,
            })
        })
        .collect())
}

/// Every address of this node (any device), each once.
pub(super) async fn local_addresses(handle: &Handle) -> Result<Vec<IpAddr>, ClusterError> {
    let mut ips: Vec<IpAddr> = address_dump(handle, "this node")
        .await
        .map_err(|source| ClusterError::LocalAddresses { source })?
        .into_iter()
        .map(|(_, ip)| ip)
        .collect();
    ips.sort();
    ips.dedup();
    Ok(ips)
}

/// What identifies a VXLAN device's tunnel: VNI, port, local address, underlay.
#[derive(Debug, Default, PartialEq, Eq)]
struct Tunnel {
    vni: Option<u32>,
    port: Option<u16>,
    local: Option<IpAddr>,
    underlay: Option<u32>,
}

/// The tunnel of an existing link; `None` when it is no VXLAN device.
fn vxlan_params(link: &LinkMessage) -> Option<Tunnel> {
    let infos = link.attributes.iter().find_map(|a| match a {
        LinkAttribute::LinkInfo(infos) => Some(infos),
        _ => None,
    })?;
    if !infos
        .iter()
        .any(|i| matches!(i, LinkInfo::Kind(InfoKind::Vxlan)))
    {
        return None;
    }
    let mut tunnel = Tunnel::default();
    for info in infos {
        if let LinkInfo::Data(InfoData::Vxlan(attrs)) = info {
            for attr in attrs {
                match attr {
                    InfoVxlan::Id(id) => tunnel.vni = Some(*id),
                    InfoVxlan::Port(p) => tunnel.port = Some(*p),
                    InfoVxlan::Local(v4) => tunnel.local = Some(IpAddr::V4(*v4)),
                    InfoVxlan::Local6(v6) => tunnel.local = Some(IpAddr::V6(*v6)),
                    InfoVxlan::Link(index) => tunnel.underlay = Some(*index),
                    _ => {}
                }
            }
        }
    }
    Some(tunnel)
}

/// Creates the device, or fixes an existing one: recreated when its VNI,
/// port, local address or underlay differ (or it is no VXLAN device); MTU,
/// MAC and up state set; addresses made exactly the device's.
pub(super) async fn ensure(handle: &Handle, device: &VxlanDevice) -> Result<u32, ClusterError> {
    let name = device.name.as_str();
    let existing = link_by_name(handle, name).await?;
    let reusable = existing.as_ref().filter(|link| {
        vxlan_params(link)
            == Some(Tunnel {
                vni: Some(device.vni),
                port: Some(device.port),
                local: Some(device.local),
                underlay: Some(device.underlay),
            })
    });
    let index = match (reusable, &existing) {
        (Some(link), _) => link.header.index,
        (None, existing) => {
            if let Some(old) = existing {
                tracing::info!(
                    device = name,
                    "recreating the VXLAN device with new parameters"
                );
                if let MarkedDeletion::Foreign { group } =
                    netlink::delete_marked_link(handle, name, Some(old.header.index), LINK_GROUP)
                        .await?
                {
                    tracing::warn!(
                        device = name,
                        group,
                        "a device of that name is not Sarena's; not replaced"
                    );
                    return Err(ClusterError::NoDevice {
                        name: name.to_owned(),
                        reason: "a device of that name exists and is not Sarena's (another link group)",
                    });
                }
            }
            create(handle, device).await?
        }
    };
    // Only what differs: setting even the same MAC flushes the device's
    // neighbour entries (NETDEV_CHANGEADDR), and with them the next hops.
    let current = link_by_name(handle, name).await?;
    let mut set = LinkUnspec::new_with_index(index);
    let mut changes = 0;
    if current.as_ref().map(mtu_of) != Some(device.mtu) {
        set = set.mtu(device.mtu);
        changes += 1;
    }
    if current.as_ref().and_then(netlink::link_mac) != Some(device.mac) {
        set = set.address(device.mac.octets().to_vec());
        changes += 1;
    }
    if !current.as_ref().is_some_and(netlink::link_is_up) {
        set = set.up();
        changes += 1;
    }
    if changes > 0 {
        handle
            .link()
            .set(set.build())
            .execute()
            .await
            .map_err(|e| NetlinkError::new("link set", name, e))?;
    }
    sync_addresses(handle, index, device).await?;
    Ok(index)
}

async fn create(handle: &Handle, device: &VxlanDevice) -> Result<u32, ClusterError> {
    let name = device.name.as_str();
    let mut builder = LinkVxlan::new(name, device.vni)
        .port(device.port)
        .dev(device.underlay)
        .learning(false);
    builder = match device.local {
        IpAddr::V4(v4) => builder.local(v4),
        IpAddr::V6(v6) => builder.local6(v6),
    };
    let message = builder
        .mtu(device.mtu)
        .address(device.mac.octets().to_vec())
        .link_group(LINK_GROUP)
        .up()
        .build();
    match handle.link().add(message).execute().await {
        Ok(()) => {}
        Err(e) if errno(&e) == Some(libc::EEXIST) => {}
        Err(e) => return Err(NetlinkError::new("link add", name, e).into()),
    }
    netlink::link_index(handle, name)
        .await?
        .ok_or(ClusterError::NoDevice {
            name: name.to_owned(),
            reason: "it vanished right after it was created",
        })
}

/// Adds the device's VTEP addresses (no DAD: the overlay has no duplicate)
/// and removes any other global address from it.
async fn sync_addresses(
    handle: &Handle,
    index: u32,
    device: &VxlanDevice,
) -> Result<(), ClusterError> {
    let present: Vec<_> = handle
        .address()
        .get()
        .set_link_index_filter(index)
        .execute()
        .try_collect()
        .await
        .map_err(|e| NetlinkError::new("addr dump", &device.name, e))?;
    let mut have = Vec::new();
    for message in present.into_iter().filter(|a| a.header.index == index) {
        let Some(ip) = message.attributes.iter().find_map(|a| match a {
            AddressAttribute::Address(ip) => Some(*ip),
            _ => None,
        }) else {
            continue;
        };
        let Ok(net) = IpNet::new(ip, message.header.prefix_len) else {
            continue;
        };
        if device.addresses.contains(&net) {
            have.push(net);
        } else if !matches!(ip, IpAddr::V6(v6) if v6.is_unicast_link_local()) {
            handle
                .address()
                .del(message)
                .execute()
                .await
                .map_err(|e| NetlinkError::new("addr del", net, e))?;
        }
    }
    for net in device.addresses.iter().filter(|n| !have.contains(n)) {
        let mut request = handle.address().add(index, net.addr(), net.prefix_len());
        request
            .message_mut()
            .attributes
            .push(AddressAttribute::Flags(AddressFlags::Nodad));
        match request.execute().await {
            Ok(()) => {}
            Err(e) if errno(&e) == Some(libc::EEXIST) => {}
            Err(e) => return Err(NetlinkError::new("addr add", net, e).into()),
        }
    }
    Ok(())
}

/// Deletes the device `name` if it is a VXLAN device.
pub(super) async fn remove(handle: &Handle, name: &str) -> Result<bool, ClusterError> {
    match link_by_name(handle, name).await? {
        Some(link) if vxlan_params(&link).is_some() => {
            match netlink::delete_marked_link(handle, name, Some(link.header.index), LINK_GROUP)
                .await?
            {
                MarkedDeletion::Removed => Ok(true),
                MarkedDeletion::Absent => Ok(false),
                MarkedDeletion::Foreign { group } => {
                    tracing::warn!(
                        device = name,
                        group,
                        "a VXLAN device of that name is not Sarena's; left alone"
                    );
                    Ok(false)
                }
            }
        }
        _ => Ok(false),
    }
}
