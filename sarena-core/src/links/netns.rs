//! Netlink handles bound to a network namespace.
//!
//! A netlink socket stays in the netns it was created in. To talk to a pod's
//! netns we open the socket on a short-lived OS thread that has `setns`'d into
//! it, then use the socket from wherever we like; nothing else in the process
//! ever changes namespace (tokio workers are reused, so they must never setns).

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
/// Must run inside a tokio runtime; the socket is created on a throwaway thread.
pub(crate) fn handle_in_file(netns: &File, path: &Path) -> Result<Handle, LinkError> {
    let runtime = tokio::runtime::Handle::current();
    let netns_error = |source: std::io::Error| LinkError::Netns {
        path: path.display().to_string(),
        source,
    };
    let created = std::thread::scope(|scope| {
        scope
            .spawn(|| {
                // Registering the socket with the reactor needs the runtime's context.
                let _context = runtime.enter();
                setns(netns.as_fd(), CloneFlags::CLONE_NEWNET).map_err(std::io::Error::from)?;
                rtnetlink::new_connection()
            })
            .join()
    });
    let (connection, handle, _) = match created {
        Ok(result) => result.map_err(netns_error)?,
        Err(_) => {
            return Err(netns_error(std::io::Error::other("netns thread panicked")));
        }
    };
    tokio::spawn(connection);
    Ok(handle)
}
