//! CHECK: compares what ADD reported (`prevResult`) with what exists, without
//! changing anything. The first difference found is error 102 naming it.
//!
//! Checked, in order: the endpoint is registered at the daemon with the same
//! addresses and pod MAC, and the same bandwidth limits as the runtime asks
//! for, in place in the dataplane (see `bandwidth.rs`); the pod interface exists in the netns, is up, and has
//! prevResult's MAC, addresses and routes; the host end of the veth exists.

use std::fmt::Display;

use ipnet::IpNet;

use crate::api::{Attachment, Daemon, Endpoint, RouteSpec};
use crate::cni::result::Route;
use crate::links::{Links, host_ifname};

use super::bandwidth;
use super::error::PluginError;
use super::request::CheckRequest;
use super::step::Step;

/// What prevResult says about this attachment.
struct Expected {
    sandbox: Option<String>,
    pod_mac: Option<String>,
    addresses: Vec<IpNet>,
    routes: Vec<Route>,
    host_ifname: String,
}

/// Runs CHECK: prevResult's sandbox, then the endpoint at the daemon, the pod
/// interface and the host link; the first difference is the error.
pub(crate) async fn check(
    daemon: &dyn Daemon,
    links: &dyn Links,
    req: &CheckRequest,
) -> Result<(), PluginError> {
    req.validate().map_err(PluginError::Invalid)?;
    let att = &req.attachment;
    let want = expected(req)?;
    check_sandbox(req, &want)?;
    let endpoint = check_endpoint(daemon, att, &want).await?;
    bandwidth::check_limits(daemon, att, req.bandwidth, &endpoint).await?;
    check_pod(links, req, &want).await?;
    check_host_link(links, att, &want).await?;
    tracing::info!(container_id = %att.container_id, ifname = %att.ifname, "CHECK passed");
    Ok(())
}

/// A [`PluginError::CheckMismatch`] of `what` on `att`.
fn mismatch(
    att: &Attachment,
    what: &str,
    expected: &dyn Display,
    found: &dyn Display,
) -> PluginError {
    PluginError::CheckMismatch {
        attachment: att.clone(),
        what: what.to_string(),
        expected: expected.to_string(),
        found: found.to_string(),
    }
}

/// prevResult's sandbox, when it names one, is `CNI_NETNS`.
fn check_sandbox(req: &CheckRequest, want: &Expected) -> Result<(), PluginError> {
    match &want.sandbox {
        Some(sandbox) if sandbox != &req.netns.display().to_string() => Err(mismatch(
            &req.attachment,
            "sandbox (CNI_NETNS)",
            sandbox,
            &req.netns.display(),
        )),
        _ => Ok(()),
    }
}

/// The endpoint is registered at the daemon with prevResult's addresses and
/// pod MAC; returns it.
async fn check_endpoint(
    daemon: &dyn Daemon,
    att: &Attachment,
    want: &Expected,
) -> Result<Endpoint, PluginError> {
    let endpoint = daemon
        .endpoint(att.clone())
        .await
        .map_err(|e| PluginError::daemon(Step::LookupEndpoint, att, e))?;
    let Some(endpoint) = endpoint else {
        return Err(mismatch(
            att,
            "endpoint at the daemon",
            &"registered",
            &"not registered",
        ));
    };
    if sorted(&endpoint.spec.addresses) != sorted(&want.addresses) {
        return Err(mismatch(
            att,
            "endpoint addresses at the daemon",
            &list(&want.addresses),
            &list(&endpoint.spec.addresses),
        ));
    }
    if let Some(mac) = &want.pod_mac
        && mac.parse() != Ok(endpoint.spec.pod_mac)
    {
        return Err(mismatch(
            att,
            "endpoint pod MAC at the daemon",
            mac,
            &endpoint.spec.pod_mac,
        ));
    }
    Ok(endpoint)
}

/// The pod interface exists, has prevResult's MAC and addresses, is up, and
/// has prevResult's routes.
async fn check_pod(
    links: &dyn Links,
    req: &CheckRequest,
    want: &Expected,
) -> Result<(), PluginError> {
    let att = &req.attachment;
    let pod = links
        .inspect_pod(&req.netns, &att.ifname)
        .await
        .map_err(|e| PluginError::link(Step::InspectPod, att, e))?;
    let Some(pod) = pod else {
        return Err(mismatch(
            att,
            &format!("pod interface {}", att.ifname),
            &"present",
            &"missing",
        ));
    };
    if let Some(mac) = &want.pod_mac
        && mac.parse() != Ok(pod.mac)
    {
        return Err(mismatch(att, "pod interface MAC", mac, &pod.mac));
    }
    if let Some(missing) = want.addresses.iter().find(|a| !pod.addresses.contains(a)) {
        return Err(mismatch(
            att,
            "pod interface addresses",
            &format!("{missing} among them"),
            &list(&pod.addresses),
        ));
    }
    if !pod.up {
        return Err(mismatch(att, "pod interface state", &"up", &"down"));
    }
    if let Some(route) = want
        .routes
        .iter()
        .find(|r| !pod.routes.iter().any(|f| same_route(r, f)))
    {
        return Err(mismatch(
            att,
            "pod routes",
            &format!("{} via {}", route.dst, show_gw(route.gw)),
            &pod.routes
                .iter()
                .map(|r| format!("{} via {}", r.dst, show_gw(r.gw)))
                .collect::<Vec<_>>()
                .join(", "),
        ));
    }
    Ok(())
}

/// The host end of the veth exists.
async fn check_host_link(
    links: &dyn Links,
    att: &Attachment,
    want: &Expected,
) -> Result<(), PluginError> {
    let host = links
        .host_link_index(&want.host_ifname)
        .await
        .map_err(|e| PluginError::link(Step::InspectHostLink, att, e))?;
    if host.is_none() {
        return Err(mismatch(
            att,
            &format!("host link {}", want.host_ifname),
            &"present",
            &"missing",
        ));
    }
    Ok(())
}

/// Reads the pod interface (named `CNI_IFNAME`, preferably one with a sandbox), its
/// addresses, and the host interface name from prevResult.
fn expected(req: &CheckRequest) -> Result<Expected, PluginError> {
    let att: &Attachment = &req.attachment;
    let prev = &req.prev_result;
    let pod_index = prev
        .interfaces
        .iter()
        .position(|i| i.name == att.ifname && i.sandbox.is_some())
        .or_else(|| prev.interfaces.iter().position(|i| i.name == att.ifname));
    let Some(pod_index) = pod_index else {
        return Err(PluginError::CheckMismatch {
            attachment: att.clone(),
            what: "prevResult interfaces".into(),
            expected: format!("an interface named {}", att.ifname),
            found: prev
                .interfaces
                .iter()
                .map(|i| i.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        });
    };
    let pod = &prev.interfaces[pod_index];
    let host_ifname = host_ifname(&att.container_id, &att.ifname);
    if let Some(host) = prev
        .interfaces
        .iter()
        .find(|i| i.sandbox.is_none() && i.name != att.ifname)
        && host.name != host_ifname
    {
        return Err(PluginError::CheckMismatch {
            attachment: att.clone(),
            what: "host interface name".into(),
            expected: host_ifname,
            found: host.name.clone(),
        });
    }
    Ok(Expected {
        sandbox: pod.sandbox.clone(),
        pod_mac: pod.mac.clone(),
        addresses: prev
            .ips
            .iter()
            .filter(|ip| ip.interface.is_none_or(|i| i == pod_index))
            .map(|ip| ip.address)
            .collect(),
        routes: prev.routes.clone(),
        host_ifname,
    })
}

fn same_route(want: &Route, found: &RouteSpec) -> bool {
    want.dst.trunc() == found.dst.trunc() && want.gw == found.gw
}

fn show_gw(gw: Option<std::net::IpAddr>) -> String {
    gw.map_or_else(|| "link".to_string(), |g| g.to_string())
}

fn sorted(nets: &[IpNet]) -> Vec<IpNet> {
    let mut v = nets.to_vec();
    v.sort();
    v
}

fn list(nets: &[IpNet]) -> String {
    if nets.is_empty() {
        return "none".into();
    }
    sorted(nets)
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
#[path = "check_tests.rs"]
mod tests;
