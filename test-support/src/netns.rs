//! Throwaway network namespaces and host links, removed on drop.

use std::path::{Path, PathBuf};

use crate::command::{run, succeeds};
use crate::names::unique;

/// `ip netns add <unique name>`, deleted on drop (with every link in it, so
/// also the host end of a veth pair whose peer is inside).
#[derive(Debug)]
pub struct TestNetns {
    /// The name under `/var/run/netns`.
    pub name: String,
}

impl TestNetns {
    /// A new namespace with a unique name.
    #[allow(clippy::new_without_default)] // creates a kernel object
    pub fn new() -> Self {
        let name = unique("srnt");
        run(&["ip", "netns", "add", &name]);
        TestNetns { name }
    }

    /// `/var/run/netns/<name>`, the path a runtime passes as `CNI_NETNS`.
    pub fn path(&self) -> PathBuf {
        PathBuf::from(format!("/var/run/netns/{}", self.name))
    }

    /// `ip netns exec <name> ARGS...`, returning stdout; panics on failure.
    pub fn exec(&self, args: &[&str]) -> String {
        let mut full = vec!["ip", "netns", "exec", &self.name];
        full.extend_from_slice(args);
        run(&full)
    }
}

impl Drop for TestNetns {
    fn drop(&mut self) {
        succeeds(&["ip", "netns", "del", &self.name]);
    }
}

/// A host link deleted on drop (if it still exists).
#[derive(Debug)]
pub struct HostLinkGuard(pub String);

impl Drop for HostLinkGuard {
    fn drop(&mut self) {
        succeeds(&["ip", "link", "del", &self.0]);
    }
}

/// Runs `f` on a new thread inside the namespace at `netns`; the test's own
/// threads stay where they are.
pub fn in_netns<T: Send + 'static>(
    netns: &Path,
    f: impl FnOnce() -> T + Send + 'static,
) -> std::thread::JoinHandle<T> {
    let file = std::fs::File::open(netns)
        .unwrap_or_else(|e| panic!("cannot open netns {}: {e}", netns.display()));
    std::thread::spawn(move || {
        nix::sched::setns(&file, nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
        f()
    })
}

/// Runs the future `f` makes on a current-thread runtime, on a new thread
/// inside the namespace at `netns` (netlink sockets and `nft` opened there
/// act there); waits for it and returns its output.
pub fn block_on_in_netns<T, F, Fut>(netns: &Path, f: F) -> T
where
    T: Send + 'static,
    F: FnOnce() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = T>,
{
    in_netns(netns, move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(f())
    })
    .join()
    .unwrap()
}
