//! Kernel parameters under `/proc/sys`: the one writer that links and both
//! dataplanes use (`rp_filter`, `proxy_arp`, forwarding).
//!
//! The directory written under is `/proc/sys` unless the process chose
//! another one at start-up ([`set_root`]): a daemon in a non-privileged
//! container sees `/proc/sys` read-only, so it is given the host's
//! `/proc/sys/net` mounted read-write elsewhere (every key Sarena writes is
//! under `net/`). What a key names stays the writer's network namespace's:
//! the kernel resolves `net/` entries by the netns of the task that opens
//! them, whatever mount they are reached through.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The directory keys are written under unless [`set_root`] says otherwise.
pub const DEFAULT_ROOT: &str = "/proc/sys";

/// The root chosen by [`set_root`], if any.
static ROOT: OnceLock<PathBuf> = OnceLock::new();

/// A sysctl write or read that failed.
#[derive(Debug, thiserror::Error)]
#[error("sysctl {}{}", .path.display(), written(.value))]
pub struct SysctlError {
    /// The parameter's file, e.g. `/proc/sys/net/ipv4/ip_forward`.
    pub path: PathBuf,
    /// The value written; `None` for a read.
    pub value: Option<String>,
    /// Cause.
    #[source]
    pub source: std::io::Error,
}

/// ` = VALUE` for a write, ` (read)` for a read.
fn written(value: &Option<String>) -> String {
    match value {
        Some(value) => format!(" = {value}"),
        None => " (read)".to_owned(),
    }
}

impl SysctlError {
    /// The OS error code of the write.
    pub fn errno(&self) -> Option<i32> {
        self.source.raw_os_error()
    }
}

/// Makes `dir` stand for `/proc/sys` in every later [`write()`] of this
/// process (a directory holding the host's `/proc/sys/net` as `net`). Set
/// once, at start-up: a second call changes nothing and returns the root
/// already in force.
pub fn set_root(dir: PathBuf) -> Result<(), PathBuf> {
    ROOT.set(dir)
        .map_err(|_| ROOT.get().cloned().unwrap_or_default())
}

/// The directory [`write()`] writes under: [`set_root`]'s, else [`DEFAULT_ROOT`].
pub fn root() -> &'static Path {
    ROOT.get().map_or(Path::new(DEFAULT_ROOT), PathBuf::as_path)
}

/// `sysctl KEY=VALUE`, with `key` as its path under `/proc/sys`
/// (`net/ipv4/ip_forward`; `/`, not `.`, since interface names may hold dots),
/// written under [`root`].
pub fn write(key: &str, value: &str) -> Result<(), SysctlError> {
    write_under(root(), key, value)
}

/// [`write()`] under `root` instead of the process's root.
pub fn write_under(root: &Path, key: &str, value: &str) -> Result<(), SysctlError> {
    let path = root.join(key);
    std::fs::write(&path, value).map_err(|source| SysctlError {
        path,
        value: Some(value.to_owned()),
        source,
    })
}

/// The current value of `key` (its path under `/proc/sys`, as for
/// [`write()`]), trimmed, read under [`root`].
pub fn read(key: &str) -> Result<String, SysctlError> {
    read_under(root(), key)
}

/// [`read()`] under `root` instead of the process's root.
pub fn read_under(root: &Path, key: &str) -> Result<String, SysctlError> {
    let path = root.join(key);
    match std::fs::read_to_string(&path) {
        Ok(value) => Ok(value.trim().to_owned()),
        Err(source) => Err(SysctlError {
            path,
            value: None,
            source,
        }),
    }
}

/// `net/ipv4/conf/IFNAME/PARAMETER`.
pub fn ipv4_conf(ifname: &str, parameter: &str) -> String {
    format!("net/ipv4/conf/{ifname}/{parameter}")
}

/// `net/ipv6/conf/IFNAME/PARAMETER`.
pub fn ipv6_conf(ifname: &str, parameter: &str) -> String {
    format!("net/ipv6/conf/{ifname}/{parameter}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_write_names_the_file_and_the_value() {
        let err = write(&ipv4_conf("sarena-no-such-if", "rp_filter"), "0").unwrap_err();
        assert_eq!(
            err.path,
            PathBuf::from("/proc/sys/net/ipv4/conf/sarena-no-such-if/rp_filter")
        );
        let text = err.to_string();
        assert!(
            text.contains("/proc/sys/net/ipv4/conf/sarena-no-such-if/rp_filter = 0"),
            "{text}"
        );
        assert!(err.errno().is_some());
    }

    #[test]
    fn keys_are_written_under_the_given_root() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("net/ipv4")).unwrap();
        std::fs::write(dir.path().join("net/ipv4/ip_forward"), "0").unwrap();
        write_under(dir.path(), "net/ipv4/ip_forward", "1").unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join("net/ipv4/ip_forward")).unwrap(),
            "1"
        );
        let err = write_under(dir.path(), &ipv4_conf("eth0", "rp_filter"), "0").unwrap_err();
        assert_eq!(err.path, dir.path().join("net/ipv4/conf/eth0/rp_filter"));
        let err = write_under(dir.path(), &ipv6_conf("eth0", "disable_ipv6"), "1").unwrap_err();
        assert_eq!(err.path, dir.path().join("net/ipv6/conf/eth0/disable_ipv6"));
        assert_eq!(err.source.kind(), std::io::ErrorKind::NotFound);
    }

    #[test]
    fn keys_are_read_trimmed_under_the_given_root() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("net/ipv4")).unwrap();
        std::fs::write(dir.path().join("net/ipv4/ip_forward"), "0\n").unwrap();
        assert_eq!(read_under(dir.path(), "net/ipv4/ip_forward").unwrap(), "0");
        let err = read_under(dir.path(), "net/ipv6/conf/all/forwarding").unwrap_err();
        assert_eq!(err.value, None);
        assert!(err.to_string().ends_with("forwarding (read)"), "{err}");
    }

    #[test]
    fn the_default_root_is_proc_sys() {
        // No test of this crate calls set_root.
        assert_eq!(root(), Path::new("/proc/sys"));
    }
}
