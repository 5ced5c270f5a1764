//! [`PluginError::to_cni`]: the CNI error code and message `sarena-cni` prints
//! for each failure.

use crate::api::{ApiErrorKind, DaemonError};
use crate::cni::{CniError, ErrorCode};
use crate::links::LinkError;

use super::error::PluginError;
use super::step::{Operation, Step};

impl PluginError {
    /// The CNI error `sarena-cni` prints for this failure.
    ///
    /// - invalid input: the code of the validation error (4, 7, …), naming the field;
    /// - daemon unreachable, timed out or unavailable: 11 (try again later); on STATUS 50;
    /// - other daemon errors (e.g. pool exhausted): 100, an invalid `daemon-endpoint`: 7;
    /// - the netns cannot be opened (ADD, CHECK): 3 naming `CNI_NETNS`;
    /// - other link errors: 101; the deletion queue: 5; CHECK differences: 102.
    pub fn to_cni(&self) -> CniError {
        let details = crate::error_chain(self);
        match self {
            PluginError::Invalid(e) => e.clone(),
            PluginError::Daemon { step, source, .. } => daemon_code(*step, source, details),
            PluginError::Link {
                source: LinkError::Netns { path, .. },
                ..
            } => CniError::new(
                ErrorCode::UnknownContainer,
                format!("CNI_NETNS: cannot open the network namespace {path}"),
            )
            .with_details(details),
            PluginError::Link { step, .. } => {
                CniError::new(ErrorCode::Kernel, format!("cannot {step}")).with_details(details)
            }
            PluginError::Queue { step, .. } => {
                CniError::new(ErrorCode::Io, format!("cannot {step}")).with_details(details)
            }
            PluginError::DeletionPending { .. } => CniError::new(
                ErrorCode::TryAgainLater,
                "a deletion of this attachment is queued",
            )
            .with_details(details),
            PluginError::NotReady { message } => CniError::new(
                ErrorCode::PluginNotAvailable,
                format!("the Sarena daemon is not ready: {message}"),
            ),
            PluginError::CheckMismatch { what, .. } => {
                CniError::new(ErrorCode::CheckFailed, format!("CHECK: {what} differs"))
                    .with_details(details)
            }
            PluginError::Several { errors, .. } => match errors.first() {
                Some(first) => {
                    let mut e = first.to_cni();
                    if errors.len() > 1 {
                        e.msg = format!("{} (and {} more failures)", e.msg, errors.len() - 1);
                    }
                    e.details = details;
                    e
                }
                None => CniError::new(ErrorCode::Internal, "empty error list"),
            },
        }
    }
}

impl From<&PluginError> for CniError {
    fn from(e: &PluginError) -> CniError {
        e.to_cni()
    }
}

impl From<PluginError> for CniError {
    fn from(e: PluginError) -> CniError {
        e.to_cni()
    }
}

fn daemon_code(step: Step, source: &DaemonError, details: String) -> CniError {
    let op = step.operation();
    if let DaemonError::InvalidEndpoint { endpoint, .. } = source {
        return CniError::new(
            ErrorCode::InvalidConfig,
            format!("daemon-endpoint: invalid value {endpoint:?}"),
        )
        .with_details(details);
    }
    if op == Operation::Status {
        let msg = if source.is_unreachable() {
            "cannot reach the Sarena daemon".to_string()
        } else {
            format!(
                "the Sarena daemon cannot answer: {}",
                crate::error_chain(source)
            )
        };
        return CniError::new(ErrorCode::PluginNotAvailable, msg).with_details(details);
    }
    if source.is_transient() {
        let msg = if source.is_unreachable() {
            format!("cannot reach the Sarena daemon to {step}; try again later")
        } else if source.kind() == Some(ApiErrorKind::Unavailable) {
            // The daemon said why (e.g. its Node has no podCIDR yet): say it too.
            let reason = source.to_body().message;
            format!("the Sarena daemon cannot {step} now: {reason}; try again later")
        } else {
            format!("the Sarena daemon did not complete the request to {step}; try again later")
        };
        return CniError::new(ErrorCode::TryAgainLater, msg).with_details(details);
    }
    let msg = match source.kind() {
        Some(ApiErrorKind::PoolExhausted) => "no free address: the address pool is exhausted",
        Some(ApiErrorKind::Conflict) => "the daemon refused: conflicts with existing state",
        Some(ApiErrorKind::BadRequest) => "the daemon rejected the request",
        Some(ApiErrorKind::NotFound) => "the daemon does not know this attachment",
        _ => "the Sarena daemon failed",
    };
    CniError::new(ErrorCode::Daemon, format!("cannot {step}: {msg}")).with_details(details)
}

#[cfg(test)]
#[path = "cni_codes_tests.rs"]
mod tests;
