//! Kernel parameters under `/proc/sys`: the one writer that links and both
//! dataplanes use (`rp_filter`, `proxy_arp`, forwarding).

use std::path::PathBuf;

/// A sysctl write that failed.
#[derive(Debug, thiserror::Error)]
#[error("sysctl {} = {value}", .path.display())]
pub struct SysctlError {
    /// The parameter's file, e.g. `/proc/sys/net/ipv4/ip_forward`.
    pub path: PathBuf,
    /// The value written.
    pub value: &'static str,
    /// Cause.
    #[source]
    pub source: std::io::Error,
}

impl SysctlError {
    /// The OS error code of the write.
    pub fn errno(&self) -> Option<i32> {
        self.source.raw_os_error()
    }
}

/// `sysctl KEY=VALUE`, with `key` as its path under `/proc/sys`
/// (`net/ipv4/ip_forward`; `/`, not `.`, since interface names may hold dots).
pub fn write(key: &str, value: &'static str) -> Result<(), SysctlError> {
    let path = PathBuf::from("/proc/sys").join(key);
    std::fs::write(&path, value).map_err(|source| SysctlError {
        path,
        value,
        source,
    })
}

/// `net/ipv4/conf/IFNAME/PARAMETER`.
pub fn ipv4_conf(ifname: &str, parameter: &str) -> String {
    format!("net/ipv4/conf/{ifname}/{parameter}")
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
}
