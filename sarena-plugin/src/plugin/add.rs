//! ADD: the seed's eight steps, one named function each, called in order by
//! [`add`] but for two pairs that do not depend on each other and run
//! concurrently to save round trips: the stale-link check (2) with the daemon's
//! config (3–4), and the pod interface's addresses and routes (7) with the
//! endpoint's registration (8). ADD succeeds only if both of a pair do.
//!
//! Idempotence: step 2 removes a link left in the pod netns by a previous ADD of
//! the same attachment and, when there was one, unregisters that ADD's endpoint
//! at the daemon while keeping its allocation, so a repeated ADD (a runtime
//! retrying after a timeout) replaces the link but keeps the address, and the
//! pod MAC unless `MAC=` asks for another. An `IP=` the kept allocation does
//! not hold releases it instead, so that the new request is served.
//!
//! Failure handling: the steps that create something register its undo on one
//! [`Rollback`] stack: the address (5, also when the allocation's own outcome is
//! unknown) and the veth (6). Registration (8) turns the address's entry into
//! "the endpoint may exist" when it succeeded or failed in a way that may have
//! created the endpoint (a broken connection): undoing it then deletes the
//! endpoint rather than releasing the bare allocation. If any step from 5 on
//! fails, the stack is undone newest first (veth, then the endpoint or the
//! address) before the error is returned; see [`Rollback`] for logging, the
//! deletion queue and cancellation.

use crate::api::{
    AllocateRequest, Allocation, ApiErrorKind, Attachment, Daemon, DaemonConfig, DaemonError,
    Endpoint, EndpointCreate, EndpointSpec,
};
use crate::cni::CniResult;
use crate::cni::result::{Interface, IpConfig, Route};
use crate::delqueue::DeleteQueue;
use crate::links::{Links, PodIfaceConfig, VethPair, VethSpec, host_ifname};

use super::bandwidth;
use super::error::{AttachmentDisplay, PluginError};
use super::request::AddRequest;
use super::rollback::{Rollback, Undo};
use super::step::Step;

/// Runs ADD. See the module docs for the order and the failure handling.
pub(crate) async fn add(
    daemon: &dyn Daemon,
    links: &dyn Links,
    queue: Option<&DeleteQueue>,
    req: &AddRequest,
) -> Result<CniResult, PluginError> {
    let att = &req.attachment;
    validate(req, queue).await?;
    let (stale, config) =
        futures_util::join!(remove_stale_link(links, req), daemon_config(daemon, att));
    let config = config?;
    bandwidth::check_add(req, &config)?;
    let previous = match stale? {
        true => replace_stale_endpoint(daemon, req).await?,
        false => None,
    };
    let pod_mac = req.requested_mac.or(previous.map(|e| e.spec.pod_mac));

    let mut rollback = Rollback::new(daemon, links, queue, att);
    let attached = async {
        let allocation = allocate(daemon, req, &mut rollback).await?;
        let pair = create_veth(links, req, &config, &allocation, pod_mac, &mut rollback).await?;
        let (configured, registered) = futures_util::join!(
            configure_pod(links, req, &allocation),
            register_endpoint(daemon, req, &pair, &allocation, &mut rollback)
        );
        configured?;
        registered?;
        Ok(cni_result(req, &config, &pair, &allocation))
    }
    .await;
    let result = rollback.settle(attached).await?;
    tracing::info!(attachment = %AttachmentDisplay(att), "ADD done");
    Ok(result)
}

/// Step 1: validates the input; refuses while a deletion of this attachment is queued.
async fn validate(req: &AddRequest, queue: Option<&DeleteQueue>) -> Result<(), PluginError> {
    req.validate().map_err(PluginError::Invalid)?;
    if let Some(q) = queue
        && q.contains_off_worker(&req.attachment).await
    {
        return Err(PluginError::DeletionPending {
            attachment: req.attachment.clone(),
        });
    }
    Ok(())
}

/// Step 2: makes ADD idempotent: removes a stale link of the same name in the pod
/// netns. `true` when there was one.
async fn remove_stale_link(links: &dyn Links, req: &AddRequest) -> Result<bool, PluginError> {
    let att = &req.attachment;
    links
        .remove_pod_link(&req.netns, &att.ifname)
        .await
        .map_err(|e| PluginError::link(Step::RemoveStaleLink, att, e))
}

/// Step 2: with a stale link, the endpoint a previous ADD registered for it is stale
/// too: unregisters it, keeping its allocation for step 5, unless the request
/// asks for addresses it does not hold (then releases that too). Returns the
/// endpoint removed, if any.
async fn replace_stale_endpoint(
    daemon: &dyn Daemon,
    req: &AddRequest,
) -> Result<Option<Endpoint>, PluginError> {
    let att = &req.attachment;
    let stale = |e| PluginError::daemon(Step::RemoveStaleEndpoint, att, e);
    let previous = daemon
        .unregister_endpoint(att.clone())
        .await
        .map_err(stale)?;
    let holds_requested = |e: &Endpoint| {
        req.requested_ips
            .iter()
            .all(|ip| e.spec.addresses.iter().any(|a| a.addr() == *ip))
    };
    if previous.as_ref().is_some_and(|e| !holds_requested(e)) {
        daemon.release(att.clone()).await.map_err(stale)?;
    }
    Ok(previous)
}

/// Steps 3–4: the daemon's config (MTU), the first request (which connects
/// to the daemon).
async fn daemon_config(daemon: &dyn Daemon, att: &Attachment) -> Result<DaemonConfig, PluginError> {
    daemon
        .config()
        .await
        .map_err(|e| PluginError::daemon(Step::DaemonConfig, att, e))
}

/// Step 5: allocates the address. Its undo (release) is registered unless the daemon
/// surely allocated nothing.
async fn allocate(
    daemon: &dyn Daemon,
    req: &AddRequest,
    rollback: &mut Rollback<'_>,
) -> Result<Allocation, PluginError> {
    let att = &req.attachment;
    let allocated = daemon
        .allocate(AllocateRequest {
            owner: att.clone(),
            pod: req.pod.clone(),
            requested: req.requested_ips.clone(),
            pool: None,
        })
        .await;
    if may_have_taken_effect(&allocated) {
        rollback.push(Undo::Allocation);
    }
    allocated.map_err(|e| PluginError::daemon(Step::Allocate, att, e))
}

/// Step 6: creates the veth pair (host end named after the attachment, pod end in the
/// pod netns under its final name, with `pod_mac` when given; the host end
/// with IPv6 only when the allocation has an IPv6 address) and registers its
/// removal.
async fn create_veth(
    links: &dyn Links,
    req: &AddRequest,
    config: &DaemonConfig,
    allocation: &Allocation,
    pod_mac: Option<crate::mac::MacAddr>,
    rollback: &mut Rollback<'_>,
) -> Result<VethPair, PluginError> {
    let att = &req.attachment;
    let pair = links
        .create_veth(&VethSpec {
            host_ifname: host_ifname(&att.container_id, &att.ifname),
            netns: req.netns.clone(),
            pod_ifname: att.ifname.clone(),
            mtu: config.mtu,
            pod_mac,
            host_ipv6: allocation
                .addresses
                .iter()
                .any(|a| a.address.addr().is_ipv6()),
        })
        .await
        .map_err(|e| PluginError::link(Step::CreateVeth, att, e))?;
    rollback.push(Undo::Veth {
        host_ifname: pair.host_ifname.clone(),
    });
    Ok(pair)
}

/// Step 7: puts the allocation's addresses and routes on the pod interface
/// and brings it up.
async fn configure_pod(
    links: &dyn Links,
    req: &AddRequest,
    allocation: &Allocation,
) -> Result<(), PluginError> {
    let att = &req.attachment;
    links
        .configure_pod(&req.netns, &att.ifname, &pod_config(allocation))
        .await
        .map_err(|e| PluginError::link(Step::ConfigurePod, att, e))
}

/// Step 8: registers the endpoint (the daemon attaches the host end). Once it is, or
/// may be, registered, undoing the allocation deletes the endpoint.
///
/// A conflict means an endpoint of an earlier ADD is still registered though
/// step 2 found no link of it (an ADD killed while it rolled back): it is
/// unregistered, keeping the allocation, and the registration retried once.
async fn register_endpoint(
    daemon: &dyn Daemon,
    req: &AddRequest,
    pair: &VethPair,
    allocation: &Allocation,
    rollback: &mut Rollback<'_>,
) -> Result<(), PluginError> {
    let body = endpoint_create(req, pair, allocation);
    let mut registered = daemon.create_endpoint(body.clone()).await;
    if registered
        .as_ref()
        .is_err_and(|e| e.kind() == Some(ApiErrorKind::Conflict))
    {
        match daemon.unregister_endpoint(req.attachment.clone()).await {
            Ok(Some(old)) => {
                tracing::warn!(attachment = %AttachmentDisplay(&req.attachment),
                    old_ifindex = old.spec.host_ifindex, "replaced an endpoint whose link was gone");
                registered = daemon.create_endpoint(body).await;
            }
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(error = %crate::error_chain(&e), "cannot replace the registered endpoint")
            }
        }
    }
    if may_have_taken_effect(&registered) {
        rollback.endpoint_may_exist();
    }
    registered
        .map(drop)
        .map_err(|e| PluginError::daemon(Step::RegisterEndpoint, &req.attachment, e))
}

/// True when a daemon call succeeded or failed with an unknown outcome.
fn may_have_taken_effect<T>(answer: &Result<T, DaemonError>) -> bool {
    answer.as_ref().map_or_else(outcome_unknown, |_| true)
}

/// True when a failed request may still have taken effect at the daemon: the
/// connection broke mid-request, or a success answer could not be decoded. A
/// refusal (an API error) or an unreachable daemon means nothing happened.
fn outcome_unknown(e: &DaemonError) -> bool {
    !(e.kind().is_some() || e.is_unreachable())
}

fn pod_config(allocation: &Allocation) -> PodIfaceConfig {
    PodIfaceConfig {
        addresses: allocation.addresses.iter().map(|a| a.address).collect(),
        routes: allocation.routes.clone(),
    }
}

fn endpoint_create(req: &AddRequest, pair: &VethPair, allocation: &Allocation) -> EndpointCreate {
    EndpointCreate {
        spec: EndpointSpec {
            owner: req.attachment.clone(),
            pod: req.pod.clone(),
            host_ifname: pair.host_ifname.clone(),
            host_ifindex: pair.host_ifindex,
            host_mac: pair.host_mac,
            pod_mac: pair.pod_mac,
            addresses: allocation.addresses.iter().map(|a| a.address).collect(),
            netns: req.netns.display().to_string(),
            bandwidth: req.bandwidth,
            identity: Default::default(),
        },
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

#[cfg(test)]
#[path = "add_repeat_tests.rs"]
mod repeat_tests;
