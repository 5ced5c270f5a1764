//! The netlink plumbing that [`links`](crate::links) and both dataplanes
//! share: handles in the host netns and in a pod's netns, link lookups and
//! route dumps, and the mapping of a failed request to [`NetlinkError`].
//!
//! Crate-internal except for the error type (re-exported at the crate root).

mod error;
mod netns;
mod query;
mod routes;

use rtnetlink::Handle;

pub(crate) use error::errno;
pub use error::{KernelAnswer, NetlinkError};
pub(crate) use netns::handle_in;
pub(crate) use query::{
    MarkedDeletion, all_links, delete_marked_link, link_by_name, link_group, link_index,
    link_is_up, link_mac, link_name,
};
pub(crate) use routes::{all_routes, route_ip};

/// A netlink handle in the caller's (host) netns; its connection task is
/// spawned on the current runtime. Must run inside a tokio runtime.
pub(crate) fn host_handle() -> std::io::Result<Handle> {
    let (connection, handle, _) = rtnetlink::new_connection()?;
    tokio::spawn(connection);
    Ok(handle)
}
