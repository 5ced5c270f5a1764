//! GC: removes everything of Sarena's that the runtime no longer lists as valid:
//! endpoints and allocations at the daemon (`POST /gc`) and Sarena's host
//! links (`lxc*` and carrying its mark, [`crate::links::LINK_GROUP`]: another
//! plugin's `lxc…` links are never touched).

use std::collections::HashSet;

use crate::api::{Daemon, GcRequest as DaemonGcRequest};
use crate::links::{LinkError, Links, host_ifname};

use super::error::PluginError;
use super::request::GcRequest;
use super::step::Step;

/// Runs GC. Best effort: a failing step does not stop the others.
pub(crate) async fn gc(
    daemon: &dyn Daemon,
    links: &dyn Links,
    req: &GcRequest,
) -> Result<(), PluginError> {
    let mut errors = Vec::new();
    match daemon
        .gc(DaemonGcRequest {
            valid: req.valid.clone(),
        })
        .await
    {
        Ok(report) => tracing::info!(
            endpoints = report.endpoints_removed.len(),
            allocations = report.allocations_released.len(),
            "daemon GC done"
        ),
        Err(source) => errors.push(PluginError::Daemon {
            step: Step::DaemonGc,
            attachment: None,
            source,
        }),
    }
    let keep: HashSet<String> = req
        .valid
        .iter()
        .map(|a| host_ifname(&a.container_id, &a.ifname))
        .collect();
    match links.list_host_links().await {
        Ok(found) => {
            for link in found
                .into_iter()
                .filter(|l| l.ifname.starts_with("lxc") && !keep.contains(&l.ifname))
            {
                let name = link.ifname;
                match links.remove_host_link_index(link.ifindex, &name).await {
                    Ok(_) => tracing::info!(ifname = %name, "stale host link removed"),
                    Err(LinkError::NotOurs { .. }) => {
                        tracing::info!(ifname = %name, "not Sarena's any more; left alone")
                    }
                    Err(source) => errors.push(PluginError::Link {
                        step: Step::RemoveHostLink,
                        attachment: None,
                        source,
                    }),
                }
            }
        }
        Err(source) => errors.push(PluginError::Link {
            step: Step::ListHostLinks,
            attachment: None,
            source,
        }),
    }
    PluginError::collect(None, errors)
}

#[cfg(test)]
#[path = "gc_tests.rs"]
mod tests;
