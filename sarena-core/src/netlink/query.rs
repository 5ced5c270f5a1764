//! Link lookups and deletions, in whichever netns the handle is.

use futures_util::TryStreamExt;
use rtnetlink::Handle;
use rtnetlink::packet_route::link::{LinkAttribute, LinkFlags, LinkMessage};

use super::error::{NetlinkError, errno};
use crate::mac::MacAddr;

/// `ip link show NAME`: the link, or `None`.
pub(crate) async fn link_by_name(
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
pub(crate) async fn link_index(handle: &Handle, name: &str) -> Result<Option<u32>, NetlinkError> {
    Ok(link_by_name(handle, name).await?.map(|l| l.header.index))
}

/// `ip link show`: every link of the handle's netns.
pub(crate) async fn all_links(handle: &Handle) -> Result<Vec<LinkMessage>, NetlinkError> {
    handle
        .link()
        .get()
        .execute()
        .try_collect()
        .await
        .map_err(|e| NetlinkError::new("link dump", "*", e))
}

/// The link's name.
pub(crate) fn link_name(link: &LinkMessage) -> Option<&str> {
    link.attributes.iter().find_map(|a| match a {
        LinkAttribute::IfName(name) => Some(name.as_str()),
        _ => None,
    })
}

/// The link's hardware address, when it is a 6-octet one.
pub(crate) fn link_mac(link: &LinkMessage) -> Option<MacAddr> {
    link.attributes.iter().find_map(|a| match a {
        LinkAttribute::Address(mac) => MacAddr::from_slice(mac),
        _ => None,
    })
}

/// Whether the link is administratively up.
pub(crate) fn link_is_up(link: &LinkMessage) -> bool {
    link.header.flags.contains(LinkFlags::Up)
}

/// `ip link del` the link `index` (called `name`); `Ok(false)` when it was
/// already gone.
pub(crate) async fn delete_link(
    handle: &Handle,
    index: u32,
    name: &str,
) -> Result<bool, NetlinkError> {
    match handle.link().del(index).execute().await {
        Ok(()) => Ok(true),
        Err(e) if errno(&e) == Some(libc::ENODEV) => Ok(false),
        Err(e) => Err(NetlinkError::new("link del", name, e)),
    }
}

/// Deletes the link `index` if it is still called `name`; `Ok(false)` when
/// it is gone or has another name.
pub(crate) async fn delete_link_by_index(
    handle: &Handle,
    index: u32,
    name: &str,
) -> Result<bool, NetlinkError> {
    let mut links = handle.link().get().match_index(index).execute();
    match links.try_next().await {
        Ok(Some(link)) if link_name(&link) == Some(name) => delete_link(handle, index, name).await,
        Ok(_) => Ok(false),
        Err(e) if errno(&e) == Some(libc::ENODEV) => Ok(false),
        Err(e) => Err(NetlinkError::new("link get", name, e)),
    }
}

/// `ip link del NAME`; `Ok(false)` when there is none.
pub(crate) async fn delete_link_by_name(handle: &Handle, name: &str) -> Result<bool, NetlinkError> {
    match link_by_name(handle, name).await? {
        Some(link) => delete_link(handle, link.header.index, name).await,
        None => Ok(false),
    }
}
