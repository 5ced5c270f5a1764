//! [`PluginError`]: what can go wrong in a plugin sequence, with the step and the
//! attachment as data. Its mapping to CNI error codes is in `cni_codes.rs`.

use std::fmt;

use crate::api::{Attachment, DaemonError};
use crate::cni::CniError;
use crate::delqueue::QueueError;
use crate::links::LinkError;

use super::step::Step;

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
    #[error("cannot {step}{}", show(.attachment))]
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
    #[error("cannot {step}{}", show(.attachment))]
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
    #[error("cannot {step}{}", show(.attachment))]
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
        .map(|e| crate::error_chain(e))
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
}
