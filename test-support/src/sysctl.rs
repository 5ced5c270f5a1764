//! Kernel parameters a test changes, put back when it ends.

use std::path::PathBuf;

/// The value of a sysctl when the guard was made, written back on drop
/// (even when the test fails).
#[derive(Debug)]
pub struct SysctlGuard {
    path: PathBuf,
    saved: String,
}

impl SysctlGuard {
    /// Saves `key` (its path under `/proc/sys`, e.g.
    /// `net/ipv6/conf/all/forwarding`) for restoring on drop.
    pub fn save(key: &str) -> SysctlGuard {
        let path = PathBuf::from("/proc/sys").join(key);
        let saved = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
        SysctlGuard { path, saved }
    }
}

impl Drop for SysctlGuard {
    fn drop(&mut self) {
        let _ = std::fs::write(&self.path, self.saved.trim());
    }
}
