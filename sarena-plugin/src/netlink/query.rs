//! Link lookups and deletions, in whichever netns the handle is.

use futures_util::TryStreamExt;
use rtnetlink::Handle;
use rtnetlink::packet_route::link::{LinkAttribute, LinkFlags, LinkMessage};

use super::error::{NetlinkError, errno};
use crate::mac::MacAddr;

/// `ip link show NAME`: the link, or `None`.
pub async fn link_by_name(
    handle: &Handle,
    name: &str,
) -> Result<Option<LinkMessage>, NetlinkError> {
    let mut links = handle.link().get().match_name(name.to_string()).execute();
    match links.try_next().await {
        Ok(link) => Ok(link),
        Err(e) if errno(&e) == Some(libc::ENODEV) => Ok(None),
        Err(e) => Err(NetlinkError::new("link get", name, e)),
    }
}

/// The ifindex of the link called `name`, or `None`.
pub async fn link_index(handle: &Handle, name: &str) -> Result<Option<u32>, NetlinkError> {
    Ok(link_by_name(handle, name).await?.map(|l| l.header.index))
}

/// `ip link show`: every link of the handle's netns.
pub async fn all_links(handle: &Handle) -> Result<Vec<LinkMessage>, NetlinkError> {
    handle
        .link()
        .get()
        .execute()
        .try_collect()
        .await
        .map_err(|e| NetlinkError::new("link dump", "*", e))
}

/// The link's name.
pub fn link_name(link: &LinkMessage) -> Option<&str> {
    link.attributes.iter().find_map(|a| match a {
        LinkAttribute::IfName(name) => Some(name.as_str()),
        _ => None,
    })
}

/// The link's hardware address, when it is a 6-octet one.
pub fn link_mac(link: &LinkMessage) -> Option<MacAddr> {
    link.attributes.iter().find_map(|a| match a {
        LinkAttribute::Address(mac) => MacAddr::from_slice(mac),
        _ => None,
    })
}

/// The link's group (`ip link show` prints it as `group N`; 0 by default).
pub fn link_group(link: &LinkMessage) -> u32 {
    link.attributes
        .iter()
        .find_map(|a| match a {
            LinkAttribute::Group(group) => Some(*group),
            _ => None,
        })
        .unwrap_or(0)
}

/// Whether the link is administratively up.
pub fn link_is_up(link: &LinkMessage) -> bool {
    link.header.flags.contains(LinkFlags::Up)
}

/// `ip link del` the link `index` (called `name`); `Ok(false)` when it was
/// already gone.
async fn delete_link(handle: &Handle, index: u32, name: &str) -> Result<bool, NetlinkError> {
    match handle.link().del(index).execute().await {
        Ok(()) => Ok(true),
        Err(e) if errno(&e) == Some(libc::ENODEV) => Ok(false),
        Err(e) => Err(NetlinkError::new("link del", name, e)),
    }
}

/// What [`delete_marked_link`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkedDeletion {
    /// The link carried the mark and is gone.
    Removed,
    /// There was no such link (or it went away meanwhile).
    Absent,
    /// The link exists but is not in `group`: it was left alone.
    Foreign {
        /// The group it is in.
        group: u32,
    },
}

/// Deletes the link called `name` (and, when `index` is given, with that
/// ifindex) only if it is in `group`, the mark of whoever created it.
pub async fn delete_marked_link(
    handle: &Handle,
    name: &str,
    index: Option<u32>,
    group: u32,
) -> Result<MarkedDeletion, NetlinkError> {
    let link = match index {
        Some(index) => {
            let mut links = handle.link().get().match_index(index).execute();
            match links.try_next().await {
                Ok(link) => link.filter(|l| link_name(l) == Some(name)),
                Err(e) if errno(&e) == Some(libc::ENODEV) => None,
                Err(e) => return Err(NetlinkError::new("link get", name, e)),
            }
        }
        None => link_by_name(handle, name).await?,
    };
    let Some(link) = link else {
        return Ok(MarkedDeletion::Absent);
    };
    match link_group(&link) {
        found if found == group => Ok(if delete_link(handle, link.header.index, name).await? {
            MarkedDeletion::Removed
        } else {
            MarkedDeletion::Absent
        }),
        found => Ok(MarkedDeletion::Foreign { group: found }),
    }
}
