//! `setup` and `teardown`: Sarena's ADD and DEL for one container on one
//! network, from netavark's input, and the status block from ADD's result.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::Path;

use crate::api::{Attachment, PodRef};
use crate::cni::{CniError, CniResult, ErrorCode, Version};
use crate::mac::MacAddr;
use crate::plugin::{AddRequest, DelRequest, Plugin};

use super::error::NetavarkError;
use super::types::{NetAddress, NetInterface, NetworkPluginExec, StatusBlock};

/// The ADD request for `exec` in the netns at `netns`: the container's id
/// and interface name as the attachment, its name as the pod's name (no
/// namespace: not a Kubernetes pod), its static addresses and MAC. Port
/// mappings and per-container options are refused, not ignored; DNS
/// aliases are ignored, as the plugin API asks of a network without DNS.
pub fn add_request(netns: &Path, exec: &NetworkPluginExec) -> Result<AddRequest, NetavarkError> {
    let refuse = |field: &str, reason: &str| NetavarkError::UnsupportedForContainer {
        container: exec.container_name.clone(),
        network: exec.network.name.clone(),
        field: field.to_string(),
        reason: reason.to_string(),
    };
    let invalid = |source: CniError| NetavarkError::InvalidContainer {
        container: exec.container_name.clone(),
        network: exec.network.name.clone(),
        source,
    };
    if let Some(mapping) = exec.port_mappings.iter().flatten().next() {
        return Err(refuse(
            "port_mappings",
            &format!(
                "port mappings are not supported (asked: host port {} to container port {}): publish the port another way, or reach the container at its address",
                mapping.host_port, mapping.container_port
            ),
        ));
    }
    let opts = &exec.network_options;
    if let Some(key) = opts.options.iter().flatten().map(|(k, _)| k).next() {
        return Err(refuse(
            &format!("network_options.options.{key}"),
            "per-container options are not supported",
        ));
    }
    let requested_mac = match opts.static_mac.as_deref() {
        None | Some("") => None,
        Some(mac) => Some(mac.parse::<MacAddr>().map_err(|e| {
            invalid(CniError::new(
                ErrorCode::InvalidConfig,
                format!("static_mac: {mac:?} is not a MAC address: {e}"),
            ))
        })?),
    };
    let mut requested_ips: Vec<IpAddr> = Vec::new();
    for ip in opts.static_ips.iter().flatten() {
        if !requested_ips.contains(ip) {
            requested_ips.push(*ip);
        }
    }
    let req = AddRequest {
        attachment: attachment(exec),
        netns: netns.to_path_buf(),
        pod: PodRef {
            namespace: None,
            name: Some(exec.container_name.clone()).filter(|n| !n.is_empty()),
            uid: None,
        },
        requested_ips,
        requested_mac,
        version: Version::LATEST,
        bandwidth: None,
        chain_check: None,
    };
    req.validate().map_err(invalid)?;
    Ok(req)
}

/// The DEL request for `exec`; the netns may already be gone.
pub fn del_request(netns: &Path, exec: &NetworkPluginExec) -> Result<DelRequest, NetavarkError> {
    let req = DelRequest {
        attachment: attachment(exec),
        netns: Some(netns.to_path_buf()).filter(|p| !p.as_os_str().is_empty()),
    };
    req.validate()
        .map_err(|source| NetavarkError::InvalidContainer {
            container: exec.container_name.clone(),
            network: exec.network.name.clone(),
            source,
        })?;
    Ok(req)
}

fn attachment(exec: &NetworkPluginExec) -> Attachment {
    Attachment {
        container_id: exec.container_id.clone(),
        ifname: exec.network_options.interface_name.clone(),
    }
}

/// The status block of ADD's `result` for the interface `ifname`: its MAC,
/// its addresses (with prefix and gateway), and the result's DNS settings.
pub fn status_block(
    container: &str,
    ifname: &str,
    result: &CniResult,
) -> Result<StatusBlock, NetavarkError> {
    let found = result
        .interfaces
        .iter()
        .enumerate()
        .find(|(_, i)| i.name == ifname && i.sandbox.is_some());
    let Some((index, mac)) = found.and_then(|(n, i)| Some((n, i.mac.clone()?))) else {
        return Err(NetavarkError::NoInterface {
            container: container.to_string(),
            ifname: ifname.to_string(),
        });
    };
    let subnets = result
        .ips
        .iter()
        .filter(|ip| ip.interface.is_none_or(|i| i == index))
        .map(|ip| NetAddress {
            ipnet: ip.address,
            gateway: ip.gateway,
        })
        .collect();
    let servers: Vec<IpAddr> = result
        .dns
        .nameservers
        .iter()
        .filter_map(|s| s.parse().ok())
        .collect();
    Ok(StatusBlock {
        dns_search_domains: Some(result.dns.search.clone()).filter(|s| !s.is_empty()),
        dns_server_ips: Some(servers).filter(|s| !s.is_empty()),
        interfaces: Some(BTreeMap::from([(
            ifname.to_string(),
            NetInterface {
                mac_address: mac,
                subnets: Some(subnets),
            },
        )])),
    })
}

/// `setup`: ADD for `exec` in `netns` through `plugin`, and its status
/// block. A repeated `setup` of the same container and interface keeps its
/// address (ADD is idempotent per attachment).
pub async fn setup(
    plugin: &Plugin,
    netns: &Path,
    exec: &NetworkPluginExec,
) -> Result<StatusBlock, NetavarkError> {
    let req = add_request(netns, exec)?;
    let result = plugin.add(&req).await.map_err(failed("setup", exec))?;
    let block = status_block(
        &exec.container_name,
        &exec.network_options.interface_name,
        &result,
    );
    if block.is_err() {
        // netavark tears down only the networks set up before a failed
        // one: what this ADD made goes now.
        if let Err(e) = plugin.del(&del_request(netns, exec)?).await {
            tracing::warn!(error = %crate::error_chain(&e), "setup failed after ADD; its DEL failed too");
        }
    }
    block
}

/// `teardown`: DEL for `exec` through `plugin`: best effort and
/// idempotent; with a deletion queue, a daemon that cannot be reached gets
/// the deletion later (see [`Plugin::del`]).
pub async fn teardown(
    plugin: &Plugin,
    netns: &Path,
    exec: &NetworkPluginExec,
) -> Result<(), NetavarkError> {
    let req = del_request(netns, exec)?;
    plugin.del(&req).await.map_err(failed("teardown", exec))
}

/// The error of `operation` (`setup`, `teardown`) on `exec` failing.
fn failed<'a>(
    operation: &'static str,
    exec: &'a NetworkPluginExec,
) -> impl FnOnce(crate::plugin::PluginError) -> NetavarkError + 'a {
    move |source| NetavarkError::Operation {
        operation,
        container: exec.container_name.clone(),
        network: exec.network.name.clone(),
        source: Box::new(source),
    }
}
