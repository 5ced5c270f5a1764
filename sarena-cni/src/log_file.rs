//! Opening the plugin's `log-file`. The plugin runs as root on every pod
//! start and stop, so the file is opened with care:
//! - never through a symbolic link (`O_NOFOLLOW`): a link at the path is
//!   refused, so whoever can write to the log's directory cannot make root
//!   append to (or create) another file;
//! - only a regular file of this process's user with a single name (no FIFO
//!   or device, no hard link to another file); `O_NONBLOCK`, so a FIFO
//!   cannot hang the open;
//! - created mode 0600 whatever the umask; an existing file's mode is
//!   narrowed to at most 0600, never widened;
//! - past its size limit, renamed to `<log-file>.1` (the one backup,
//!   replaced: `rename` never follows a link at the backup's name) and
//!   opened afresh. Concurrent invocations serialise the rotation on the
//!   file being rotated (`flock`): only the one that still finds that file
//!   at the path renames it; the others reopen whatever is there now.
//!
//! Logging is on only when the config names a `log-file`; without one, none
//! of this runs.

use std::ffi::OsString;
use std::fs::{File, Metadata, OpenOptions, Permissions};
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Opens tried before giving up when other invocations keep rotating the
/// file under this one (one rotation needs two).
const ATTEMPTS: usize = 4;

/// Why the log file is not used (the plugin then logs to stderr).
#[derive(Debug, thiserror::Error)]
pub(crate) enum LogFileError {
    /// A symbolic link is at the path.
    #[error(
        "log-file {path} is a symbolic link: refused (the plugin runs as root and would write wherever it points)"
    )]
    Symlink {
        /// The configured path.
        path: PathBuf,
    },
    /// The path could not be opened or inspected.
    #[error("cannot open log-file {path}")]
    Open {
        /// The configured path.
        path: PathBuf,
        /// Cause.
        #[source]
        source: io::Error,
    },
    /// Something other than a regular file is at the path.
    #[error("log-file {path} is not a regular file")]
    NotRegular {
        /// The configured path.
        path: PathBuf,
    },
    /// The file belongs to another user, who controls what it holds.
    #[error("log-file {path} belongs to uid {owner}, not to this process's uid {euid}")]
    Owner {
        /// The configured path.
        path: PathBuf,
        /// Its owner.
        owner: u32,
        /// This process's effective uid.
        euid: u32,
    },
    /// The file has other names: one may be a file it must not touch.
    #[error("log-file {path} has {links} hard links: refused")]
    HardLinks {
        /// The configured path.
        path: PathBuf,
        /// Its link count.
        links: u64,
    },
    /// The mode could not be narrowed.
    #[error("cannot narrow log-file {path} to mode 0600")]
    Chmod {
        /// The configured path.
        path: PathBuf,
        /// Cause.
        #[source]
        source: io::Error,
    },
    /// The rotation failed.
    #[error("cannot rotate log-file {path} to {backup}")]
    Rotate {
        /// The configured path.
        path: PathBuf,
        /// The backup's path.
        backup: PathBuf,
        /// Cause.
        #[source]
        source: io::Error,
    },
    /// Other invocations rotated the file under this one every time.
    #[error("log-file {path} is over its size limit after {ATTEMPTS} attempts to rotate it")]
    Raced {
        /// The configured path.
        path: PathBuf,
    },
}

/// Opens `path` for appending as the [module docs](self) say, rotating it
/// first when it holds `max_bytes` or more.
pub(crate) fn open(path: &Path, max_bytes: u64) -> Result<File, LogFileError> {
    for _ in 0..ATTEMPTS {
        let (file, meta) = open_checked(path)?;
        if meta.len() < max_bytes {
            return Ok(file);
        }
        rotate(path, &file, &meta)?;
    }
    Err(LogFileError::Raced {
        path: path.to_owned(),
    })
}

/// `<path>.1`.
pub(crate) fn backup_of(path: &Path) -> PathBuf {
    let mut name = OsString::from(path.as_os_str());
    name.push(".1");
    PathBuf::from(name)
}

/// Opens (creating) `path` without following a link, and checks what it got.
fn open_checked(path: &Path) -> Result<(File, Metadata), LogFileError> {
    let opened = OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path);
    let file = opened.map_err(|source| match source.raw_os_error() {
        Some(libc::ELOOP) => LogFileError::Symlink {
            path: path.to_owned(),
        },
        _ => LogFileError::Open {
            path: path.to_owned(),
            source,
        },
    })?;
    let meta = file.metadata().map_err(|source| LogFileError::Open {
        path: path.to_owned(),
        source,
    })?;
    if !meta.file_type().is_file() {
        return Err(LogFileError::NotRegular {
            path: path.to_owned(),
        });
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    if meta.uid() != euid {
        let owner = meta.uid();
        let path = path.to_owned();
        return Err(LogFileError::Owner { path, owner, euid });
    }
    if meta.nlink() > 1 {
        let links = meta.nlink();
        let path = path.to_owned();
        return Err(LogFileError::HardLinks { path, links });
    }
    let mode = meta.mode() & 0o7777;
    if mode & !0o600 != 0 {
        let narrowed = Permissions::from_mode(mode & 0o600);
        file.set_permissions(narrowed)
            .map_err(|source| LogFileError::Chmod {
                path: path.to_owned(),
                source,
            })?;
    }
    Ok((file, meta))
}

/// Renames `file` (open at `path`, as `meta` describes it) to the backup,
/// unless another invocation already did; the caller then reopens `path`.
fn rotate(path: &Path, file: &File, meta: &Metadata) -> Result<(), LogFileError> {
    let backup = backup_of(path);
    let failed = |source| LogFileError::Rotate {
        path: path.to_owned(),
        backup: backup_of(path),
        source,
    };
    // Held until `file` is closed: every rotator of this file waits here.
    file.lock().map_err(failed)?;
    let still_there = std::fs::symlink_metadata(path)
        .is_ok_and(|now| now.dev() == meta.dev() && now.ino() == meta.ino());
    if still_there {
        std::fs::rename(path, &backup).map_err(failed)?;
    }
    Ok(())
}
