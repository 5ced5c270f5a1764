//! [`PluginError`]: what can go wrong in a plugin sequence, with the step and the
//! attachment as data, and its mapping to a CNI error code at the edge.

use std::fmt;

use crate::api::{ApiErrorKind, Attachment, DaemonError};
use crate::cni::{CniError, ErrorCode};
use crate::links::LinkError;

use super::delqueue::QueueError;

/// The CNI operation a step belongs to; decides how a failure maps to a CNI code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    /// ADD.
    Add,
    /// DEL.
    Del,
    /// CHECK.
    Check,
    /// STATUS.
    Status,
    /// GC.
    Gc,
}

/// One step of a plugin sequence, named in errors and logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Step {
    /// ADD 2: delete a stale link of the same name in the pod netns.
    RemoveStaleLink,
    /// ADD 2: delete the endpoint a previous ADD registered for that stale link.
    RemoveStaleEndpoint,
    /// ADD 4: `GET /daemon/config`.
    DaemonConfig,
    /// ADD 5: `POST /ipam/allocate`.
    Allocate,
    /// ADD 6: create the veth pair.
    CreateVeth,
    /// ADD 7: addresses and routes on the pod interface.
    ConfigurePod,
    /// ADD 8: `POST /endpoint/create`.
    RegisterEndpoint,
    /// DEL: `DELETE /endpoints/…` at the daemon.
    DeleteEndpoint,
    /// DEL: queue the deletion on disk because the daemon cannot be reached.
    EnqueueDeletion,
    /// DEL / GC: remove the host end of the veth.
    RemoveHostLink,
    /// DEL: remove the pod end in the pod netns.
    RemovePodLink,
    /// CHECK: `GET /endpoints/…`.
    LookupEndpoint,
    /// CHECK: read the pod interface.
    InspectPod,
    /// CHECK: look up the host end.
    InspectHostLink,
    /// STATUS: `GET /daemon/health`.
    Health,
    /// GC: `POST /gc`.
    DaemonGc,
    /// GC: list Sarena's host links.
    ListHostLinks,
    /// ADD / DEL: replay the on-disk deletion queue.
    ReplayQueue,
}

impl Step {
    /// The operation this step is part of (for steps shared by several, the first one).
    pub fn operation(self) -> Operation {
        match self {
            Step::RemoveStaleLink
            | Step::RemoveStaleEndpoint
            | Step::DaemonConfig
            | Step::Allocate
            | Step::CreateVeth
            | Step::ConfigurePod
            | Step::RegisterEndpoint
            | Step::ReplayQueue => Operation::Add,
            Step::DeleteEndpoint
            | Step::EnqueueDeletion
            | Step::RemoveHostLink
            | Step::RemovePodLink => Operation::Del,
            Step::LookupEndpoint | Step::InspectPod | Step::InspectHostLink => Operation::Check,
            Step::Health => Operation::Status,
            Step::DaemonGc | Step::ListHostLinks => Operation::Gc,
        }
    }

    /// A short human-readable name, e.g. `allocate an address`.
    pub fn describe(self) -> &'static str {
        match self {
            Step::RemoveStaleLink => "remove a stale pod link",
            Step::RemoveStaleEndpoint => "remove the stale endpoint of a previous ADD",
            Step::DaemonConfig => "get the daemon config",
            Step::Allocate => "allocate an address",
            Step::CreateVeth => "create the veth pair",
            Step::ConfigurePod => "configure the pod interface",
            Step::RegisterEndpoint => "register the endpoint",
            Step::DeleteEndpoint => "delete the endpoint at the daemon",
            Step::EnqueueDeletion => "queue the deletion",
            Step::RemoveHostLink => "remove the host link",
            Step::RemovePodLink => "remove the pod link",
            Step::LookupEndpoint => "look up the endpoint at the daemon",
            Step::InspectPod => "inspect the pod interface",
            Step::InspectHostLink => "inspect the host link",
            Step::Health => "ask the daemon for its health",
            Step::DaemonGc => "garbage-collect at the daemon",
            Step::ListHostLinks => "list host links",
            Step::ReplayQueue => "replay the deletion queue",
        }
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.describe())
    }
}

/// Formats an attachment as `containerid/ifname` in messages.
pub(crate) struct AttachmentDisplay<'a>(pub(crate) &'a Attachment);

impl fmt::Display for AttachmentDisplay<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.0.container_id, self.0.ifname)
    }
}

fn show(att: &Option<Attachment>) -> String {
    match att {
        Some(a) => format!(" for {}", AttachmentDisplay(a)),
        None => String::new(),
    }
}

/// Errors of the plugin sequences. Each carries the step that failed and, where
/// there is one, the attachment; [`PluginError::to_cni`] turns it into the CNI
/// error printed by `sarena-cni`.
#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    /// The input (environment or config) is invalid; already a CNI error.
    #[error("{0}")]
    Invalid(CniError),
    /// A daemon call failed.
    #[error("cannot {step}{}: {source}", show(.attachment))]
    Daemon {
        /// The step.
        step: Step,
        /// The attachment, when the step concerns one.
        attachment: Option<Attachment>,
        /// The daemon client's error.
        #[source]
        source: DaemonError,
    },
    /// A netns or link operation failed.
    #[error("cannot {step}{}: {source}", show(.attachment))]
    Link {
        /// The step.
        step: Step,
        /// The attachment, when the step concerns one.
        attachment: Option<Attachment>,
        /// The link backend's error.
        #[source]
        source: LinkError,
    },
    /// The on-disk deletion queue failed.
    #[error("cannot {step}{}: {source}", show(.attachment))]
    Queue {
        /// The step.
        step: Step,
        /// The attachment, when the step concerns one.
        attachment: Option<Attachment>,
        /// The queue's error.
        #[source]
        source: QueueError,
    },
    /// A deletion for this attachment is still queued (the daemon was unreachable at
    /// DEL time and is again now): ADD must not run before it is replayed.
    #[error("a deletion of {} is still queued; the daemon must process it first", AttachmentDisplay(.attachment))]
    DeletionPending {
        /// The attachment.
        attachment: Attachment,
    },
    /// The daemon answers but says it cannot serve ADD.
    #[error("the daemon is not ready: {message}")]
    NotReady {
        /// The daemon's message.
        message: String,
    },
    /// CHECK found a difference between prevResult and what exists.
    #[error("CHECK of {}: {what}: expected {expected}, found {found}", AttachmentDisplay(.attachment))]
    CheckMismatch {
        /// The attachment checked.
        attachment: Attachment,
        /// What differs, e.g. `pod interface MAC`.
        what: String,
        /// What prevResult says.
        expected: String,
        /// What is there.
        found: String,
    },
    /// Several independent steps of a best-effort sequence (DEL, GC) failed.
    #[error("{} step(s) failed{}: {}", .errors.len(), show(.attachment), join(.errors))]
    Several {
        /// The attachment, for DEL.
        attachment: Option<Attachment>,
        /// Every failure, in order.
        errors: Vec<PluginError>,
    },
}

fn join(errors: &[PluginError]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

impl PluginError {
    pub(crate) fn daemon(step: Step, attachment: &Attachment, source: DaemonError) -> Self {
        PluginError::Daemon {
            step,
            attachment: Some(attachment.clone()),
            source,
        }
    }

    pub(crate) fn link(step: Step, attachment: &Attachment, source: LinkError) -> Self {
        PluginError::Link {
            step,
            attachment: Some(attachment.clone()),
            source,
        }
    }

    /// Collapses a list of failures: none → `Ok`, one → itself, more → [`PluginError::Several`].
    pub(crate) fn collect(
        attachment: Option<&Attachment>,
        mut errors: Vec<PluginError>,
    ) -> Result<(), PluginError> {
        match errors.len() {
            0 => Ok(()),
            1 => Err(errors.remove(0)),
            _ => Err(PluginError::Several {
                attachment: attachment.cloned(),
                errors,
            }),
        }
    }

    /// The step that failed (the first one for [`PluginError::Several`]).
    pub fn step(&self) -> Option<Step> {
        match self {
            PluginError::Daemon { step, .. }
            | PluginError::Link { step, .. }
            | PluginError::Queue { step, .. } => Some(*step),
            PluginError::NotReady { .. } => Some(Step::Health),
            PluginError::Several { errors, .. } => errors.first().and_then(PluginError::step),
            PluginError::Invalid(_)
            | PluginError::DeletionPending { .. }
            | PluginError::CheckMismatch { .. } => None,
        }
    }

    /// The CNI error `sarena-cni` prints for this failure.
    ///
    /// - invalid input: the code of the validation error (4, 7, …), naming the field;
    /// - daemon unreachable, timed out or unavailable: 11 (try again later); on STATUS 50;
    /// - other daemon errors (e.g. pool exhausted): 100, an invalid `daemon-endpoint`: 7;
    /// - the netns cannot be opened (ADD, CHECK): 3 naming `CNI_NETNS`;
    /// - other link errors: 101; the deletion queue: 5; CHECK differences: 102.
    pub fn to_cni(&self) -> CniError {
        let details = self.to_string();
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

/// True for daemon failures worth retrying later: the daemon was not reached, the
/// request broke or timed out, or the daemon said it cannot serve now.
pub(crate) fn is_transient(e: &DaemonError) -> bool {
    matches!(
        e,
        DaemonError::Unreachable { .. } | DaemonError::Transport { .. }
    ) || e.kind() == Some(ApiErrorKind::Unavailable)
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
            format!("the Sarena daemon cannot answer: {source}")
        };
        return CniError::new(ErrorCode::PluginNotAvailable, msg).with_details(details);
    }
    if is_transient(source) {
        let msg = if source.is_unreachable() {
            format!("cannot reach the Sarena daemon to {step}; try again later")
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
mod tests {
    use super::*;

    fn att() -> Attachment {
        Attachment {
            container_id: "c1".into(),
            ifname: "eth0".into(),
        }
    }

    fn unreachable() -> DaemonError {
        DaemonError::Unreachable {
            endpoint: "/run/sarena/sarena.sock".into(),
            source: "connection refused".into(),
        }
    }

    #[test]
    fn unreachable_daemon_on_add_is_try_again_later() {
        let e = PluginError::daemon(Step::Allocate, &att(), unreachable()).to_cni();
        assert_eq!(e.code, ErrorCode::TryAgainLater);
        assert!(e.msg.contains("allocate an address"), "{}", e.msg);
        assert!(e.details.contains("c1/eth0"), "{}", e.details);
    }

    #[test]
    fn unreachable_or_failing_daemon_on_status_is_50() {
        let e = PluginError::Daemon {
            step: Step::Health,
            attachment: None,
            source: unreachable(),
        };
        assert_eq!(e.to_cni().code, ErrorCode::PluginNotAvailable);
        let e = PluginError::Daemon {
            step: Step::Health,
            attachment: None,
            source: DaemonError::api(ApiErrorKind::Internal, "boom"),
        };
        assert_eq!(e.to_cni().code, ErrorCode::PluginNotAvailable);
        let e = PluginError::NotReady {
            message: "starting".into(),
        }
        .to_cni();
        assert_eq!(e.code, ErrorCode::PluginNotAvailable);
        assert!(e.msg.contains("starting"));
    }

    #[test]
    fn pool_exhausted_is_daemon_error_with_clear_message() {
        let src = DaemonError::api(ApiErrorKind::PoolExhausted, "pool default is full");
        let e = PluginError::daemon(Step::Allocate, &att(), src).to_cni();
        assert_eq!(e.code, ErrorCode::Daemon);
        assert!(e.msg.contains("pool is exhausted"), "{}", e.msg);
        assert!(e.details.contains("pool default is full"), "{}", e.details);
    }

    #[test]
    fn unavailable_and_transport_are_transient() {
        let e = DaemonError::api(ApiErrorKind::Unavailable, "restarting");
        assert_eq!(
            PluginError::daemon(Step::DaemonConfig, &att(), e)
                .to_cni()
                .code,
            ErrorCode::TryAgainLater
        );
        let e = DaemonError::Transport {
            method: "POST".into(),
            path: "/v1/ipam/allocate".into(),
            source: "timed out".into(),
        };
        assert_eq!(
            PluginError::daemon(Step::Allocate, &att(), e).to_cni().code,
            ErrorCode::TryAgainLater
        );
    }

    #[test]
    fn invalid_endpoint_is_invalid_config_naming_the_field() {
        let e = DaemonError::InvalidEndpoint {
            endpoint: "ftp://x".into(),
            reason: "scheme".into(),
        };
        let e = PluginError::daemon(Step::DaemonConfig, &att(), e).to_cni();
        assert_eq!(e.code, ErrorCode::InvalidConfig);
        assert!(e.msg.starts_with("daemon-endpoint"), "{}", e.msg);
    }

    #[test]
    fn netns_unopenable_is_unknown_container_naming_cni_netns() {
        let src = LinkError::Netns {
            path: "/var/run/netns/gone".into(),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        };
        let e = PluginError::link(Step::RemoveStaleLink, &att(), src).to_cni();
        assert_eq!(e.code, ErrorCode::UnknownContainer);
        assert!(e.msg.starts_with("CNI_NETNS"), "{}", e.msg);
    }

    #[test]
    fn link_failure_is_kernel_error() {
        let src = LinkError::Netlink(crate::NetlinkError::from_errno(
            "link add",
            "lxc1",
            libc::EEXIST,
        ));
        let e = PluginError::link(Step::CreateVeth, &att(), src).to_cni();
        assert_eq!(e.code, ErrorCode::Kernel);
        assert!(e.details.contains("EEXIST"));
    }

    #[test]
    fn check_mismatch_is_102_naming_what_differs() {
        let e = PluginError::CheckMismatch {
            attachment: att(),
            what: "pod interface MAC".into(),
            expected: "aa".into(),
            found: "bb".into(),
        }
        .to_cni();
        assert_eq!(e.code, ErrorCode::CheckFailed);
        assert_eq!(e.msg, "CHECK: pod interface MAC differs");
        assert!(e.details.contains("expected aa, found bb"), "{}", e.details);
    }

    #[test]
    fn several_uses_first_code_and_lists_all() {
        let a = PluginError::link(
            Step::RemoveHostLink,
            &att(),
            LinkError::Netlink(crate::NetlinkError::from_errno(
                "link del",
                "lxc1",
                libc::EPERM,
            )),
        );
        let b = PluginError::daemon(
            Step::DeleteEndpoint,
            &att(),
            DaemonError::api(ApiErrorKind::Internal, "db"),
        );
        let e = PluginError::collect(Some(&att()), vec![a, b])
            .unwrap_err()
            .to_cni();
        assert_eq!(e.code, ErrorCode::Kernel);
        assert!(e.msg.contains("1 more"), "{}", e.msg);
        assert!(
            e.details.contains("EPERM") && e.details.contains("db"),
            "{}",
            e.details
        );
        assert!(PluginError::collect(None, vec![]).is_ok());
    }

    #[test]
    fn invalid_passes_the_cni_error_through() {
        let src = CniError::new(ErrorCode::InvalidConfig, "prevResult: not allowed");
        assert_eq!(PluginError::Invalid(src.clone()).to_cni(), src);
    }
}
