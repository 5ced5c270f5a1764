//! Replacing a file so that a reader sees the old one or the new one, never
//! a part: a temporary file in the same directory (same file system),
//! written and fsync'd, renamed over the target, the directory fsync'd.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::InstallError;

/// The end of every temporary file's name: not an extension libcni loads.
const TEMP_SUFFIX: &str = ".sarena-tmp";

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
/// parents created when missing).
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
    remove_stale_temps(dir, name)?;
    let tmp = dir.join(format!(".{name}.{}{TEMP_SUFFIX}", std::process::id()));
    let written = write_new(&tmp, body, mode)
        .and_then(|()| fs::rename(&tmp, &path).map_err(|e| InstallError::io("rename", &tmp, e)));
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    sync_dir(dir)?;
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

/// The file, created (never an existing one), filled, given `mode` (the
/// umask does not apply) and fsync'd.
fn write_new(tmp: &Path, body: &[u8], mode: u32) -> Result<(), InstallError> {
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(tmp)
        .map_err(|e| InstallError::io("create", tmp, e))?;
    file.write_all(body)
        .map_err(|e| InstallError::io("write", tmp, e))?;
    file.set_permissions(fs::Permissions::from_mode(mode))
        .map_err(|e| InstallError::io("chmod", tmp, e))?;
    file.sync_all()
        .map_err(|e| InstallError::io("fsync", tmp, e))
}

/// Temporary files of `name` left by an installer that died mid-write.
fn remove_stale_temps(dir: &Path, name: &str) -> Result<(), InstallError> {
    let prefix = format!(".{name}.");
    for path in list(dir)? {
        let Some(file) = path.file_name().and_then(|f| f.to_str()) else {
            continue;
        };
        if file.starts_with(&prefix) && file.ends_with(TEMP_SUFFIX) {
            fs::remove_file(&path).map_err(|e| InstallError::io("remove", &path, e))?;
        }
    }
    Ok(())
}

/// The entries of `dir`, sorted.
pub(super) fn list(dir: &Path) -> Result<Vec<PathBuf>, InstallError> {
    let mut paths = Vec::new();
    for entry in fs::read_dir(dir).map_err(|e| InstallError::io("read dir", dir, e))? {
        paths.push(
            entry
                .map_err(|e| InstallError::io("read dir", dir, e))?
                .path(),
        );
    }
    paths.sort();
    Ok(paths)
}

/// Makes the renames and removals in `dir` durable.
pub(super) fn sync_dir(dir: &Path) -> Result<(), InstallError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| InstallError::io("fsync dir", dir, e))
}
