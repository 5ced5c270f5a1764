//! bpffs and pin directories on it.

use std::path::PathBuf;

use sarena_core::dataplane::ebpf::AyaDataplane;

use crate::command::run;

/// Mounts bpffs on `/sys/fs/bpf` unless it is mounted there already.
pub fn ensure_bpffs() {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
    let mounted = mounts.lines().any(|l| {
        let mut fields = l.split_whitespace().skip(1);
        (fields.next(), fields.next()) == (Some("/sys/fs/bpf"), Some("bpf"))
    });
    if !mounted {
        run(&["mount", "-t", "bpf", "bpf", "/sys/fs/bpf"]);
    }
}

/// A unique pin directory on bpffs (not created), purged on drop with
/// everything the dataplane pinned under it.
#[derive(Debug)]
pub struct PinDir(pub PathBuf);

impl PinDir {
    /// `/sys/fs/bpf/sarena-test-<pid>-<random>`, bpffs mounted first.
    #[allow(clippy::new_without_default)] // mounts bpffs
    pub fn new() -> Self {
        ensure_bpffs();
        let n: u32 = rand::random();
        PinDir(PathBuf::from(format!(
            "/sys/fs/bpf/sarena-test-{}-{n:08x}",
            std::process::id()
        )))
    }
}

impl Drop for PinDir {
    fn drop(&mut self) {
        let _ = AyaDataplane::purge(&self.0);
    }
}
