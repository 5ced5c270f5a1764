//! Bandwidth limits in the plugin's sequences: what ADD refuses before it
//! creates anything, and what CHECK verifies.
//!
//! ADD passes the limits to the daemon with the endpoint (`bandwidth` in
//! `POST /endpoint/create`, absent for an unlimited pod); the daemon's
//! dataplane enforces them. Two configurations cannot work and are refused
//! up front (error 7, naming the fix), so a pod is never left half shaped:
//! limits on a daemon whose dataplane cannot enforce them, and, on the eBPF
//! dataplane, a conflist chaining the reference `bandwidth` plugin after
//! Sarena (see [`crate::cni::chain`]).

use crate::api::{Attachment, BandwidthLimits, Daemon, DaemonConfig, Endpoint};
use crate::cni::chain::REFERENCE_BANDWIDTH;
use crate::cni::{CniError, ErrorCode};

use super::error::PluginError;
use super::request::AddRequest;
use super::step::Step;

fn refuse(msg: String) -> PluginError {
    PluginError::Invalid(CniError::new(ErrorCode::InvalidConfig, msg))
}

/// ADD, after the daemon's config: the request's limits can be enforced,
/// and nothing in the chain will try to shape the pod behind Sarena's back.
pub(super) fn check_add(req: &AddRequest, config: &DaemonConfig) -> Result<(), PluginError> {
    let ebpf = config
        .dataplane_mode()
        .is_some_and(|mode| mode.enforces_bandwidth());
    if let Some(limits) = &req.bandwidth
        && !ebpf
    {
        return Err(refuse(format!(
            "runtimeConfig.bandwidth ({limits}): Sarena enforces bandwidth limits on its eBPF \
             dataplane only, and this daemon runs the {} dataplane; on it, chain the reference \
             `{REFERENCE_BANDWIDTH}` plugin after Sarena instead of declaring the capability on \
             Sarena's entry",
            config.dataplane
        )));
    }
    if !ebpf {
        return Ok(());
    }
    let Some(check) = &req.chain_check else {
        return Ok(());
    };
    if let Some(file) = check.reference_bandwidth_after_us() {
        return Err(refuse(format!(
            "network {:?} ({}) chains the reference `{REFERENCE_BANDWIDTH}` plugin after {}: on \
             Sarena's eBPF dataplane it cannot shape the pod (Sarena holds the host veth's root \
             and clsact qdiscs, and pod-to-pod traffic is redirected past them). Remove it from \
             the chain and declare \"capabilities\": {{\"bandwidth\": true}} on the {} entry: \
             Sarena then enforces the same limits itself",
            check.network,
            file.display(),
            check.plugin_type,
            check.plugin_type
        )));
    }
    Ok(())
}

/// CHECK, once the endpoint is known to be registered: it carries exactly
/// the limits the runtime asks for, and when it has any, the daemon reports
/// them enforced with nothing missing (one more request, for limited pods
/// only).
pub(super) async fn check_limits(
    daemon: &dyn Daemon,
    att: &Attachment,
    want: Option<BandwidthLimits>,
    endpoint: &Endpoint,
) -> Result<(), PluginError> {
    let mismatch = |what: &str, expected: String, found: String| PluginError::CheckMismatch {
        attachment: att.clone(),
        what: what.to_string(),
        expected,
        found,
    };
    let show = |limits: Option<BandwidthLimits>| limits.map_or("none".into(), |l| l.to_string());
    if endpoint.spec.bandwidth != want {
        return Err(mismatch(
            "bandwidth limits at the daemon",
            show(want),
            show(endpoint.spec.bandwidth),
        ));
    }
    let Some(want) = want else {
        return Ok(());
    };
    let stats = daemon
        .endpoint_stats_of(att.clone())
        .await
        .map_err(|e| PluginError::daemon(Step::LookupEndpoint, att, e))?;
    let Some(status) = stats.and_then(|s| s.bandwidth) else {
        return Err(mismatch(
            "bandwidth shaping in the dataplane",
            "in place".into(),
            "not reported by the daemon".into(),
        ));
    };
    if !status.problems.is_empty() {
        return Err(mismatch(
            "bandwidth shaping in the dataplane",
            "in place".into(),
            status.problems.join("; "),
        ));
    }
    // The daemon compares its pacers with the registered limits (bursts
    // as capped) and reports any difference among the problems.
    if status.enforced.is_none() {
        return Err(mismatch(
            "bandwidth limits in the dataplane",
            want.to_string(),
            "none".into(),
        ));
    }
    Ok(())
}

#[cfg(test)]
#[path = "bandwidth_tests.rs"]
mod tests;
