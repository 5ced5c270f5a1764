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
//!
//! The file I/O blocks. [`DeleteQueue::replay`] and the crate's own async
//! callers run it on tokio's blocking pool; the other public methods block
//! the calling thread.

mod error;
mod files;
mod replay;

use std::path::{Path, PathBuf};

use crate::api::Attachment;
use crate::blocking::off_worker;

pub use error::QueueError;
pub use replay::ReplayReport;

/// A durable, bounded queue of deletions the daemon still has to perform.
///
/// ```no_run
/// # async fn demo(daemon: &dyn sarena_plugin::api::Daemon) -> Result<(), Box<dyn std::error::Error>> {
/// use sarena_plugin::delqueue::DeleteQueue;
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

    /// Queues the deletion of `att`, durably. Queuing an attachment that is already
    /// queued is a no-op; a new attachment beyond the capacity is [`QueueError::Full`].
    /// Blocks on file I/O and fsync: from async code, call it through
    /// `tokio::task::spawn_blocking`.
    pub fn enqueue(&self, att: &Attachment) -> Result<(), QueueError> {
        if self.write_entry(att)? {
            tracing::info!(container_id = %att.container_id, ifname = %att.ifname, "deletion queued");
        }
        Ok(())
    }

    /// True when the deletion of `att` is queued. Blocks on a file lookup.
    pub fn contains(&self, att: &Attachment) -> bool {
        self.entry_path(att).exists()
    }

    /// True when nothing is queued (one directory read; an absent directory is
    /// empty). Blocks on the directory read.
    pub fn is_empty(&self) -> Result<bool, QueueError> {
        Ok(self.entry_files()?.is_empty())
    }

    /// The queued attachments. Entries that cannot be read or decoded are
    /// skipped. Blocks on file I/O.
    pub fn pending(&self) -> Result<Vec<Attachment>, QueueError> {
        Ok(self
            .entry_files()?
            .iter()
            .filter_map(|p| files::read_entry(p).ok())
            .collect())
    }

    /// [`DeleteQueue::enqueue`] off the async workers.
    pub(crate) async fn enqueue_off_worker(&self, att: &Attachment) -> Result<(), QueueError> {
        let (queue, att) = (self.clone(), att.clone());
        self.blocking(move || queue.enqueue(&att)).await?
    }

    /// [`DeleteQueue::contains`] off the async workers; like it, `false` when it
    /// cannot tell.
    pub(crate) async fn contains_off_worker(&self, att: &Attachment) -> bool {
        let (queue, att) = (self.clone(), att.clone());
        match self.blocking(move || queue.contains(&att)).await {
            Ok(queued) => queued,
            Err(e) => {
                tracing::warn!(error = %crate::error_chain(&e), "cannot look into the deletion queue");
                false
            }
        }
    }

    /// Runs blocking queue work off the async workers (see [`off_worker`]).
    async fn blocking<T, F>(&self, f: F) -> Result<T, QueueError>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        off_worker(f)
            .await
            .map_err(|source| QueueError::Task { source })
    }
}

#[cfg(test)]
mod tests;
