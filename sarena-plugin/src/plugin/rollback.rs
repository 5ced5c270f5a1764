//! [`Rollback`]: the undo stack of ADD. Each step that creates something pushes
//! how to undo it; a failure later in ADD runs the stack newest first.

use crate::api::{Attachment, Daemon};
use crate::delqueue::DeleteQueue;
use crate::links::Links;

use super::error::{AttachmentDisplay, PluginError};

/// How to undo one thing ADD created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Undo {
    /// The address allocated for the attachment (step 5): release it.
    Allocation,
    /// The allocation once the endpoint was, or may have been, registered (step
    /// 8): delete the endpoint, which also releases the address.
    EndpointMayExist,
    /// The veth pair (step 6): remove its host end, which takes the pod end along.
    Veth {
        /// The host end's name.
        host_ifname: String,
    },
}

/// What ADD has created for one attachment and must undo if it fails, newest
/// last. [`Rollback::settle`] ends it: a success keeps everything, an error
/// undoes everything before it is returned. Undo failures are logged, never
/// returned, so the original error stands; an address the daemon cannot be told
/// to release now goes into the deletion queue. Drop cannot await, so a stack
/// dropped unsettled (only when the ADD future itself is cancelled) logs what
/// stays behind, and the daemon's allocation lease is the backstop.
pub(super) struct Rollback<'a> {
    daemon: &'a dyn Daemon,
    links: &'a dyn Links,
    queue: Option<&'a DeleteQueue>,
    attachment: &'a Attachment,
    entries: Vec<Undo>,
}

impl<'a> Rollback<'a> {
    /// An empty stack for `attachment`.
    pub(super) fn new(
        daemon: &'a dyn Daemon,
        links: &'a dyn Links,
        queue: Option<&'a DeleteQueue>,
        attachment: &'a Attachment,
    ) -> Self {
        Rollback {
            daemon,
            links,
            queue,
            attachment,
            entries: Vec::new(),
        }
    }

    /// Registers the undo of something just created.
    pub(super) fn push(&mut self, undo: Undo) {
        self.entries.push(undo);
    }

    /// The endpoint was, or may have been, registered: the allocation's undo
    /// deletes the endpoint instead of releasing the bare address.
    pub(super) fn endpoint_may_exist(&mut self) {
        for entry in &mut self.entries {
            if *entry == Undo::Allocation {
                *entry = Undo::EndpointMayExist;
            }
        }
    }

    /// Ends the stack with ADD's `outcome`: on success keeps what was created, on
    /// error undoes it, newest first, then returns the error.
    pub(super) async fn settle<T>(
        mut self,
        outcome: Result<T, PluginError>,
    ) -> Result<T, PluginError> {
        match outcome {
            Ok(value) => {
                self.entries.clear();
                Ok(value)
            }
            Err(e) => {
                // Each entry leaves the stack before its undo runs, so a
                // cancellation mid-undo warns only about what is left.
                while let Some(undo) = self.entries.pop() {
                    self.undo(undo).await;
                }
                Err(e)
            }
        }
    }

    async fn undo(&self, undo: Undo) {
        match undo {
            Undo::Veth { host_ifname } => self.remove_veth(&host_ifname).await,
            Undo::Allocation => self.release(false).await,
            Undo::EndpointMayExist => self.release(true).await,
        }
    }

    async fn remove_veth(&self, host_ifname: &str) {
        match self.links.remove_host_link(host_ifname).await {
            Ok(_) => tracing::info!(ifname = %host_ifname, "veth removed"),
            Err(e) => tracing::error!(attachment = %AttachmentDisplay(self.attachment),
                ifname = %host_ifname, error = %crate::error_chain(&e), "cannot remove the veth"),
        }
    }

    /// Releases the address, by deleting the endpoint when it may exist; queues
    /// the deletion when the daemon cannot be told now.
    async fn release(&self, endpoint_may_exist: bool) {
        let att = self.attachment;
        let outcome = if endpoint_may_exist {
            self.daemon.delete_endpoint(att.clone()).await
        } else {
            self.daemon.release(att.clone()).await
        };
        let e = match outcome {
            Ok(_) => {
                tracing::info!(attachment = %AttachmentDisplay(att), "address released");
                return;
            }
            Err(e) => e,
        };
        match self.queue {
            Some(queue) if e.is_transient() => {
                let queued = queue.enqueue_off_worker(att).await;
                tracing::warn!(attachment = %AttachmentDisplay(att), error = %crate::error_chain(&e),
                    queued = ?queued, "cannot release the address now; deletion queued");
            }
            _ => {
                tracing::error!(attachment = %AttachmentDisplay(att), error = %crate::error_chain(&e),
                "cannot release the address; the daemon's lease will expire it")
            }
        }
    }
}

impl Drop for Rollback<'_> {
    fn drop(&mut self) {
        for entry in self.entries.iter().rev() {
            match entry {
                Undo::Veth { host_ifname } => tracing::warn!(ifname = %host_ifname,
                    "ADD abandoned after creating the veth; it stays"),
                Undo::Allocation | Undo::EndpointMayExist => {
                    tracing::warn!(attachment = %AttachmentDisplay(self.attachment),
                        "ADD abandoned after allocation; the address stays until its lease expires")
                }
            }
        }
    }
}
