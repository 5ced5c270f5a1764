//! The queue directory's files: one JSON entry per pending attachment, named
//! after the attachment digest, temp files of writers in progress, and `.lock`.
//! Everything here blocks (file I/O, fsync, flock).

use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::api::Attachment;
use crate::digest::attachment_digest;
use crate::durable;

use super::DeleteQueue;
use super::error::{QueueError, io_err};

pub(super) const LOCK_FILE: &str = ".lock";
pub(super) const ENTRY_SUFFIX: &str = ".json";
/// The temporary files of releases before [`durable`] (`.tmp.PID.RANDOM`),
/// still cleaned after an upgrade.
pub(super) const LEGACY_TMP_PREFIX: &str = ".tmp.";

/// One queued deletion as stored on disk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Entry {
    container_id: String,
    ifname: String,
    /// Unix time (seconds) when it was first queued.
    queued_at: u64,
}

impl DeleteQueue {
    /// The entry file of `att`: sha256(`containerid:ifname`) in hex + `.json`.
    pub(super) fn entry_path(&self, att: &Attachment) -> PathBuf {
        let digest = attachment_digest(&att.container_id, &att.ifname);
        self.dir.join(format!("{digest:x}{ENTRY_SUFFIX}"))
    }

    /// Names of the complete entries (temp files and the lock excluded), sorted;
    /// an absent directory is an empty queue.
    pub(super) fn entry_files(&self) -> Result<Vec<PathBuf>, QueueError> {
        let read = match fs::read_dir(&self.dir) {
            Ok(read) => read,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io_err("read directory", &self.dir)(e)),
        };
        let mut files = Vec::new();
        for item in read {
            let item = item.map_err(io_err("read directory", &self.dir))?;
            let name = item.file_name();
            let name = name.to_string_lossy();
            if !name.starts_with('.') && name.ends_with(ENTRY_SUFFIX) {
                files.push(item.path());
            }
        }
        files.sort();
        Ok(files)
    }

    /// Opens and exclusively locks the lock file, creating the directory if
    /// needed. Without `wait`, `Ok(None)` when another holder has it.
    pub(super) fn lock(&self, wait: bool) -> Result<Option<File>, QueueError> {
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)
            .map_err(io_err("create directory", &self.dir))?;
        let path = self.dir.join(LOCK_FILE);
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(&path)
            .map_err(io_err("open", &path))?;
        if wait {
            file.lock().map_err(io_err("lock", &path))?;
            return Ok(Some(file));
        }
        match file.try_lock() {
            Ok(()) => Ok(Some(file)),
            Err(fs::TryLockError::WouldBlock) => Ok(None),
            Err(fs::TryLockError::Error(e)) => Err(io_err("lock", &path)(e)),
        }
    }

    /// Makes renames and removals in the directory durable.
    pub(super) fn sync_dir(&self) -> Result<(), QueueError> {
        Ok(durable::sync_dir(&self.dir)?)
    }

    /// Writes the entry of `att` durably (temp file, fsync, rename, directory
    /// fsync) under the lock. `Ok(false)`: it was already queued.
    pub(super) fn write_entry(&self, att: &Attachment) -> Result<bool, QueueError> {
        let _lock = self.lock(true)?;
        let path = self.entry_path(att);
        if path.exists() {
            return Ok(false);
        }
        if self.entry_files()?.len() >= self.capacity {
            return Err(QueueError::Full {
                dir: self.dir.clone(),
                capacity: self.capacity,
            });
        }
        let entry = Entry {
            container_id: att.container_id.clone(),
            ifname: att.ifname.clone(),
            queued_at: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
        };
        let body = serde_json::to_vec(&entry)?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        durable::replace(&self.dir, &name, &body, 0o600)?;
        Ok(true)
    }

    /// Removes temp files left by a writer that crashed; call with the lock held.
    pub(super) fn remove_temp_files(&self) {
        let Ok(read) = fs::read_dir(&self.dir) else {
            return;
        };
        for item in read.flatten() {
            let name = item.file_name();
            let name = name.to_string_lossy();
            if durable::is_temp_of(&name, None) || name.starts_with(LEGACY_TMP_PREFIX) {
                tracing::debug!(path = %item.path().display(), "removing leftover temp file");
                let _ = fs::remove_file(item.path());
            }
        }
    }
}

/// Reads and decodes one entry file.
pub(super) fn read_entry(path: &Path) -> Result<Attachment, QueueError> {
    let body = fs::read(path).map_err(io_err("read", path))?;
    let entry: Entry = serde_json::from_slice(&body)?;
    Ok(Attachment {
        container_id: entry.container_id,
        ifname: entry.ifname,
    })
}
