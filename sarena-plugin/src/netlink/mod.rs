//! The netlink plumbing that [`links`](crate::links) and both dataplanes
//! share: handles in the host netns and in a pod's netns, link lookups and
//! route dumps, and the mapping of a failed request to [`NetlinkError`].
//!
//! Public so that the node side (`sarena-core`: the dataplanes and Kubernetes
//! mode) uses the same lookups; [`NetlinkError`] is re-exported at the root.

mod error;
mod netns;
mod query;
mod routes;

use rtnetlink::Handle;

pub use error::errno;
pub use error::{KernelAnswer, NetlinkError};
pub use netns::handle_in;
pub use query::{
    MarkedDeletion, all_links, delete_marked_link, link_by_name, link_group, link_index,
    link_is_up, link_mac, link_name,
};
pub use routes::{all_routes, route_ip};

/// A netlink handle in the caller's (host) netns; its connection task is
/// spawned on the current runtime. Must run inside a tokio runtime.
pub fn host_handle() -> std::io::Result<Handle> {
    let (connection, handle, _) = rtnetlink::new_connection()?;
    tokio::spawn(connection);
    Ok(handle)
}
