//! ADD: the seed's eight steps, each one trait call away, in order but for two
//! pairs that do not depend on each other and run concurrently to save round
//! trips: the stale-link check (2) with the daemon's config (3–4), and the pod
//! interface's addresses and routes (7) with the endpoint's registration (8).
//! ADD succeeds only if both of a pair do.
//!
//! Idempotence: step 2 removes a link left in the pod netns by a previous ADD of
//! the same attachment and, when there was one, that ADD's endpoint at the daemon
//! (which releases its address), so a repeated ADD starts from scratch.
//!
//! Failure handling: once the address is allocated, an `AllocationGuard` owns
//! it; once the veth exists, a `VethGuard` owns it. [`guarded`] runs each later
//! step and, on error, awaits the guard's `rollback()` before returning the
//! error (veth first, then the address), or `disarm()`s it on success, so no
//! error path can skip the cleanup. Rollback failures are logged and never
//! replace the original error; an address the daemon cannot be told to release
//! goes into the deletion queue. Drop cannot await, so a guard dropped armed
//! (only when the ADD future itself is cancelled) logs a warning, and the
//! daemon's allocation lease is the backstop. If `POST /endpoint/create` fails in
//! a way that may have created the endpoint (a broken connection), rollback
//! deletes the endpoint rather than releasing the bare allocation.

use std::cell::Cell;
use std::future::Future;

use crate::api::{
    AllocateRequest, Allocation, Attachment, Daemon, DaemonConfig, DaemonError, EndpointCreate,
};
use crate::cni::CniResult;
use crate::cni::result::{Interface, IpConfig, Route};
use crate::links::{Links, PodIfaceConfig, VethPair, VethSpec, host_ifname};

use super::delqueue::DeleteQueue;
use super::error::{AttachmentDisplay, PluginError, Step, is_transient};
use super::request::AddRequest;

/// Runs ADD. See the module docs for the failure handling.
pub(crate) async fn add(
    daemon: &dyn Daemon,
    links: &dyn Links,
    queue: Option<&DeleteQueue>,
    req: &AddRequest,
) -> Result<CniResult, PluginError> {
    let att = &req.attachment;
    // 1. Validate the input; refuse while a deletion of this attachment is queued.
    req.validate().map_err(PluginError::Invalid)?;
    if queue.is_some_and(|q| q.contains(att)) {
        return Err(PluginError::DeletionPending {
            attachment: att.clone(),
        });
    }
    // 2. Make ADD idempotent: remove a stale link of the same name in the pod netns;
    //    if there was one, the endpoint a previous ADD registered for it is stale too.
    // 3–4. Meanwhile, the daemon's config (MTU).
    let (stale, config) = futures_util::join!(
        links.remove_pod_link(&req.netns, &att.ifname),
        daemon.config()
    );
    let stale = stale.map_err(|e| PluginError::link(Step::RemoveStaleLink, att, e))?;
    if stale {
        daemon
            .delete_endpoint(att.clone())
            .await
            .map_err(|e| PluginError::daemon(Step::RemoveStaleEndpoint, att, e))?;
    }
    let config = config.map_err(|e| PluginError::daemon(Step::DaemonConfig, att, e))?;
    // 5. Allocate the address; from here on the guard releases it on failure (also
    //    when the allocation's own outcome is unknown).
    let endpoint_may_exist = Cell::new(false);
    let mut allocated = AllocationGuard::new(daemon, queue, att, &endpoint_may_exist);
    let allocation = match daemon
        .allocate(AllocateRequest {
            owner: att.clone(),
            pod: req.pod.clone(),
            requested: req.requested_ips.clone(),
            pool: None,
        })
        .await
    {
        Ok(allocation) => allocation,
        Err(e) => {
            if outcome_unknown(&e) {
                allocated.rollback().await;
            } else {
                allocated.disarm();
            }
            return Err(PluginError::daemon(Step::Allocate, att, e));
        }
    };
    let result = guarded(&mut allocated, async {
        // 6. Create the veth pair; from here on the guard removes it on failure.
        let pair = links
            .create_veth(&VethSpec {
                host_ifname: host_ifname(&att.container_id, &att.ifname),
                netns: req.netns.clone(),
                pod_ifname: att.ifname.clone(),
                mtu: config.mtu,
                pod_mac: req.requested_mac,
            })
            .await
            .map_err(|e| PluginError::link(Step::CreateVeth, att, e))?;
        let mut veth = VethGuard::new(links, att, &pair.host_ifname);
        guarded(&mut veth, async {
            // 7. Addresses and routes on the pod interface, while
            // 8. the endpoint is registered (the daemon attaches the host end).
            let pod = pod_config(&allocation);
            let (configured, registered) = futures_util::join!(
                links.configure_pod(&req.netns, &att.ifname, &pod),
                daemon.create_endpoint(endpoint_create(req, &pair, &allocation))
            );
            // Rollback deletes the endpoint (not just the allocation) when it
            // was, or may have been, registered.
            endpoint_may_exist.set(match &registered {
                Ok(_) => true,
                Err(e) => outcome_unknown(e),
            });
            configured.map_err(|e| PluginError::link(Step::ConfigurePod, att, e))?;
            registered.map_err(|e| PluginError::daemon(Step::RegisterEndpoint, att, e))?;
            Ok(cni_result(req, &config, &pair, &allocation))
        })
        .await
    })
    .await?;
    tracing::info!(attachment = %AttachmentDisplay(att), "ADD done");
    Ok(result)
}

/// True when a failed request may still have taken effect at the daemon: the
/// connection broke mid-request, or a success answer could not be decoded. A
/// refusal (an API error) or an unreachable daemon means nothing happened.
fn outcome_unknown(e: &DaemonError) -> bool {
    !matches!(e, DaemonError::Api { .. } | DaemonError::Unreachable { .. })
}

/// Something ADD created that must be undone if a later step fails.
trait Undo {
    /// Undoes it, logging (not returning) failures so the original error stands.
    async fn rollback(&mut self);
    /// Keeps it: ADD succeeded.
    fn disarm(&mut self);
}

/// Runs `step`; on error rolls `guard` back before returning the error, on success disarms it.
async fn guarded<T, G: Undo>(
    guard: &mut G,
    step: impl Future<Output = Result<T, PluginError>>,
) -> Result<T, PluginError> {
    match step.await {
        Ok(value) => {
            guard.disarm();
            Ok(value)
        }
        Err(e) => {
            guard.rollback().await;
            Err(e)
        }
    }
}

/// Owns an allocated address until the endpoint is registered.
struct AllocationGuard<'a> {
    daemon: &'a dyn Daemon,
    queue: Option<&'a DeleteQueue>,
    attachment: &'a Attachment,
    armed: bool,
    /// Set when `POST /endpoint/create` failed in a way that may have created the
    /// endpoint: rollback then deletes the endpoint (which also releases the address)
    /// instead of releasing the bare allocation.
    endpoint_may_exist: &'a Cell<bool>,
}

impl<'a> AllocationGuard<'a> {
    fn new(
        daemon: &'a dyn Daemon,
        queue: Option<&'a DeleteQueue>,
        attachment: &'a Attachment,
        endpoint_may_exist: &'a Cell<bool>,
    ) -> Self {
        AllocationGuard {
            daemon,
            queue,
            attachment,
            armed: true,
            endpoint_may_exist,
        }
    }
}

impl Undo for AllocationGuard<'_> {
    async fn rollback(&mut self) {
        self.armed = false;
        let att = self.attachment;
        let outcome = if self.endpoint_may_exist.get() {
            self.daemon.delete_endpoint(att.clone()).await
        } else {
            self.daemon.release(att.clone()).await
        };
        match outcome {
            Ok(_) => tracing::info!(attachment = %AttachmentDisplay(att), "address released"),
            Err(e) if is_transient(&e) && self.queue.is_some() => {
                let queued = self.queue.map(|q| q.enqueue(att));
                tracing::warn!(attachment = %AttachmentDisplay(att), error = %e,
                    queued = ?queued, "cannot release the address now; deletion queued");
            }
            Err(e) => tracing::error!(attachment = %AttachmentDisplay(att), error = %e,
                "cannot release the address; the daemon's lease will expire it"),
        }
    }

    fn disarm(&mut self) {
        self.armed = false;
    }
}

impl Drop for AllocationGuard<'_> {
    fn drop(&mut self) {
        if self.armed {
            tracing::warn!(attachment = %AttachmentDisplay(self.attachment),
                "ADD abandoned after allocation; the address stays until its lease expires");
        }
    }
}

/// Owns the veth pair until the endpoint is registered.
struct VethGuard<'a> {
    links: &'a dyn Links,
    attachment: &'a Attachment,
    host_ifname: String,
    armed: bool,
}

impl<'a> VethGuard<'a> {
    fn new(links: &'a dyn Links, attachment: &'a Attachment, host_ifname: &str) -> Self {
        VethGuard {
            links,
            attachment,
            host_ifname: host_ifname.to_string(),
            armed: true,
        }
    }
}

impl Undo for VethGuard<'_> {
    async fn rollback(&mut self) {
        self.armed = false;
        match self.links.remove_host_link(&self.host_ifname).await {
            Ok(_) => tracing::info!(ifname = %self.host_ifname, "veth removed"),
            Err(e) => tracing::error!(attachment = %AttachmentDisplay(self.attachment),
                ifname = %self.host_ifname, error = %e, "cannot remove the veth"),
        }
    }

    fn disarm(&mut self) {
        self.armed = false;
    }
}

impl Drop for VethGuard<'_> {
    fn drop(&mut self) {
        if self.armed {
            tracing::warn!(ifname = %self.host_ifname, "ADD abandoned after creating the veth; it stays");
        }
    }
}

fn pod_config(allocation: &Allocation) -> PodIfaceConfig {
    PodIfaceConfig {
        addresses: allocation.addresses.iter().map(|a| a.address).collect(),
        routes: allocation.routes.clone(),
    }
}

fn endpoint_create(req: &AddRequest, pair: &VethPair, allocation: &Allocation) -> EndpointCreate {
    EndpointCreate {
        owner: req.attachment.clone(),
        pod: req.pod.clone(),
        host_ifname: pair.host_ifname.clone(),
        host_ifindex: pair.host_ifindex,
        host_mac: pair.host_mac,
        pod_mac: pair.pod_mac,
        addresses: allocation.addresses.iter().map(|a| a.address).collect(),
        netns: req.netns.display().to_string(),
    }
}

/// The result: host end at index 0, pod end at index 1 (the one the addresses are on).
fn cni_result(
    req: &AddRequest,
    config: &DaemonConfig,
    pair: &VethPair,
    allocation: &Allocation,
) -> CniResult {
    CniResult {
        interfaces: vec![
            Interface {
                name: pair.host_ifname.clone(),
                mac: Some(pair.host_mac.to_string()),
                ..Interface::default()
            },
            Interface {
                name: pair.pod_ifname.clone(),
                mac: Some(pair.pod_mac.to_string()),
                mtu: Some(config.mtu),
                sandbox: Some(req.netns.display().to_string()),
                ..Interface::default()
            },
        ],
        ips: allocation
            .addresses
            .iter()
            .map(|a| IpConfig {
                address: a.address,
                gateway: Some(a.gateway),
                interface: Some(1),
            })
            .collect(),
        routes: allocation.routes.iter().map(Route::from).collect(),
        dns: Default::default(),
    }
}

#[cfg(test)]
#[path = "add_tests.rs"]
mod tests;
