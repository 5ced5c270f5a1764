//! Netlink handles bound to a network namespace.
//!
//! A netlink socket stays in the netns it was created in. To talk to a pod's
//! netns we create the socket inside it (see [`handle_in_file`] for how), then
//! use it from wherever we like; no thread stays in a pod's namespace.

use std::fs::File;
use std::os::fd::AsFd;
use std::path::Path;

use nix::sched::{CloneFlags, setns};
use rtnetlink::Handle;

use super::LinkError;

/// Opens a netns file (`/var/run/netns/NAME` or `/proc/PID/ns/net`).
pub(crate) fn open_netns(path: &Path) -> Result<File, LinkError> {
    File::open(path).map_err(|source| LinkError::Netns {
        path: path.display().to_string(),
        source,
    })
}

/// A netlink handle in the caller's (host) netns. Must run inside a tokio runtime.
pub(crate) fn host_handle() -> Result<Handle, LinkError> {
    let (connection, handle, _) = rtnetlink::new_connection().map_err(|source| LinkError::Io {
        call: "netlink socket",
        ifname: String::new(),
        source,
    })?;
    tokio::spawn(connection);
    Ok(handle)
}

/// A netlink handle whose socket lives in the netns `netns` (opened from `path`).
/// Must run inside a tokio runtime.
///
/// On a current-thread runtime (the plugin) the calling thread switches into
/// `netns`, creates the socket and switches back, synchronously: no other
/// code runs on it meanwhile, and a thread spawn is saved. On a multi-thread
/// runtime the socket is created on a throwaway thread instead, so a worker
/// never changes namespace even for a moment.
pub(crate) fn handle_in_file(netns: &File, path: &Path) -> Result<Handle, LinkError> {
    let runtime = tokio::runtime::Handle::current();
    let netns_error = |source: std::io::Error| LinkError::Netns {
        path: path.display().to_string(),
        source,
    };
    let (connection, handle) = match runtime.runtime_flavor() {
        tokio::runtime::RuntimeFlavor::CurrentThread => {
            connection_here(netns).map_err(netns_error)?
        }
        _ => connection_on_thread(&runtime, netns).map_err(netns_error)?,
    };
    tokio::spawn(connection);
    Ok(handle)
}

/// A netlink connection (to be spawned) and its handle.
type Connection = (
    rtnetlink::proto::Connection<rtnetlink::packet_route::RouteNetlinkMessage>,
    Handle,
);

/// `rtnetlink::new_connection` without the unsolicited-messages receiver.
fn new_connection() -> std::io::Result<Connection> {
    rtnetlink::new_connection().map(|(connection, handle, _)| (connection, handle))
}

/// Creates the connection with this thread inside `netns`, then returns the
/// thread to the netns it was in.
fn connection_here(netns: &File) -> std::io::Result<Connection> {
    let home = File::open("/proc/thread-self/ns/net")?;
    setns(netns.as_fd(), CloneFlags::CLONE_NEWNET).map_err(std::io::Error::from)?;
    let created = new_connection();
    setns(home.as_fd(), CloneFlags::CLONE_NEWNET).map_err(|e| {
        std::io::Error::other(format!(
            "could not return to the original network namespace: {e}"
        ))
    })?;
    created
}

/// Creates the connection on a throwaway thread inside `netns`.
fn connection_on_thread(
    runtime: &tokio::runtime::Handle,
    netns: &File,
) -> std::io::Result<Connection> {
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                // Registering the socket with the reactor needs the runtime's context.
                let _context = runtime.enter();
                setns(netns.as_fd(), CloneFlags::CLONE_NEWNET).map_err(std::io::Error::from)?;
                new_connection()
            })
            .join()
    })
    .unwrap_or_else(|_| Err(std::io::Error::other("netns thread panicked")))
}
