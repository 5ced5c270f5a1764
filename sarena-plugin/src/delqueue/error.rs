//! [`QueueError`]: what can go wrong with the deletion queue.

use std::io;
use std::path::{Path, PathBuf};

/// Errors of the deletion queue.
#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    /// A file system operation failed.
    #[error("{op} {}", .path.display())]
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
    #[error("cannot encode a queue entry")]
    Encode(#[from] serde_json::Error),
    /// Queue I/O handed to tokio's blocking pool did not complete (it panicked,
    /// or the runtime shut down before it ran).
    #[error("the deletion queue's blocking task did not complete")]
    Task {
        /// Cause.
        #[source]
        source: tokio::task::JoinError,
    },
}

impl From<crate::durable::FileError> for QueueError {
    fn from(e: crate::durable::FileError) -> Self {
        QueueError::Io {
            op: e.call,
            path: e.path,
            source: e.source,
        }
    }
}

/// Wraps an `io::Error` of `op` on `path`.
pub(super) fn io_err<'a>(
    op: &'static str,
    path: &'a Path,
) -> impl FnOnce(io::Error) -> QueueError + 'a {
    move |source| QueueError::Io {
        op,
        path: path.to_path_buf(),
        source,
    }
}
