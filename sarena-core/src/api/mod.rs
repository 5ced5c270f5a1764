//! The daemon's REST API: request/response types, the [`Daemon`] trait every
//! backend implements (the HTTP client, the in-process node state, mocks), and
//! the errors with their stable machine-readable kinds.

mod daemon;
mod error;
mod types;

pub use daemon::Daemon;
#[cfg(any(test, feature = "mocks"))]
pub use daemon::MockDaemon;
pub use error::{ApiErrorBody, ApiErrorKind, DaemonError};
pub use types::*;

/// The versioned base path every route lives under.
pub const API_BASE: &str = "/v1";
