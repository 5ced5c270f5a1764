//! Reading a node's IPAM state from host-local's address files.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::BenchError;

/// A node's IPAM occupancy, read from its own state (daemon API or host-local's dir).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IpamUsage {
    /// Endpoints the daemon knows (Sarena only).
    pub endpoints: Option<usize>,
    /// Addresses allocated.
    pub addresses: usize,
}

/// Addresses host-local holds under `dir` (one file per address; not `lock`,
/// not `last_reserved_ip*`).
pub fn count_host_local(dir: &Path) -> Result<usize, BenchError> {
    let mut n = 0;
    if !dir.exists() {
        return Ok(0);
    }
    let nets = std::fs::read_dir(dir).map_err(|e| BenchError::io("read_dir", dir, e))?;
    for net in nets.flatten() {
        let Ok(entries) = std::fs::read_dir(net.path()) else {
            continue;
        };
        n += entries
            .flatten()
            .filter(|e| {
                let name = e.file_name();
                let name = name.to_string_lossy();
                name != "lock" && !name.starts_with("last_reserved_ip")
            })
            .count();
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_local_count_skips_lock_and_last_reserved() {
        let dir = tempfile::tempdir().unwrap();
        let net = dir.path().join("net");
        std::fs::create_dir(&net).unwrap();
        for f in ["lock", "last_reserved_ip.0", "10.1.0.2", "10.1.0.3"] {
            std::fs::write(net.join(f), "x").unwrap();
        }
        assert_eq!(count_host_local(dir.path()).unwrap(), 2);
        assert_eq!(count_host_local(&dir.path().join("absent")).unwrap(), 0);
    }
}
