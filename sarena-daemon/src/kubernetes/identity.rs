//! [`IdentityHub`]: Kubernetes mode's pod identity. One task owns the
//! [`IdentityTracker`] and takes, in order, what the Pod and Namespace
//! watches see and the endpoints the API registers; it writes labels into
//! the node state that is open (none between sessions: then it only learns)
//! and pushes each change to the dataplane.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use sarena_core::api::{Attachment, Endpoint, PodIdentity};
use sarena_core::dataplane::{DataplaneError, NodeUpdate, NodeUpdates, UpdateOutcome};
use sarena_core::identity::{IdentityError, IdentityEvent, IdentityRegistry, IdentityTracker};
use sarena_core::node::Registry;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// How many events may wait for the tracker before senders wait too.
const QUEUE: usize = 1024;

/// Kubernetes mode's pod identity: the tracker's task, fed by the Pod and
/// Namespace watches and by the API's registrations. Cheap to clone.
#[derive(Clone)]
pub struct IdentityHub {
    events: mpsc::Sender<IdentityEvent>,
    node: Arc<Mutex<Option<Registry>>>,
}

impl std::fmt::Debug for IdentityHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IdentityHub").finish_non_exhaustive()
    }
}

impl IdentityHub {
    /// Starts the tracker's task, pushing to `dataplane` (none: the
    /// identities are only recorded). It ends when every hub is dropped.
    pub fn spawn(dataplane: Option<Arc<dyn NodeUpdates>>) -> (IdentityHub, JoinHandle<()>) {
        let (events, mut rx) = mpsc::channel(QUEUE);
        let node: Arc<Mutex<Option<Registry>>> = Arc::default();
        let open = node.clone();
        let dataplane = dataplane.unwrap_or_else(|| Arc::new(NoDataplane));
        let task = tokio::spawn(async move {
            let mut tracker = IdentityTracker::new();
            while let Some(event) = rx.recv().await {
                let current = open
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .clone();
                let registry: &dyn IdentityRegistry = match &current {
                    Some(node) => node,
                    None => &NoSession,
                };
                match tracker.handle(event, registry, dataplane.as_ref()).await {
                    Ok(changed) if !changed.is_empty() => {
                        tracing::debug!(endpoints = changed.len(), "pod identities updated");
                    }
                    Ok(_) => {}
                    Err(error) => {
                        tracing::warn!(error = %sarena_core::error_chain(&error), "pod identities not updated")
                    }
                }
            }
        });
        (IdentityHub { events, node }, task)
    }

    /// Where the watches send what they see.
    pub fn events(&self) -> mpsc::Sender<IdentityEvent> {
        self.events.clone()
    }

    /// A session opened on `node`: its endpoints are brought up to date.
    pub fn open(&self, node: Registry) {
        *self
            .node
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(node);
        self.tell(IdentityEvent::Resync);
    }

    /// The session closed: no endpoints to update until the next opens.
    pub fn close(&self) {
        *self
            .node
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = None;
    }

    /// An endpoint was registered: it gets its pod's labels if the pod is known.
    pub fn registered(&self, owner: Attachment) {
        self.tell(IdentityEvent::Registered(owner));
    }

    /// Queues `event` without making the caller (the API) wait for the
    /// tracker: behind a full queue it is sent by a task of its own.
    fn tell(&self, event: IdentityEvent) {
        match self.events.try_send(event) {
            Ok(()) | Err(mpsc::error::TrySendError::Closed(_)) => {}
            Err(mpsc::error::TrySendError::Full(event)) => {
                let events = self.events.clone();
                match tokio::runtime::Handle::try_current() {
                    Ok(runtime) => {
                        runtime.spawn(async move {
                            let _ = events.send(event).await;
                        });
                    }
                    Err(_) => tracing::warn!("pod identity event dropped: no runtime"),
                }
            }
        }
    }
}

/// Between sessions: no endpoints to update.
struct NoSession;

impl IdentityRegistry for NoSession {
    fn endpoints(&self) -> Result<Vec<Endpoint>, IdentityError> {
        Ok(Vec::new())
    }
    fn endpoint(&self, _: &Attachment) -> Result<Option<Endpoint>, IdentityError> {
        Ok(None)
    }
    fn set_identity(
        &self,
        _: &Attachment,
        _: &PodIdentity,
    ) -> Result<Option<Endpoint>, IdentityError> {
        Ok(None)
    }
}

/// Dataplane `none`: nothing enforces identities.
struct NoDataplane;

#[async_trait]
impl NodeUpdates for NoDataplane {
    async fn apply(&self, _: &NodeUpdate) -> Result<UpdateOutcome, DataplaneError> {
        Ok(UpdateOutcome::Ignored)
    }
}
