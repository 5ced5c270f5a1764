//! The durable on-disk deletion queue.
//!
//! When DEL cannot reach the daemon, the attachment is written here and DEL
//! succeeds; later plugin runs (before their own ADD/DEL) and the daemon at
//! start-up [`DeleteQueue::replay`] the entries against the daemon.
//!
//! Layout: one directory, one small JSON file per pending attachment, named after
//! sha256(`containerid:ifname`) so that repeated DELs of the same attachment
//! coalesce into one entry. Entries are written to a temp file, fsync'd, renamed
//! into place and the directory fsync'd, so a reader never sees a partial entry;
//! leftover temp files (a crash mid-write) are ignored and removed on replay.
//! Writers and the replayer serialise on an exclusive lock of `.lock` in the
//! directory, which makes the queue safe under concurrent plugin processes.

use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::api::{ApiErrorKind, Attachment, Daemon};
use crate::digest::attachment_digest;

const LOCK_FILE: &str = ".lock";
const TMP_PREFIX: &str = ".tmp.";
const ENTRY_SUFFIX: &str = ".json";

/// Errors of the deletion queue.
#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    /// A file system operation failed.
    #[error("{op} {}: {source}", .path.display())]
    Io {
        /// What was done, e.g. `rename`.
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// Cause.
        #[source]
        source: io::Error,
    },
    /// The queue holds its maximum number of entries.
    #[error("the deletion queue {} is full ({capacity} entries)", .dir.display())]
    Full {
        /// The queue directory.
        dir: PathBuf,
        /// Its bound.
        capacity: usize,
    },
    /// An entry could not be encoded.
    #[error("cannot encode a queue entry: {0}")]
    Encode(#[from] serde_json::Error),
}

fn io_err<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> QueueError + 'a {
    move |source| QueueError::Io {
        op,
        path: path.to_path_buf(),
        source,
    }
}

/// One queued deletion as stored on disk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Entry {
    container_id: String,
    ifname: String,
    /// Unix time (seconds) when it was first queued.
    queued_at: u64,
}

/// What [`DeleteQueue::replay`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplayReport {
    /// Attachments the daemon deleted (or already did not know); their entries are gone.
    pub done: Vec<Attachment>,
    /// Entries still queued after this replay.
    pub remaining: usize,
    /// True when replay stopped early because the daemon could not be reached.
    pub daemon_unreachable: bool,
    /// True when another process was replaying, so this call did nothing.
    pub busy: bool,
}

/// A durable, bounded queue of deletions the daemon still has to perform.
///
/// ```no_run
/// # async fn demo(daemon: &dyn sarena_core::api::Daemon) -> Result<(), Box<dyn std::error::Error>> {
/// use sarena_core::plugin::DeleteQueue;
/// let queue = DeleteQueue::new(DeleteQueue::DEFAULT_DIR);
/// let report = queue.replay(daemon).await?;
/// println!("replayed {} deletions, {} remain", report.done.len(), report.remaining);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeleteQueue {
    dir: PathBuf,
    capacity: usize,
}

impl DeleteQueue {
    /// Where the queue lives unless the config's `delete-queue-dir` says otherwise.
    pub const DEFAULT_DIR: &'static str = "/var/lib/sarena/delete-queue";
    /// The default bound on pending entries.
    pub const DEFAULT_CAPACITY: usize = 4096;

    /// A queue in `dir` (created on the first enqueue) with the default capacity.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        DeleteQueue {
            dir: dir.into(),
            capacity: Self::DEFAULT_CAPACITY,
        }
    }

    /// Sets the bound on pending entries.
    pub fn with_capacity(mut self, capacity: usize) -> Self {
        self.capacity = capacity;
        self
    }

    /// The queue directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn entry_path(&self, att: &Attachment) -> PathBuf {
        let digest = attachment_digest(&att.container_id, &att.ifname);
        self.dir.join(format!("{digest:x}{ENTRY_SUFFIX}"))
    }

    /// Names of the complete entries (temp files and the lock excluded); an absent
    /// directory is an empty queue.
    fn entry_files(&self) -> Result<Vec<PathBuf>, QueueError> {
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

    /// Opens and exclusively locks the lock file, creating the directory if needed.
    fn lock(&self, wait: bool) -> Result<Option<File>, QueueError> {
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

    fn sync_dir(&self) -> Result<(), QueueError> {
        File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(io_err("fsync directory", &self.dir))
    }

    /// Queues the deletion of `att`, durably. Queuing an attachment that is already
    /// queued is a no-op; a new attachment beyond the capacity is [`QueueError::Full`].
    pub fn enqueue(&self, att: &Attachment) -> Result<(), QueueError> {
        let _lock = self.lock(true)?;
        let path = self.entry_path(att);
        if path.exists() {
            return Ok(());
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
        let tmp = self.dir.join(format!(
            "{TMP_PREFIX}{}.{}",
            std::process::id(),
            rand::random::<u64>()
        ));
        let written = write_synced(&tmp, &body)
            .and_then(|()| fs::rename(&tmp, &path).map_err(io_err("rename", &tmp)));
        if written.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        written?;
        self.sync_dir()?;
        tracing::info!(container_id = %att.container_id, ifname = %att.ifname, "deletion queued");
        Ok(())
    }

    /// True when the deletion of `att` is queued.
    pub fn contains(&self, att: &Attachment) -> bool {
        self.entry_path(att).exists()
    }

    /// True when nothing is queued (one directory read; an absent directory is empty).
    pub fn is_empty(&self) -> Result<bool, QueueError> {
        Ok(self.entry_files()?.is_empty())
    }

    /// The queued attachments. Entries that cannot be read or decoded are skipped.
    pub fn pending(&self) -> Result<Vec<Attachment>, QueueError> {
        Ok(self
            .entry_files()?
            .iter()
            .filter_map(|p| read_entry(p).ok())
            .collect())
    }

    /// Asks the daemon to delete every queued attachment and removes the entries it
    /// has dealt with (`Ok(true)`, `Ok(false)` or "not found"). Stops at the first
    /// failure to reach the daemon, keeping that entry and the rest. Returns at once,
    /// without locking, when the queue is empty; returns `busy` when another process
    /// is replaying. Leftover temp files and undecodable entries are removed.
    pub async fn replay(&self, daemon: &dyn Daemon) -> Result<ReplayReport, QueueError> {
        self.replay_at_most(daemon, usize::MAX).await
    }

    /// [`DeleteQueue::replay`], asking the daemon about at most `max` entries, so that
    /// a plugin run after a long daemon outage is not delayed by the whole backlog
    /// (the daemon replays the rest at start-up, or later runs do).
    pub async fn replay_at_most(
        &self,
        daemon: &dyn Daemon,
        max: usize,
    ) -> Result<ReplayReport, QueueError> {
        let mut report = ReplayReport::default();
        if self.entry_files()?.is_empty() {
            return Ok(report);
        }
        let Some(_lock) = self.lock(false)? else {
            report.busy = true;
            return Ok(report);
        };
        self.remove_temp_files();
        let files = self.entry_files()?;
        let mut removed = false;
        let mut asked = 0;
        for (i, path) in files.iter().enumerate() {
            if asked == max {
                report.remaining += files.len() - i;
                break;
            }
            let att = match read_entry(path) {
                Ok(att) => att,
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "dropping undecodable queue entry");
                    removed |= fs::remove_file(path).is_ok();
                    continue;
                }
            };
            asked += 1;
            match daemon.delete_endpoint(att.clone()).await {
                Err(e) if e.is_transient() => {
                    tracing::info!(error = %e, "daemon unavailable; deletions stay queued");
                    report.daemon_unreachable = true;
                    report.remaining += files.len() - i;
                    break;
                }
                Err(e) if e.kind() != Some(ApiErrorKind::NotFound) => {
                    tracing::warn!(container_id = %att.container_id, ifname = %att.ifname,
                        error = %e, "queued deletion failed; kept");
                    report.remaining += 1;
                }
                _ => {
                    fs::remove_file(path).map_err(io_err("remove", path))?;
                    removed = true;
                    tracing::info!(container_id = %att.container_id, ifname = %att.ifname,
                        "queued deletion done");
                    report.done.push(att);
                }
            }
        }
        if removed {
            self.sync_dir()?;
        }
        Ok(report)
    }

    /// Removes temp files left by a writer that crashed; call with the lock held.
    fn remove_temp_files(&self) {
        let Ok(read) = fs::read_dir(&self.dir) else {
            return;
        };
        for item in read.flatten() {
            if item.file_name().to_string_lossy().starts_with(TMP_PREFIX) {
                tracing::debug!(path = %item.path().display(), "removing leftover temp file");
                let _ = fs::remove_file(item.path());
            }
        }
    }
}

fn write_synced(path: &Path, body: &[u8]) -> Result<(), QueueError> {
    let mut file = OpenOptions::new()
        .create_new(true)
        .write(true)
        .mode(0o600)
        .open(path)
        .map_err(io_err("create", path))?;
    file.write_all(body).map_err(io_err("write", path))?;
    file.sync_all().map_err(io_err("fsync", path))
}

fn read_entry(path: &Path) -> Result<Attachment, QueueError> {
    let body = fs::read(path).map_err(io_err("read", path))?;
    let entry: Entry = serde_json::from_slice(&body)?;
    Ok(Attachment {
        container_id: entry.container_id,
        ifname: entry.ifname,
    })
}

#[cfg(test)]
#[path = "delqueue_tests.rs"]
mod tests;
