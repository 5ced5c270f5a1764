//! One daemon per state directory and per bpffs pin directory: both are
//! locked exclusively (`flock`) for the daemon's whole life, before anything
//! in them is opened, so a second daemon on either fails at once with a
//! message saying why, instead of two daemons handing out the same addresses
//! or fighting over the same maps. The kernel drops a lock when its holder
//! dies, even by SIGKILL, so a restart never finds a stale one.
//!
//! The state directory's lock is `daemon.lock` in it (holding the holder's
//! pid, for the message); bpffs takes no regular files, so the pin
//! directory itself is locked.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The lock file in the state directory.
pub const STATE_LOCK: &str = sarena_core::store::LOCK_FILE;

/// Why a directory could not be locked.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another process holds it: most likely another daemon.
    #[error("another sarena-daemon{} is already using the {what} {path}; stop it first, or give this one its own", holder.map(|p| format!(" (pid {p})")).unwrap_or_default())]
    Held {
        /// `state dir` or `bpffs pin dir`.
        what: &'static str,
        /// The directory.
        path: PathBuf,
        /// The holder's pid, when it recorded one.
        holder: Option<u32>,
    },
    /// The directory or its lock could not be created or locked.
    #[error("cannot lock the {what} {path}: {call}")]
    Io {
        /// `state dir` or `bpffs pin dir`.
        what: &'static str,
        /// What failed.
        call: &'static str,
        /// The path it was called on.
        path: PathBuf,
        /// Cause.
        #[source]
        source: io::Error,
    },
}

/// The locks a running daemon holds; dropping them releases them.
#[derive(Debug)]
pub struct DirLocks {
    _state: Option<File>,
    _pins: Option<File>,
}

/// Locks `state_dir` and, when the dataplane uses one, `pin_dir` (both
/// created if missing).
pub fn lock_dirs(state_dir: &Path, pin_dir: Option<&Path>) -> Result<DirLocks, LockError> {
    let state = lock_state_dir(state_dir)?;
    let pins = pin_dir.map(lock_pin_dir).transpose()?;
    Ok(DirLocks {
        _state: Some(state),
        _pins: pins,
    })
}

/// Locks `state_dir` and `pin_dir` like [`lock_dirs`], but creates
/// neither: a missing directory has nothing to lock (the uninstall, which
/// must not put back what it removes). [`LockError::Held`] while a daemon
/// runs on either.
pub fn lock_existing(state_dir: &Path, pin_dir: &Path) -> Result<DirLocks, LockError> {
    let state = if is_dir(STATE_WHAT, state_dir)? {
        Some(lock_state_file(state_dir)?)
    } else {
        None
    };
    let pins = if is_dir(PINS_WHAT, pin_dir)? {
        Some(lock_open_pin_dir(pin_dir)?)
    } else {
        None
    };
    Ok(DirLocks {
        _state: state,
        _pins: pins,
    })
}

const STATE_WHAT: &str = "state dir";
const PINS_WHAT: &str = "bpffs pin dir";

/// Whether `dir` exists as a directory.
fn is_dir(what: &'static str, dir: &Path) -> Result<bool, LockError> {
    match fs::metadata(dir) {
        Ok(meta) => Ok(meta.is_dir()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(io_error(what, "stat", dir)(e)),
    }
}

fn io_error(
    what: &'static str,
    call: &'static str,
    path: &Path,
) -> impl FnOnce(io::Error) -> LockError + use<> {
    let path = path.to_owned();
    move |source| LockError::Io {
        what,
        call,
        path,
        source,
    }
}

fn create_dir(what: &'static str, dir: &Path, mode: u32) -> Result<(), LockError> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(mode)
        .create(dir)
        .map_err(io_error(what, "create directory", dir))
}

/// `flock(LOCK_EX | LOCK_NB)` on `file`: `Ok(false)` when someone holds it.
fn try_lock(file: &File, what: &'static str, path: &Path) -> Result<bool, LockError> {
    match file.try_lock() {
        Ok(()) => Ok(true),
        Err(fs::TryLockError::WouldBlock) => Ok(false),
        Err(fs::TryLockError::Error(e)) => Err(io_error(what, "flock", path)(e)),
    }
}

fn lock_state_dir(dir: &Path) -> Result<File, LockError> {
    create_dir(STATE_WHAT, dir, 0o700)?;
    lock_state_file(dir)
}

/// Locks the existing `dir`'s lock file (created in it when missing).
fn lock_state_file(dir: &Path) -> Result<File, LockError> {
    const WHAT: &str = STATE_WHAT;
    let path = dir.join(STATE_LOCK);
    let mut file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .mode(0o600)
        .open(&path)
        .map_err(io_error(WHAT, "open", &path))?;
    if !try_lock(&file, WHAT, &path)? {
        let mut text = String::new();
        let holder = file
            .read_to_string(&mut text)
            .ok()
            .and_then(|_| text.trim().parse().ok());
        return Err(LockError::Held {
            what: WHAT,
            path: dir.to_owned(),
            holder,
        });
    }
    let record = |file: &mut File| -> io::Result<()> {
        file.set_len(0)?;
        file.rewind()?;
        writeln!(file, "{}", std::process::id())
    };
    record(&mut file).map_err(io_error(WHAT, "write", &path))?;
    Ok(file)
}

fn lock_pin_dir(dir: &Path) -> Result<File, LockError> {
    create_dir(PINS_WHAT, dir, 0o700)?;
    lock_open_pin_dir(dir)
}

/// Locks the existing pin directory itself.
fn lock_open_pin_dir(dir: &Path) -> Result<File, LockError> {
    const WHAT: &str = PINS_WHAT;
    let file = File::open(dir).map_err(io_error(WHAT, "open", dir))?;
    if !try_lock(&file, WHAT, dir)? {
        return Err(LockError::Held {
            what: WHAT,
            path: dir.to_owned(),
            holder: None,
        });
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_of_either_directory_is_refused_with_the_first_ones_pid() {
        let dir = tempfile::tempdir().unwrap();
        let (state, pins) = (dir.path().join("state"), dir.path().join("pins"));
        let held = lock_dirs(&state, Some(&pins)).unwrap();
        let text = fs::read_to_string(state.join(STATE_LOCK)).unwrap();
        assert_eq!(text.trim(), std::process::id().to_string());

        let err = lock_dirs(&state, None).unwrap_err();
        let LockError::Held { what, holder, .. } = &err else {
            panic!("{err}")
        };
        assert_eq!((*what, *holder), ("state dir", Some(std::process::id())));
        assert!(
            err.to_string().contains("already using the state dir"),
            "{err}"
        );

        let other = dir.path().join("other-state");
        let err = lock_dirs(&other, Some(&pins)).unwrap_err();
        assert!(
            matches!(
                err,
                LockError::Held {
                    what: "bpffs pin dir",
                    holder: None,
                    ..
                }
            ),
            "{err}"
        );
        // Refusals leave the holder's pid in place; a release frees both.
        assert_eq!(fs::read_to_string(state.join(STATE_LOCK)).unwrap(), text);
        drop(held);
        lock_dirs(&state, Some(&pins)).unwrap();
    }

    #[test]
    fn lock_existing_creates_nothing_and_is_refused_while_a_daemon_holds_either() {
        let dir = tempfile::tempdir().unwrap();
        let (state, pins) = (dir.path().join("state"), dir.path().join("pins"));
        drop(lock_existing(&state, &pins).unwrap());
        assert!(!state.exists() && !pins.exists(), "nothing created");

        let daemon = lock_dirs(&state, Some(&pins)).unwrap();
        let err = lock_existing(&state, &pins).unwrap_err();
        assert!(
            matches!(
                err,
                LockError::Held {
                    what: "state dir",
                    ..
                }
            ),
            "{err}"
        );
        assert!(err.to_string().contains("stop it first"), "{err}");
        drop(daemon);

        let daemon = lock_dirs(&dir.path().join("other"), Some(&pins)).unwrap();
        let err = lock_existing(&state, &pins).unwrap_err();
        assert!(
            matches!(
                err,
                LockError::Held {
                    what: "bpffs pin dir",
                    ..
                }
            ),
            "{err}"
        );
        drop(daemon);

        let held = lock_existing(&state, &pins).unwrap();
        assert!(lock_dirs(&state, None).is_err(), "the uninstall holds it");
        drop(held);
    }

    #[test]
    fn an_uncreatable_directory_is_an_io_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("file");
        fs::write(&file, b"").unwrap();
        let err = lock_dirs(&file.join("state"), None).unwrap_err();
        assert!(
            matches!(
                err,
                LockError::Io {
                    call: "create directory",
                    ..
                }
            ),
            "{err}"
        );
    }
}
