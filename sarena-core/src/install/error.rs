//! [`InstallError`]: what can go wrong installing the plugin and its config.

use std::io;
use std::path::{Path, PathBuf};

/// Errors of [`super::Installer`].
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    /// A file system call failed.
    #[error("{call} {}", .path.display())]
    Io {
        /// The call, e.g. `rename`.
        call: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// Cause.
        #[source]
        source: io::Error,
    },
    /// The conflist to write is not one Sarena can be called through.
    #[error("conflist for {}: {reason}", .path.display())]
    Conflist {
        /// Where it was to go.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The file under Sarena's conflist name is another network's config:
    /// left alone.
    #[error("{} is not Sarena's network config ({reason}); left in place", .path.display())]
    NotSarenas {
        /// The file.
        path: PathBuf,
        /// Why it is not Sarena's.
        reason: String,
    },
    /// A conflist name libcni would not load.
    #[error(
        "conflist name {name:?}: a file name ending in .conf, .conflist or .json, not starting with a dot"
    )]
    ConflistName {
        /// The name given.
        name: String,
    },
}

impl From<sarena_plugin::durable::FileError> for InstallError {
    fn from(e: sarena_plugin::durable::FileError) -> Self {
        InstallError::Io {
            call: e.call,
            path: e.path,
            source: e.source,
        }
    }
}

impl InstallError {
    /// An [`InstallError::Io`] of `call` on `path`.
    pub(super) fn io(call: &'static str, path: &Path, source: io::Error) -> Self {
        InstallError::Io {
            call,
            path: path.to_path_buf(),
            source,
        }
    }
}
