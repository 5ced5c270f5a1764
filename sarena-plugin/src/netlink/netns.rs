//! Netlink handles bound to another network namespace.
//!
//! A netlink socket stays in the netns it was created in. To talk to a pod's
//! netns we create the socket inside it (see [`handle_in`] for how), then use
//! it from wherever we like; no thread stays in a pod's namespace.

use std::fs::File;
use std::os::fd::AsFd;

use nix::sched::{CloneFlags, setns};
use rtnetlink::Handle;

/// A netlink handle whose socket lives in the netns `netns` (an open
/// `/var/run/netns/NAME` or `/proc/PID/ns/net`). Must run inside a tokio
/// runtime.
///
/// On a current-thread runtime (the plugin) the calling thread switches into
/// `netns`, creates the socket and switches back, synchronously: no other
/// code runs on it meanwhile, and a thread spawn is saved. On a multi-thread
/// runtime the socket is created on a throwaway thread instead, so a worker
/// never changes namespace even for a moment.
pub fn handle_in(netns: &File) -> std::io::Result<Handle> {
    let runtime = tokio::runtime::Handle::current();
    let (connection, handle) = match runtime.runtime_flavor() {
        tokio::runtime::RuntimeFlavor::CurrentThread => connection_here(netns)?,
        _ => connection_on_thread(&runtime, netns)?,
    };
    tokio::spawn(connection);
    Ok(handle)
}

/// A netlink connection (to be spawned) and its handle.
type Connection = (
    rtnetlink::proto::Connection<rtnetlink::packet_route::RouteNetlinkMessage>,
    Handle,
);

/// The thread could not get back to its own netns: it must not run anything
/// else (the caller's error says so; the plugin exits right after).
#[derive(Debug, thiserror::Error)]
#[error("setns back to the original network namespace")]
struct ReturnHome(#[source] nix::Error);

/// `rtnetlink::new_connection` without the unsolicited-messages receiver.
fn new_connection() -> std::io::Result<Connection> {
    rtnetlink::new_connection().map(|(connection, handle, _)| (connection, handle))
}

/// Creates the connection with this thread inside `netns`, then returns the
/// thread to the netns it was in.
fn connection_here(netns: &File) -> std::io::Result<Connection> {
    let home = File::open("/proc/thread-self/ns/net")?;
    setns(netns.as_fd(), CloneFlags::CLONE_NEWNET)?;
    let created = new_connection();
    setns(home.as_fd(), CloneFlags::CLONE_NEWNET)
        .map_err(|e| std::io::Error::other(ReturnHome(e)))?;
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
                setns(netns.as_fd(), CloneFlags::CLONE_NEWNET)?;
                new_connection()
            })
            .join()
    })
    .unwrap_or_else(|_| Err(std::io::Error::other("netns thread panicked")))
}
