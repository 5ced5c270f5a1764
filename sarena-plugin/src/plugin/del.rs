//! DEL: best effort and idempotent. Every step runs whatever the previous ones
//! did; failures are collected and reported together.
//!
//! 1. Delete the endpoint at the daemon (which releases its address), asking
//!    it to remove the veth pair too. A daemon that takes that on removes it
//!    right after answering, and DEL is done: deleting a link waits for an
//!    RCU barrier (~15 ms) that DEL then need not wait for. If the daemon
//!    cannot be reached, the deletion goes into the [`DeleteQueue`] and DEL
//!    carries on as if it had succeeded.
//! 2. Otherwise remove the host end of the veth (which takes the pod end with it).
//! 3. When `CNI_NETNS` is given and can be opened, remove the pod end there too;
//!    a missing or unopenable netns is fine.
//! 4. Release whatever the links backend keeps open for that netns.
//!
//! Links that are not Sarena's ([`LinkError::NotOurs`]) are left alone; that
//! is no failure of DEL.

use std::path::Path;

use crate::api::{Attachment, Daemon};
use crate::delqueue::DeleteQueue;
use crate::links::{LinkError, Links, host_ifname};

use super::error::{AttachmentDisplay, PluginError};
use super::request::DelRequest;
use super::step::Step;

/// Runs DEL: the steps of the module docs, each one call; failures are
/// collected and reported together after all have run.
pub(crate) async fn del(
    daemon: &dyn Daemon,
    links: &dyn Links,
    queue: Option<&DeleteQueue>,
    req: &DelRequest,
) -> Result<(), PluginError> {
    req.validate().map_err(PluginError::Invalid)?;
    let att = &req.attachment;
    let mut errors = Vec::new();

    let daemon_removes_veth = delete_endpoint(daemon, queue, att)
        .await
        .unwrap_or_else(|e| {
            errors.push(e);
            false
        });
    if daemon_removes_veth {
        release_netns(links, req);
        tracing::info!(attachment = %AttachmentDisplay(att), "DEL done; the daemon removes the veth");
        return Ok(());
    }
    if let Err(e) = remove_host_link(links, att).await {
        errors.push(e);
    }
    if let Some(netns) = &req.netns
        && let Err(e) = remove_pod_link(links, netns, att).await
    {
        errors.push(e);
    }
    release_netns(links, req);

    PluginError::collect(Some(att), errors)?;
    tracing::info!(attachment = %AttachmentDisplay(att), "DEL done");
    Ok(())
}

/// Step 1: deletes the endpoint at the daemon, asking it to remove the veth pair too;
/// queues the deletion when the daemon cannot be reached. `Ok(true)`: the daemon
/// removes the veth (after answering), so DEL need not.
async fn delete_endpoint(
    daemon: &dyn Daemon,
    queue: Option<&DeleteQueue>,
    att: &Attachment,
) -> Result<bool, PluginError> {
    let e = match daemon.delete_endpoint_and_veth(att.clone()).await {
        Ok(answer) => {
            tracing::debug!(attachment = %AttachmentDisplay(att), existed = answer.deleted,
                veth_removal = answer.veth_removal, "endpoint deleted");
            return Ok(answer.veth_removal);
        }
        Err(e) => e,
    };
    match queue {
        Some(q) if e.is_transient() => match q.enqueue_off_worker(att).await {
            Ok(()) => {
                tracing::warn!(attachment = %AttachmentDisplay(att), error = %crate::error_chain(&e),
                    "daemon unavailable; deletion queued");
                Ok(false)
            }
            Err(qe) => Err(PluginError::Queue {
                step: Step::EnqueueDeletion,
                attachment: Some(att.clone()),
                source: qe,
            }),
        },
        _ => Err(PluginError::daemon(Step::DeleteEndpoint, att, e)),
    }
}

/// Step 2: removes the host end of the veth (which takes the pod end with it).
async fn remove_host_link(links: &dyn Links, att: &Attachment) -> Result<(), PluginError> {
    let host = host_ifname(&att.container_id, &att.ifname);
    match links.remove_host_link(&host).await {
        Ok(existed) => tracing::debug!(ifname = %host, existed, "host link removed"),
        Err(e @ LinkError::NotOurs { .. }) => {
            tracing::warn!(error = %crate::error_chain(&e), "host link left alone")
        }
        Err(e) => return Err(PluginError::link(Step::RemoveHostLink, att, e)),
    }
    Ok(())
}

/// Step 3: removes the pod end in `netns`; a netns that is gone is fine.
async fn remove_pod_link(
    links: &dyn Links,
    netns: &Path,
    att: &Attachment,
) -> Result<(), PluginError> {
    match links.remove_pod_link(netns, &att.ifname).await {
        Ok(existed) => {
            tracing::debug!(ifname = %att.ifname, existed, "pod link removed");
            Ok(())
        }
        Err(LinkError::Netns { path, source }) => {
            tracing::debug!(%path, error = %crate::error_chain(&source), "netns gone; nothing to remove in it");
            Ok(())
        }
        Err(e @ LinkError::NotOurs { .. }) => {
            tracing::warn!(error = %crate::error_chain(&e), "pod link left alone");
            Ok(())
        }
        Err(e) => Err(PluginError::link(Step::RemovePodLink, att, e)),
    }
}

/// Step 4: the pod is gone or going; nothing of its netns need stay open.
fn release_netns(links: &dyn Links, req: &DelRequest) {
    if let Some(netns) = &req.netns {
        links.release_netns(netns);
    }
}

#[cfg(test)]
#[path = "del_tests.rs"]
mod tests;
