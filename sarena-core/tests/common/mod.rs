//! Helpers for tests that need root: throwaway netns with unique names,
//! removed on drop even when the test fails.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;
use std::process::Command;

/// True when the test may run. Without root: under `CI=true` this panics (a
/// privileged test must never be skipped silently there); elsewhere it
/// prints a notice and the test returns early.
pub fn require_root(test: &str) -> bool {
    if nix_euid() == 0 {
        return true;
    }
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!("{test} needs root, and CI=true forbids skipping it");
    }
    eprintln!("SKIPPED {test}: needs root");
    false
}

fn nix_euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// A unique name with a prefix, short enough for an interface (≤ 15 bytes).
pub fn unique(prefix: &str) -> String {
    let n: u32 = rand::random();
    let mut name = format!("{prefix}{:x}{n:08x}", std::process::id() & 0xfff);
    name.truncate(15);
    name
}

/// `ip netns add NAME`, deleted on drop.
pub struct TestNetns {
    pub name: String,
}

impl TestNetns {
    pub fn new() -> Self {
        let name = unique("srnt");
        run(&["ip", "netns", "add", &name]);
        TestNetns { name }
    }

    pub fn path(&self) -> PathBuf {
        PathBuf::from(format!("/var/run/netns/{}", self.name))
    }

    /// `ip netns exec NAME ARGS...`, returning stdout; panics on failure.
    pub fn exec(&self, args: &[&str]) -> String {
        let mut full = vec!["ip", "netns", "exec", &self.name];
        full.extend_from_slice(args);
        run(&full)
    }
}

impl Drop for TestNetns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

/// A host link deleted on drop (if it still exists).
pub struct HostLinkGuard(pub String);

impl Drop for HostLinkGuard {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["link", "del", &self.0])
            .stderr(std::process::Stdio::null())
            .status();
    }
}

/// Runs a command, panicking with its stderr on failure; returns stdout.
pub fn run(args: &[&str]) -> String {
    let out = Command::new(args[0]).args(&args[1..]).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}
