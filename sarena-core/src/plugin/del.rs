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

use crate::api::Daemon;
use crate::delqueue::DeleteQueue;
use crate::links::{LinkError, Links, host_ifname};

use super::error::{AttachmentDisplay, PluginError};
use super::request::DelRequest;
use super::step::Step;

/// Runs DEL.
pub(crate) async fn del(
    daemon: &dyn Daemon,
    links: &dyn Links,
    queue: Option<&DeleteQueue>,
    req: &DelRequest,
) -> Result<(), PluginError> {
    req.validate().map_err(PluginError::Invalid)?;
    let att = &req.attachment;
    let mut errors = Vec::new();

    // Whether the daemon removes the veth pair (after answering); if not,
    // or if it cannot be asked, DEL removes it here.
    let mut links_left_to_us = true;
    match daemon.delete_endpoint_and_veth(att.clone()).await {
        Ok(answer) => {
            links_left_to_us = !answer.veth_removal;
            tracing::debug!(attachment = %AttachmentDisplay(att), existed = answer.deleted,
                veth_removal = answer.veth_removal, "endpoint deleted")
        }
        Err(e) if e.is_transient() => match queue {
            Some(q) => match q.enqueue_off_worker(att).await {
                Ok(()) => tracing::warn!(attachment = %AttachmentDisplay(att), error = %e,
                    "daemon unavailable; deletion queued"),
                Err(qe) => errors.push(PluginError::Queue {
                    step: Step::EnqueueDeletion,
                    attachment: Some(att.clone()),
                    source: qe,
                }),
            },
            None => errors.push(PluginError::daemon(Step::DeleteEndpoint, att, e)),
        },
        Err(e) => errors.push(PluginError::daemon(Step::DeleteEndpoint, att, e)),
    }
    if !links_left_to_us {
        PluginError::collect(Some(att), errors)?;
        tracing::info!(attachment = %AttachmentDisplay(att), "DEL done; the daemon removes the veth");
        return Ok(());
    }

    let host = host_ifname(&att.container_id, &att.ifname);
    match links.remove_host_link(&host).await {
        Ok(existed) => tracing::debug!(ifname = %host, existed, "host link removed"),
        Err(e) => errors.push(PluginError::link(Step::RemoveHostLink, att, e)),
    }

    if let Some(netns) = &req.netns {
        match links.remove_pod_link(netns, &att.ifname).await {
            Ok(existed) => tracing::debug!(ifname = %att.ifname, existed, "pod link removed"),
            Err(LinkError::Netns { path, source }) => {
                tracing::debug!(%path, error = %source, "netns gone; nothing to remove in it");
            }
            Err(e) => errors.push(PluginError::link(Step::RemovePodLink, att, e)),
        }
    }

    PluginError::collect(Some(att), errors)?;
    tracing::info!(attachment = %AttachmentDisplay(att), "DEL done");
    Ok(())
}

#[cfg(test)]
#[path = "del_tests.rs"]
mod tests;
