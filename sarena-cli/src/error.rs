//! [`CliError`]: what `sarena` prints when a command fails, in one line
//! that says what to check.

use sarena_core::api::{ApiErrorKind, DaemonError};
use sarena_core::error_chain;

/// Why a command failed.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// Nothing answers on the socket.
    #[error(
        "cannot reach sarena-daemon at {socket} ({reason}): is the daemon running (its log, `systemctl status sarena-daemon`)? is --socket (or SARENA_SOCKET) its --socket? are you root (the socket is mode 0600)?"
    )]
    DaemonDown {
        /// The socket tried.
        socket: String,
        /// The innermost cause, e.g. "No such file or directory".
        reason: String,
    },
    /// The daemon was reached but did not answer in time, or broke off.
    #[error("sarena-daemon at {socket} did not answer ({reason}); see its log")]
    NoAnswer {
        /// The socket.
        socket: String,
        /// What happened.
        reason: String,
    },
    /// The daemon refused the request.
    #[error("the daemon answered {kind}: {message}")]
    Refused {
        /// The error kind.
        kind: &'static str,
        /// Its message.
        message: String,
    },
    /// No such endpoint.
    #[error(
        "no endpoint for container {container_id} ifname {ifname} (see `sarena endpoint list`)"
    )]
    NoEndpoint {
        /// The container id asked for.
        container_id: String,
        /// The interface asked for.
        ifname: String,
    },
    /// A daemon error not yet tied to the socket (mapped by `run`).
    #[error(transparent)]
    Daemon {
        /// The client's error.
        source: Box<DaemonError>,
    },
    /// The daemon answers but cannot serve ADD (`sarena health`).
    #[error("sarena-daemon is not ready: {message}")]
    NotReady {
        /// The daemon's reason.
        message: String,
    },
    /// `policy explain`: policy drops the packet (exit 1); `report` is the
    /// explanation, printed on stdout.
    #[error("denied by NetworkPolicy")]
    Denied {
        /// The explanation, as the output format renders it.
        report: String,
    },
    /// `install-cni` failed.
    #[error("install-cni")]
    Install {
        /// Cause (names the file and the call).
        #[source]
        source: sarena_core::install::InstallError,
    },
    /// `install-cni` without --plugin could not find its own executable.
    #[error("install-cni: cannot find sarena-cni beside this command (pass --plugin)")]
    NoPlugin {
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// The answer could not be printed as JSON.
    #[error("cannot encode the answer as JSON")]
    Json {
        /// Cause.
        #[source]
        source: serde_json::Error,
    },
}

impl From<DaemonError> for CliError {
    fn from(source: DaemonError) -> Self {
        CliError::Daemon {
            source: Box::new(source),
        }
    }
}

impl CliError {
    /// The one-line form of a client error on `socket`.
    pub fn from_daemon(socket: &str, err: DaemonError) -> CliError {
        let socket = socket.to_owned();
        match err {
            DaemonError::Unreachable { source, .. } => CliError::DaemonDown {
                socket,
                reason: error_chain(source.as_ref()),
            },
            DaemonError::Transport { source, .. } => CliError::NoAnswer {
                socket,
                reason: innermost(source.as_ref()),
            },
            DaemonError::Api { kind, message } => CliError::Refused {
                kind: kind.as_str(),
                message,
            },
            DaemonError::Decode { path, source } => CliError::Refused {
                kind: ApiErrorKind::Internal.as_str(),
                message: format!(
                    "cannot decode the answer to {path} ({source}): is the daemon the same version as sarena?"
                ),
            },
            other => CliError::Refused {
                kind: other.kind().unwrap_or(ApiErrorKind::Internal).as_str(),
                message: error_chain(&other),
            },
        }
    }
}

/// The innermost error's text: the cause, without hyper's wrappers.
fn innermost(err: &(dyn std::error::Error + 'static)) -> String {
    let mut cur = err;
    while let Some(next) = cur.source() {
        cur = next;
    }
    cur.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unreachable_is_one_line_naming_the_socket() {
        let err = DaemonError::Unreachable {
            endpoint: "/x.sock".into(),
            source: Box::new(std::io::Error::from(std::io::ErrorKind::NotFound)),
        };
        let text = CliError::from_daemon("/x.sock", err).to_string();
        assert!(
            text.starts_with("cannot reach sarena-daemon at /x.sock (entity not found)"),
            "{text}"
        );
        assert!(!text.contains('\n'));
    }

    #[test]
    fn api_errors_keep_their_kind() {
        let err = DaemonError::api(ApiErrorKind::Unavailable, "waiting for podCIDRs");
        let text = CliError::from_daemon("/s", err).to_string();
        assert_eq!(
            text,
            "the daemon answered unavailable: waiting for podCIDRs"
        );
    }
}
