//! Small netlink helpers shared by the verbs: lookups and error mapping.

use futures_util::TryStreamExt;
use rtnetlink::Handle;
use rtnetlink::packet_route::link::{LinkAttribute, LinkFlags, LinkMessage};

use crate::links::LinkError;

/// The errno a netlink error carries (positive), if any.
pub(crate) fn errno(error: &rtnetlink::Error) -> Option<i32> {
    match error {
        rtnetlink::Error::NetlinkError(message) => Some(message.raw_code().abs()),
        _ => None,
    }
}

/// Maps a netlink error into a [`LinkError`] naming the call and the interface.
pub(crate) fn netlink_error(
    call: &'static str,
    ifname: &str,
    error: rtnetlink::Error,
) -> LinkError {
    let message = match &error {
        rtnetlink::Error::NetlinkError(message) => message.to_io().to_string(),
        other => other.to_string(),
    };
    LinkError::Netlink {
        call,
        ifname: ifname.to_string(),
        message,
    }
}

/// The link called `name`, or `None`.
pub(crate) async fn link_by_name(
    handle: &Handle,
    name: &str,
) -> Result<Option<LinkMessage>, LinkError> {
    let mut links = handle.link().get().match_name(name.to_string()).execute();
    match links.try_next().await {
        Ok(link) => Ok(link),
        Err(e) if errno(&e) == Some(libc::ENODEV) => Ok(None),
        Err(e) => Err(netlink_error("link get", name, e)),
    }
}

/// Every link of the handle's netns.
pub(crate) async fn all_links(handle: &Handle) -> Result<Vec<LinkMessage>, LinkError> {
    handle
        .link()
        .get()
        .execute()
        .try_collect()
        .await
        .map_err(|e| netlink_error("link dump", "*", e))
}

/// The link's name.
pub(crate) fn link_name(link: &LinkMessage) -> Option<&str> {
    link.attributes.iter().find_map(|a| match a {
        LinkAttribute::IfName(name) => Some(name.as_str()),
        _ => None,
    })
}

/// The link's hardware address.
pub(crate) fn link_mac(link: &LinkMessage) -> Option<&[u8]> {
    link.attributes.iter().find_map(|a| match a {
        LinkAttribute::Address(mac) => Some(mac.as_slice()),
        _ => None,
    })
}

/// Whether the link is administratively up.
pub(crate) fn link_is_up(link: &LinkMessage) -> bool {
    link.header.flags.contains(LinkFlags::Up)
}

/// Deletes the link with `index`; `Ok(false)` when it was already gone.
pub(crate) async fn delete_link(
    handle: &Handle,
    index: u32,
    ifname: &str,
) -> Result<bool, LinkError> {
    match handle.link().del(index).execute().await {
        Ok(()) => Ok(true),
        Err(e) if errno(&e) == Some(libc::ENODEV) => Ok(false),
        Err(e) => Err(netlink_error("link del", ifname, e)),
    }
}

/// Deletes the link `index` if it is still called `name`; `Ok(false)` when
/// it is gone or has another name.
pub(crate) async fn delete_link_by_index(
    handle: &Handle,
    index: u32,
    name: &str,
) -> Result<bool, LinkError> {
    let mut links = handle.link().get().match_index(index).execute();
    match links.try_next().await {
        Ok(Some(link)) if link_name(&link) == Some(name) => delete_link(handle, index, name).await,
        Ok(_) => Ok(false),
        Err(e) if errno(&e) == Some(libc::ENODEV) => Ok(false),
        Err(e) => Err(netlink_error("link get", name, e)),
    }
}

/// Deletes the link called `name`; `Ok(false)` when there is none.
pub(crate) async fn delete_link_by_name(handle: &Handle, name: &str) -> Result<bool, LinkError> {
    match link_by_name(handle, name).await? {
        Some(link) => delete_link(handle, link.header.index, name).await,
        None => Ok(false),
    }
}
