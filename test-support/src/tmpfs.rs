//! A small tmpfs of its own, to run out of space on purpose.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::command::{run, succeeds};

/// A tmpfs of a given size mounted on a unique temp directory; unmounted on
/// drop (lazily if something still holds it), even when the test fails.
#[derive(Debug)]
pub struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    /// Mounts a tmpfs of `bytes` (rounded up to pages by the kernel).
    pub fn new(bytes: u64) -> Tmpfs {
        let dir = tempfile::Builder::new()
            .prefix("sarena-tmpfs")
            .tempdir()
            .unwrap();
        let path = dir.path().to_str().unwrap();
        let options = format!("size={bytes},mode=0700");
        run(&["mount", "-t", "tmpfs", "-o", &options, "tmpfs", path]);
        Tmpfs { dir }
    }

    /// The mount point.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes `name` under the mount point until the filesystem is full;
    /// returns its path (remove it to give the space back).
    pub fn fill(&self, name: &str) -> PathBuf {
        let path = self.path().join(name);
        let mut file = std::fs::File::create(&path).unwrap();
        let chunk = vec![0xa5u8; 4096];
        loop {
            match file.write(&chunk) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => break,
                Err(e) => panic!("cannot fill {}: {e}", path.display()),
            }
        }
        path
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let path = self.dir.path().to_str().unwrap_or_default().to_owned();
        if !succeeds(&["umount", &path]) {
            succeeds(&["umount", "-l", &path]);
        }
    }
}
