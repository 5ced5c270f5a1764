//! Daemon API errors: [`DaemonError`], and the one mapping from an error to
//! the answer the daemon serves for it ([`DaemonError::to_body`]).

use serde::{Deserialize, Serialize};

/// The stable, machine-readable kind of an API error (`"kind"` in error bodies).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApiErrorKind {
    /// Malformed or invalid request (400).
    BadRequest,
    /// No such route, endpoint or allocation (404).
    NotFound,
    /// Conflicts with existing state, e.g. an address owned by someone else (409).
    Conflict,
    /// No free address in the pool (409).
    PoolExhausted,
    /// Body too large (413).
    PayloadTooLarge,
    /// Wrong method (405).
    MethodNotAllowed,
    /// A TCP request without the daemon's token, or with a wrong one (401).
    Unauthorized,
    /// The daemon cannot serve now (503).
    Unavailable,
    /// Anything else (500).
    Internal,
}

impl ApiErrorKind {
    /// The kind as it appears in error bodies (`pool_exhausted`).
    pub fn as_str(self) -> &'static str {
        match self {
            ApiErrorKind::BadRequest => "bad_request",
            ApiErrorKind::NotFound => "not_found",
            ApiErrorKind::Conflict => "conflict",
            ApiErrorKind::PoolExhausted => "pool_exhausted",
            ApiErrorKind::PayloadTooLarge => "payload_too_large",
            ApiErrorKind::MethodNotAllowed => "method_not_allowed",
            ApiErrorKind::Unauthorized => "unauthorized",
            ApiErrorKind::Unavailable => "unavailable",
            ApiErrorKind::Internal => "internal",
        }
    }

    /// The HTTP status this kind is served with.
    pub fn status(self) -> u16 {
        match self {
            ApiErrorKind::BadRequest => 400,
            ApiErrorKind::Unauthorized => 401,
            ApiErrorKind::NotFound => 404,
            ApiErrorKind::MethodNotAllowed => 405,
            ApiErrorKind::Conflict | ApiErrorKind::PoolExhausted => 409,
            ApiErrorKind::PayloadTooLarge => 413,
            ApiErrorKind::Unavailable => 503,
            ApiErrorKind::Internal => 500,
        }
    }
}

/// The JSON body of an API error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiErrorBody {
    /// Stable kind.
    pub kind: ApiErrorKind,
    /// Human-readable message.
    pub message: String,
}

/// Errors from any [`crate::api::Daemon`] backend.
///
/// Over the wire a refusal arrives as [`DaemonError::Api`]; in process a
/// backend (the node state, the dataplane) keeps its own typed error as the
/// source of a [`DaemonError::Local`]. Either way [`DaemonError::kind`] gives
/// the same kind and [`error_chain`](crate::error_chain) gives the same text.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// The daemon answered with an error.
    #[error("daemon: {kind:?}: {message}")]
    Api {
        /// Stable kind.
        kind: ApiErrorKind,
        /// Message.
        message: String,
    },
    /// An in-process backend (the node state, the dataplane) refused or
    /// failed the request: the kind it is answered with, and the backend's
    /// own error (e.g. `node::NodeError`), reachable with
    /// [`DaemonError::local_source`].
    #[error("daemon: {kind:?}")]
    Local {
        /// The kind the daemon answers with.
        kind: ApiErrorKind,
        /// The backend's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The daemon could not be reached at all (connect failed, socket missing).
    #[error("cannot reach the daemon at {endpoint}")]
    Unreachable {
        /// The endpoint tried.
        endpoint: String,
        /// Cause.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The connection broke or timed out mid-request.
    #[error("request {method} {path} to the daemon failed")]
    Transport {
        /// HTTP method.
        method: String,
        /// Path.
        path: String,
        /// Cause.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The daemon's answer could not be decoded.
    #[error("cannot decode the daemon's answer to {path}")]
    Decode {
        /// Path.
        path: String,
        /// Cause.
        #[source]
        source: serde_json::Error,
    },
    /// The endpoint string is not a socket path, `unix://` or `http://` URL.
    #[error("invalid daemon endpoint {endpoint:?}: {reason}")]
    InvalidEndpoint {
        /// What was given.
        endpoint: String,
        /// Why it is invalid.
        reason: String,
    },
    /// The token file for a TCP endpoint cannot be read, or holds no usable
    /// token.
    #[error("daemon token file {path}")]
    TokenFile {
        /// The file.
        path: std::path::PathBuf,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
}

impl DaemonError {
    /// An API error of the given kind.
    pub fn api(kind: ApiErrorKind, message: impl Into<String>) -> Self {
        DaemonError::Api {
            kind,
            message: message.into(),
        }
    }

    /// An in-process backend's error `source`, answered as `kind`.
    pub fn local(
        kind: ApiErrorKind,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        DaemonError::Local {
            kind,
            source: Box::new(source),
        }
    }

    /// The in-process backend's error, when it is an `E`.
    pub fn local_source<E: std::error::Error + 'static>(&self) -> Option<&E> {
        match self {
            DaemonError::Local { source, .. } => source.downcast_ref::<E>(),
            _ => None,
        }
    }

    /// The kind, for errors the daemon answers with: API errors and the
    /// in-process backends' errors. `None` when no answer came
    /// (unreachable, transport, decoding, a bad endpoint).
    pub fn kind(&self) -> Option<ApiErrorKind> {
        match self {
            DaemonError::Api { kind, .. } => Some(*kind),
            DaemonError::Local { kind, .. } => Some(*kind),
            DaemonError::Unreachable { .. }
            | DaemonError::Transport { .. }
            | DaemonError::Decode { .. }
            | DaemonError::InvalidEndpoint { .. }
            | DaemonError::TokenFile { .. } => None,
        }
    }

    /// The answer a daemon serves for this error (its HTTP status is
    /// `kind.status()`): the error's own kind and message (with every cause,
    /// by [`error_chain`](crate::error_chain)), `unavailable` for a backend that cannot be
    /// reached, `internal` for anything else.
    pub fn to_body(&self) -> ApiErrorBody {
        let (kind, message) = match self {
            DaemonError::Api { kind, message } => (*kind, message.clone()),
            DaemonError::Local { kind, source } => (*kind, crate::error_chain(source.as_ref())),
            DaemonError::Unreachable { .. } => {
                (ApiErrorKind::Unavailable, crate::error_chain(self))
            }
            DaemonError::Transport { .. }
            | DaemonError::Decode { .. }
            | DaemonError::InvalidEndpoint { .. }
            | DaemonError::TokenFile { .. } => (ApiErrorKind::Internal, crate::error_chain(self)),
        };
        ApiErrorBody { kind, message }
    }

    /// True when the daemon was never reached: the request had no effect.
    pub fn is_unreachable(&self) -> bool {
        matches!(self, DaemonError::Unreachable { .. })
    }

    /// True for failures worth retrying later: the daemon was not reached, the
    /// request broke or timed out, or the daemon said it cannot serve now.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            DaemonError::Unreachable { .. } | DaemonError::Transport { .. }
        ) || self.kind() == Some(ApiErrorKind::Unavailable)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn as_str_is_the_wire_name() {
        use ApiErrorKind::*;
        for kind in [
            BadRequest,
            NotFound,
            Conflict,
            PoolExhausted,
            PayloadTooLarge,
            MethodNotAllowed,
            Unauthorized,
            Unavailable,
            Internal,
        ] {
            let wire = serde_json::to_value(kind).unwrap();
            assert_eq!(wire.as_str(), Some(kind.as_str()));
        }
    }
}
