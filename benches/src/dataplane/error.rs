//! Failures of the dataplane measurements, with the call and the object as
//! fields.

use std::path::PathBuf;

/// A failure while setting up or measuring a dataplane path.
#[derive(Debug, thiserror::Error)]
pub enum DataplaneError {
    /// A file-system, namespace or process call failed.
    #[error("{action} {path}: {source}")]
    Io {
        /// The call (`open netns`, `setns`, `spawn`, ...).
        action: &'static str,
        /// What it was called on.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// A socket call of the request/response test failed.
    #[error("{action} {addr}: {source}")]
    Socket {
        /// The call (`connect`, `read`, ...).
        action: &'static str,
        /// The address it concerned.
        addr: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// A helper program (`ip`, `iperf3`) failed or timed out.
    #[error("`{command}` failed ({status}): {stderr}")]
    Command {
        /// The command line.
        command: String,
        /// Exit status or why it has none.
        status: String,
        /// What it said.
        stderr: String,
    },
    /// Output the benchmark reads was not what it expected.
    #[error("{what}: {detail}")]
    Parse {
        /// What was being read.
        what: &'static str,
        /// What was wrong.
        detail: String,
    },
    /// A measurement thread panicked.
    #[error("the {what} thread panicked")]
    ThreadPanicked {
        /// Which thread.
        what: &'static str,
    },
    /// A path did not carry traffic the way it should.
    #[error("path {path}: {what}")]
    Verify {
        /// The path's name.
        path: String,
        /// What was found.
        what: String,
    },
    /// The options make no sense.
    #[error("dataplane options: {0}")]
    Options(String),
}

impl From<DataplaneError> for crate::node::BenchError {
    fn from(e: DataplaneError) -> Self {
        use crate::node::BenchError;
        match e {
            DataplaneError::Io {
                action,
                path,
                source,
            } => BenchError::Io {
                call: action,
                path,
                source,
            },
            DataplaneError::Socket {
                action,
                addr,
                source,
            } => BenchError::Io {
                call: action,
                path: addr.into(),
                source,
            },
            DataplaneError::Command {
                command,
                status,
                stderr,
            } => BenchError::Command {
                command,
                status,
                stderr,
            },
            DataplaneError::Options(what) => BenchError::Input { what },
            other @ (DataplaneError::Parse { .. }
            | DataplaneError::ThreadPanicked { .. }
            | DataplaneError::Verify { .. }) => BenchError::Verify {
                what: other.to_string(),
            },
        }
    }
}
