//! Crash-safe file writes: the one home of "temporary file in the same
//! directory, written and fsync'd, renamed over the target, the directory
//! fsync'd". A reader sees the old content or the new, never a part, and once
//! [`replace`] returns the new content survives a power cut.
//!
//! Used by the deletion queue (its entries), the installer (the plugin binary
//! and the conflist) and Kubernetes mode (the session file).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The end of every temporary file's name: not an extension libcni loads
/// (`.conf`, `.conflist`, `.json`), not a queue entry (`.json`).
pub const TEMP_SUFFIX: &str = ".sarena-tmp";

/// A file-system call that failed.
#[derive(Debug, thiserror::Error)]
#[error("{call} {}", .path.display())]
pub struct FileError {
    /// The call, e.g. `rename`.
    pub call: &'static str,
    /// The file or directory.
    pub path: PathBuf,
    /// Cause.
    #[source]
    pub source: io::Error,
}

impl FileError {
    fn at<'a>(call: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> FileError + 'a {
        move |source| FileError {
            call,
            path: path.to_path_buf(),
            source,
        }
    }
}

/// Makes `dir/name` hold `body` with permission bits `mode` (the umask does
/// not apply), durably. `dir` must exist. The temporary file is
/// `.NAME.PID.RANDOM.sarena-tmp`, created exclusively (never an existing
/// file, never through a symlink), and removed again when a step fails.
pub fn replace(dir: &Path, name: &str, body: &[u8], mode: u32) -> Result<(), FileError> {
    let tmp = dir.join(format!(
        ".{name}.{}.{:016x}{TEMP_SUFFIX}",
        std::process::id(),
        rand::random::<u64>()
    ));
    let path = dir.join(name);
    let written = write_new(&tmp, body, mode)
        .and_then(|()| fs::rename(&tmp, &path).map_err(FileError::at("rename", &tmp)));
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    sync_dir(dir)
}

/// The temporary file: created, filled, given `mode` and fsync'd.
fn write_new(tmp: &Path, body: &[u8], mode: u32) -> Result<(), FileError> {
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(tmp)
        .map_err(FileError::at("create", tmp))?;
    file.write_all(body).map_err(FileError::at("write", tmp))?;
    file.set_permissions(fs::Permissions::from_mode(mode))
        .map_err(FileError::at("chmod", tmp))?;
    file.sync_all().map_err(FileError::at("fsync", tmp))
}

/// Makes the renames and removals in `dir` durable.
pub fn sync_dir(dir: &Path) -> Result<(), FileError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(FileError::at("fsync dir", dir))
}

/// The entries of `dir`, sorted by path.
pub fn list(dir: &Path) -> Result<Vec<PathBuf>, FileError> {
    let mut paths = Vec::new();
    for entry in fs::read_dir(dir).map_err(FileError::at("read dir", dir))? {
        paths.push(entry.map_err(FileError::at("read dir", dir))?.path());
    }
    paths.sort();
    Ok(paths)
}

/// Whether `file_name` is a temporary file of [`replace`] for `name` (any
/// name when `name` is `None`).
pub fn is_temp_of(file_name: &str, name: Option<&str>) -> bool {
    file_name.ends_with(TEMP_SUFFIX)
        && match name {
            Some(name) => file_name.starts_with(&format!(".{name}.")),
            None => file_name.starts_with('.'),
        }
}

/// Removes the temporary files (of `name`, or all) that a writer which died
/// mid-[`replace`] left in `dir`. A missing `dir` has none.
pub fn remove_stale_temps(dir: &Path, name: Option<&str>) -> Result<(), FileError> {
    let read = match fs::read_dir(dir) {
        Ok(read) => read,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(FileError::at("read dir", dir)(e)),
    };
    for entry in read {
        let entry = entry.map_err(FileError::at("read dir", dir))?;
        if is_temp_of(&entry.file_name().to_string_lossy(), name) {
            let path = entry.path();
            tracing::debug!(path = %path.display(), "removing a leftover temporary file");
            fs::remove_file(&path).map_err(FileError::at("remove", &path))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn names(dir: &Path) -> Vec<String> {
        let paths = list(dir).unwrap();
        paths
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn replace_writes_the_body_with_the_mode_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        replace(dir.path(), "a.conflist", b"one", 0o644).unwrap();
        replace(dir.path(), "a.conflist", b"two", 0o600).unwrap();
        let path = dir.path().join("a.conflist");
        assert_eq!(fs::read(&path).unwrap(), b"two");
        assert_eq!(
            fs::metadata(&path).unwrap().permissions().mode() & 0o7777,
            0o600
        );
        assert_eq!(names(dir.path()), ["a.conflist"]);
    }

    #[test]
    fn replace_swaps_a_symlink_for_a_file_and_never_writes_through_it() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        fs::write(&victim, b"keep").unwrap();
        symlink(&victim, dir.path().join("link")).unwrap();
        replace(dir.path(), "link", b"new", 0o644).unwrap();
        assert_eq!(fs::read(&victim).unwrap(), b"keep");
        assert!(
            fs::symlink_metadata(dir.path().join("link"))
                .unwrap()
                .is_file()
        );
    }

    #[test]
    fn a_failed_replace_names_the_call_and_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing");
        let err = replace(&missing, "x", b"x", 0o600).unwrap_err();
        assert_eq!(err.call, "create");
        assert!(err.path.starts_with(&missing), "{}", err.path.display());
        assert_eq!(err.source.kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn stale_temporaries_are_removed_by_name_or_all() {
        let dir = tempfile::tempdir().unwrap();
        for file in [
            ".a.1.00ff.sarena-tmp",
            ".b.2.00ff.sarena-tmp",
            "a",
            ".a.keep",
        ] {
            fs::write(dir.path().join(file), b"").unwrap();
        }
        remove_stale_temps(dir.path(), Some("a")).unwrap();
        assert_eq!(names(dir.path()), [".a.keep", ".b.2.00ff.sarena-tmp", "a"]);
        remove_stale_temps(dir.path(), None).unwrap();
        assert_eq!(names(dir.path()), [".a.keep", "a"]);
        remove_stale_temps(&dir.path().join("absent"), None).unwrap();
    }
}
