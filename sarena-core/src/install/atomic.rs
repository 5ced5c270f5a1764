//! Replacing a file so that a reader sees the old one or the new one, never
//! a part ([`durable::replace`]), and not at all when it already holds what
//! it should.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use sarena_plugin::durable;

use super::InstallError;

/// What a write did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The file is new or was replaced.
    Written,
    /// The file already had this content and mode: not touched.
    Unchanged,
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Outcome::Written => "written",
            Outcome::Unchanged => "unchanged",
        })
    }
}

/// Makes `dir/name` hold `body` with permission bits `mode` (`dir` and its
/// parents created when missing), through [`durable::replace`].
pub(super) fn replace_file(
    dir: &Path,
    name: &str,
    body: &[u8],
    mode: u32,
) -> Result<Outcome, InstallError> {
    fs::create_dir_all(dir).map_err(|e| InstallError::io("mkdir", dir, e))?;
    let path = dir.join(name);
    if is_same(&path, body, mode)? {
        return Ok(Outcome::Unchanged);
    }
    durable::remove_stale_temps(dir, Some(name))?;
    durable::replace(dir, name, body, mode)?;
    Ok(Outcome::Written)
}

/// `path` is a regular file with exactly `body` and permission bits `mode`.
fn is_same(path: &Path, body: &[u8], mode: u32) -> Result<bool, InstallError> {
    let meta = match fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(InstallError::io("stat", path, e)),
    };
    if !meta.is_file()
        || meta.permissions().mode() & 0o7777 != mode
        || meta.len() != body.len() as u64
    {
        return Ok(false);
    }
    let old = fs::read(path).map_err(|e| InstallError::io("read", path, e))?;
    Ok(old == body)
}

/// The entries of `dir`, sorted.
pub(super) fn list(dir: &Path) -> Result<Vec<PathBuf>, InstallError> {
    Ok(durable::list(dir)?)
}

/// Makes the renames and removals in `dir` durable.
pub(super) fn sync_dir(dir: &Path) -> Result<(), InstallError> {
    Ok(durable::sync_dir(dir)?)
}
