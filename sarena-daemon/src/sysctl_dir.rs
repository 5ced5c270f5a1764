//! `--sysctl-dir`: where the daemon writes its sysctls (`ip_forward`,
//! forwarding, the kernel dataplane's per-veth `proxy_arp` and
//! `disable_ipv6`) when `/proc/sys` is not writable.
//!
//! A non-privileged container gets `/proc/sys` read-only, and runc refuses
//! mounts under `/proc`; the DaemonSet therefore mounts the host's
//! `/proc/sys/net` read-write at `/host/proc/sys/net` and passes
//! `--sysctl-dir=/host/proc/sys`. The directory is checked at start-up (its
//! `net/ipv4/ip_forward` opened for writing, nothing written), so a missing
//! or read-only mount stops the daemon with its path instead of failing the
//! first pod.

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};

use sarena_core::sysctl;

/// The key opened to check a `--sysctl-dir`: every kernel has it.
const PROBE: &str = "net/ipv4/ip_forward";

/// Why `--sysctl-dir` cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SysctlDirError {
    /// The directory has no writable `net/ipv4/ip_forward`.
    #[error("--sysctl-dir {}: {} cannot be opened for writing (the host's /proc/sys/net must be mounted read-write at DIR/net)", .dir.display(), .probe.display())]
    NotWritable {
        /// `--sysctl-dir`.
        dir: PathBuf,
        /// The file opened.
        probe: PathBuf,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// Another root was set before in this process.
    #[error("--sysctl-dir {}: sysctls already go under {}", .dir.display(), .current.display())]
    AlreadySet {
        /// `--sysctl-dir`.
        dir: PathBuf,
        /// The root in force.
        current: PathBuf,
    },
}

/// Checks `dir` (see the module's doc) and makes it the root of every
/// sysctl this process writes. With `None` nothing changes: `/proc/sys`.
pub fn apply(dir: Option<&Path>) -> Result<(), SysctlDirError> {
    let Some(dir) = dir else { return Ok(()) };
    check(dir)?;
    sysctl::set_root(dir.to_path_buf()).map_err(|current| SysctlDirError::AlreadySet {
        dir: dir.to_path_buf(),
        current,
    })
}

/// `dir`'s `net/ipv4/ip_forward` opens for writing.
fn check(dir: &Path) -> Result<(), SysctlDirError> {
    let probe = dir.join(PROBE);
    match OpenOptions::new().write(true).open(&probe) {
        Ok(_) => Ok(()),
        Err(source) => Err(SysctlDirError::NotWritable {
            dir: dir.to_path_buf(),
            probe,
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dir_without_the_host_net_tree_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let err = check(dir.path()).unwrap_err();
        let text = err.to_string();
        assert!(text.starts_with("--sysctl-dir "), "{text}");
        assert!(text.contains("net/ipv4/ip_forward"), "{text}");
    }

    #[test]
    fn a_writable_tree_passes_and_is_left_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("net/ipv4")).unwrap();
        std::fs::write(dir.path().join(PROBE), "0\n").unwrap();
        check(dir.path()).unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join(PROBE)).unwrap(),
            "0\n"
        );
    }
}
