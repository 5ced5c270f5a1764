//! [`DeleteQueue::replay`]: asks the daemon to perform the queued deletions.

use std::fs::{self, File};
use std::path::PathBuf;

use crate::api::{ApiErrorKind, Attachment, Daemon};

use super::DeleteQueue;
use super::error::{QueueError, io_err};
use super::files::read_entry;

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

/// How a replay starts.
enum Start {
    /// Nothing queued: no lock taken, nothing created.
    Empty,
    /// Another process holds the lock.
    Busy,
    /// The lock (held until the replay ends) and the entries to replay.
    Locked { lock: File, files: Vec<PathBuf> },
}

impl DeleteQueue {
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
        let queue = self.clone();
        let (lock, files) = match self.blocking(move || queue.start_replay()).await?? {
            Start::Empty => return Ok(report),
            Start::Busy => {
                report.busy = true;
                return Ok(report);
            }
            Start::Locked { lock, files } => (lock, files),
        };
        let mut removed = false;
        let mut asked = 0;
        for (i, path) in files.iter().enumerate() {
            if asked == max {
                report.remaining += files.len() - i;
                break;
            }
            let entry = path.clone();
            let att = match self.blocking(move || read_entry(&entry)).await? {
                Ok(att) => att,
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %crate::error_chain(&e), "dropping undecodable queue entry");
                    let entry = path.clone();
                    removed |= self
                        .blocking(move || fs::remove_file(&entry).is_ok())
                        .await?;
                    continue;
                }
            };
            asked += 1;
            match daemon.delete_endpoint(att.clone()).await {
                Err(e) if e.is_transient() => {
                    tracing::info!(error = %crate::error_chain(&e), "daemon unavailable; deletions stay queued");
                    report.daemon_unreachable = true;
                    report.remaining += files.len() - i;
                    break;
                }
                Err(e) if e.kind() != Some(ApiErrorKind::NotFound) => {
                    tracing::warn!(container_id = %att.container_id, ifname = %att.ifname,
                        error = %crate::error_chain(&e), "queued deletion failed; kept");
                    report.remaining += 1;
                }
                _ => {
                    let entry = path.clone();
                    self.blocking(move || fs::remove_file(&entry))
                        .await?
                        .map_err(io_err("remove", path))?;
                    removed = true;
                    tracing::info!(container_id = %att.container_id, ifname = %att.ifname,
                        "queued deletion done");
                    report.done.push(att);
                }
            }
        }
        let queue = self.clone();
        self.blocking(move || {
            let synced = if removed { queue.sync_dir() } else { Ok(()) };
            drop(lock);
            synced
        })
        .await??;
        Ok(report)
    }

    /// Takes the lock without waiting and lists the entries, after removing
    /// leftover temp files; an empty queue is left alone.
    fn start_replay(&self) -> Result<Start, QueueError> {
        if self.entry_files()?.is_empty() {
            return Ok(Start::Empty);
        }
        let Some(lock) = self.lock(false)? else {
            return Ok(Start::Busy);
        };
        self.remove_temp_files();
        Ok(Start::Locked {
            lock,
            files: self.entry_files()?,
        })
    }
}
