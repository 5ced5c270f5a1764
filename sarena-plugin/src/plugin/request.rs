//! Validated requests for the plugin sequences, built from the CNI environment
//! and network config ([`AddRequest::from_cni`], …) or directly by an embedder.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use crate::api::{Attachment, BandwidthLimits, PodRef};
use crate::cni::chain::{ChainCheck, DEFAULT_CONF_DIR};
use crate::cni::{CniEnv, CniError, CniResult, ErrorCode, NetConf, Version, validate};

fn missing_netns(what: &str) -> CniError {
    CniError::new(
        ErrorCode::InvalidEnvironment,
        format!("missing environment variable CNI_NETNS (required by {what})"),
    )
}

/// The attachment named by `CNI_CONTAINERID` and `CNI_IFNAME`.
fn attachment(env: &CniEnv) -> Result<Attachment, CniError> {
    Ok(Attachment {
        container_id: env.require_container_id()?.to_string(),
        ifname: env.require_ifname()?.to_string(),
    })
}

/// Checks the attachment's container id and interface name (code 4 naming the variable).
fn validate_attachment(att: &Attachment) -> Result<(), CniError> {
    validate::container_id(&att.container_id)?;
    validate::interface_name(&att.ifname)
}

/// [`validate_attachment`] plus a non-empty netns path, which `command` requires.
fn validate_attachment_in(att: &Attachment, netns: &Path, command: &str) -> Result<(), CniError> {
    validate_attachment(att)?;
    if netns.as_os_str().is_empty() {
        return Err(missing_netns(command));
    }
    Ok(())
}

/// ADD: everything needed to attach one interface of one container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddRequest {
    /// `CNI_CONTAINERID` / `CNI_IFNAME`.
    pub attachment: Attachment,
    /// `CNI_NETNS`: the pod's network namespace.
    pub netns: PathBuf,
    /// The pod, from `CNI_ARGS` (`K8S_POD_*`).
    pub pod: PodRef,
    /// Static addresses asked for (`CNI_ARGS IP=`, `runtimeConfig.ips`, `args.cni.ips`).
    pub requested_ips: Vec<IpAddr>,
    /// Pod-side MAC asked for (`CNI_ARGS MAC=`).
    pub requested_mac: Option<crate::mac::MacAddr>,
    /// The config's `cniVersion`, in which the result is printed.
    pub version: Version,
    /// The pod's bandwidth limits (`runtimeConfig.bandwidth`); `None` for an
    /// unlimited pod.
    pub bandwidth: Option<BandwidthLimits>,
    /// Where ADD looks for a reference `bandwidth` plugin chained after
    /// Sarena, which it refuses on the eBPF dataplane; `None` skips the look
    /// (an embedder without a conflist).
    pub chain_check: Option<ChainCheck>,
}

impl AddRequest {
    /// Builds the request for `CNI_COMMAND=ADD`. A `prevResult` is an error (code 7
    /// naming it): Sarena creates the interface and must be first in a chain.
    pub fn from_cni(env: &CniEnv, conf: &NetConf) -> Result<AddRequest, CniError> {
        let version = conf.version()?;
        if conf.prev_result.is_some() {
            return Err(CniError::new(
                ErrorCode::InvalidConfig,
                "prevResult: not allowed on ADD; Sarena must be the first plugin in a chain",
            ));
        }
        let attachment = attachment(env)?;
        let netns = env.netns.clone().ok_or_else(|| missing_netns("ADD"))?;
        let mut requested_ips = env.args.ips.clone();
        for ip in conf.requested_ips()? {
            if !requested_ips.contains(&ip) {
                requested_ips.push(ip);
            }
        }
        let req = AddRequest {
            attachment,
            netns,
            pod: PodRef {
                namespace: env.args.pod_namespace.clone(),
                name: env.args.pod_name.clone(),
                uid: env.args.pod_uid.clone(),
            },
            requested_ips,
            requested_mac: env.args.mac,
            version,
            bandwidth: conf.bandwidth()?,
            chain_check: Some(chain_check(conf)),
        };
        req.validate()?;
        Ok(req)
    }

    /// ADD step 1: checks what an embedder may have filled in by hand — the container
    /// id and interface name (code 4), a non-empty netns path (code 4).
    pub fn validate(&self) -> Result<(), CniError> {
        validate_attachment_in(&self.attachment, &self.netns, "ADD")
    }
}

/// What ADD checks the runtime's conflist for (see [`ChainCheck`]).
fn chain_check(conf: &NetConf) -> ChainCheck {
    ChainCheck {
        conf_dir: conf
            .cni_conf_dir
            .clone()
            .unwrap_or_else(|| DEFAULT_CONF_DIR.into()),
        network: conf.name.clone(),
        plugin_type: conf.plugin_type.clone(),
    }
}

/// DEL: what to tear down. The netns may be absent (the runtime already removed it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DelRequest {
    /// `CNI_CONTAINERID` / `CNI_IFNAME`.
    pub attachment: Attachment,
    /// `CNI_NETNS`, when given.
    pub netns: Option<PathBuf>,
}

impl DelRequest {
    /// Builds the request for `CNI_COMMAND=DEL`. A `prevResult` is accepted and ignored.
    pub fn from_cni(env: &CniEnv, _conf: &NetConf) -> Result<DelRequest, CniError> {
        let req = DelRequest {
            attachment: attachment(env)?,
            netns: env.netns.clone().filter(|p| !p.as_os_str().is_empty()),
        };
        req.validate()?;
        Ok(req)
    }

    /// Checks the container id and interface name (code 4).
    pub fn validate(&self) -> Result<(), CniError> {
        validate_attachment(&self.attachment)
    }
}

/// CHECK: what ADD set up, per the runtime's `prevResult`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckRequest {
    /// `CNI_CONTAINERID` / `CNI_IFNAME`.
    pub attachment: Attachment,
    /// `CNI_NETNS`.
    pub netns: PathBuf,
    /// The parsed `prevResult`.
    pub prev_result: CniResult,
    /// The config's `cniVersion`.
    pub version: Version,
    /// The limits the runtime asks for (`runtimeConfig.bandwidth`, sent on
    /// CHECK as on ADD); the endpoint must have exactly these in place.
    pub bandwidth: Option<BandwidthLimits>,
}

impl CheckRequest {
    /// Builds the request for `CNI_COMMAND=CHECK`: `prevResult` is required (code 7
    /// naming it) and decoded in the config's version.
    pub fn from_cni(env: &CniEnv, conf: &NetConf) -> Result<CheckRequest, CniError> {
        let version = conf.version()?;
        let prev = conf.prev_result.as_ref().ok_or_else(|| {
            CniError::new(
                ErrorCode::InvalidConfig,
                "prevResult: required by CHECK but missing",
            )
        })?;
        let prev_result = CniResult::from_json(prev, version)?;
        let req = CheckRequest {
            attachment: attachment(env)?,
            netns: env.netns.clone().ok_or_else(|| missing_netns("CHECK"))?,
            prev_result,
            version,
            bandwidth: conf.bandwidth()?,
        };
        req.validate()?;
        Ok(req)
    }

    /// Checks the container id, interface name and netns path (code 4).
    pub fn validate(&self) -> Result<(), CniError> {
        validate_attachment_in(&self.attachment, &self.netns, "CHECK")
    }
}

/// GC: the attachments the runtime still uses; everything else of Sarena's goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GcRequest {
    /// Valid attachments (`cni.dev/valid-attachments`, or the older `cni.dev/attachments`).
    pub valid: Vec<Attachment>,
}

impl GcRequest {
    /// Builds the request for `CNI_COMMAND=GC`. Without a list of valid attachments
    /// GC would remove everything, so a config without one is an error (code 7).
    pub fn from_cni(_env: &CniEnv, conf: &NetConf) -> Result<GcRequest, CniError> {
        let list = conf.gc_valid_attachments().ok_or_else(|| {
            CniError::new(
                ErrorCode::InvalidConfig,
                "cni.dev/valid-attachments: required by GC but missing",
            )
        })?;
        Ok(GcRequest {
            valid: list
                .into_iter()
                .map(|a| Attachment {
                    container_id: a.container_id,
                    ifname: a.ifname,
                })
                .collect(),
        })
    }
}

#[cfg(test)]
#[path = "request_tests.rs"]
mod tests;
