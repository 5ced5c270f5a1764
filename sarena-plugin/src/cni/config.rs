//! The network configuration the runtime sends on stdin.

use std::net::IpAddr;
use std::path::PathBuf;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::args::parse_ip_maybe_cidr;
use super::env::Command;
use super::error::{CniError, ErrorCode};
use super::validate;
use super::version::{Version, truncate};

/// One plugin's network configuration as sent on stdin (the conflist header
/// merged with Sarena's plugin entry by the runtime).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NetConf {
    /// `cniVersion`; absent means 0.1.0.
    #[serde(
        default,
        rename = "cniVersion",
        skip_serializing_if = "Option::is_none"
    )]
    pub cni_version: Option<String>,
    /// Network name.
    #[serde(default)]
    pub name: String,
    /// Plugin type (binary name).
    #[serde(default, rename = "type")]
    pub plugin_type: String,
    /// Sarena: debug-level logging.
    #[serde(default, rename = "enable-debug")]
    pub enable_debug: bool,
    /// Sarena: where the plugin logs.
    #[serde(default, rename = "log-file", skip_serializing_if = "Option::is_none")]
    pub log_file: Option<PathBuf>,
    /// Sarena: the size past which `log-file` is rotated to `<log-file>.1`
    /// (at least [`MIN_LOG_MAX_BYTES`]; [`DEFAULT_LOG_MAX_BYTES`] when absent).
    #[serde(
        default,
        rename = "log-max-bytes",
        skip_serializing_if = "Option::is_none"
    )]
    pub log_max_bytes: Option<u64>,
    /// Sarena: daemon endpoint — a Unix socket path, `unix://PATH`, or `http://HOST:PORT`.
    #[serde(
        default,
        rename = "daemon-endpoint",
        skip_serializing_if = "Option::is_none"
    )]
    pub daemon_endpoint: Option<String>,
    /// Sarena: the token file for an `http://` daemon endpoint (default
    /// `/var/lib/sarena/api-token` when it exists); not read for a Unix socket.
    #[serde(
        default,
        rename = "daemon-token-file",
        skip_serializing_if = "Option::is_none"
    )]
    pub daemon_token_file: Option<PathBuf>,
    /// Sarena: where DELs that could not reach the daemon are queued.
    #[serde(
        default,
        rename = "delete-queue-dir",
        skip_serializing_if = "Option::is_none"
    )]
    pub delete_queue_dir: Option<PathBuf>,
    /// Sarena: the runtime's network config directory, where ADD looks for
    /// what the network chains after Sarena (default `/etc/cni/net.d`; see
    /// [`super::chain`]).
    #[serde(
        default,
        rename = "cni-conf-dir",
        skip_serializing_if = "Option::is_none"
    )]
    pub cni_conf_dir: Option<PathBuf>,
    /// The previous plugin's result (CHECK, DEL; an error on ADD).
    #[serde(
        default,
        rename = "prevResult",
        skip_serializing_if = "Option::is_none"
    )]
    pub prev_result: Option<Value>,
    /// Capability arguments from the runtime.
    #[serde(
        default,
        rename = "runtimeConfig",
        skip_serializing_if = "Option::is_none"
    )]
    pub runtime_config: Option<Map<String, Value>>,
    /// Capabilities the plugin entry declares.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<Map<String, Value>>,
    /// Conventional `args` (e.g. `args.cni.ips`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Map<String, Value>>,
    /// GC: attachments still in use (`cni.dev/valid-attachments`).
    #[serde(
        default,
        rename = "cni.dev/valid-attachments",
        skip_serializing_if = "Option::is_none"
    )]
    pub valid_attachments: Option<Vec<GcAttachment>>,
    /// GC: the older key libcni still sends (`cni.dev/attachments`).
    #[serde(
        default,
        rename = "cni.dev/attachments",
        skip_serializing_if = "Option::is_none"
    )]
    pub attachments: Option<Vec<GcAttachment>>,
    /// Every other field, kept as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `log-max-bytes` when the config has none: 10 MiB.
pub const DEFAULT_LOG_MAX_BYTES: u64 = 10 << 20;
/// The smallest `log-max-bytes` accepted.
pub const MIN_LOG_MAX_BYTES: u64 = 4096;

/// One entry of a GC request's attachment list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GcAttachment {
    /// Container id.
    #[serde(rename = "containerID")]
    pub container_id: String,
    /// Interface name.
    pub ifname: String,
}

fn decode_error(what: &str, err: impl std::fmt::Display) -> CniError {
    CniError::new(ErrorCode::Decode, format!("failed to decode {what}"))
        .with_details(err.to_string())
}

fn invalid(msg: String) -> CniError {
    CniError::new(ErrorCode::InvalidConfig, msg)
}

/// Removes `key` from `map` and decodes it; absent or `null` is `None`.
/// A value of the wrong type is error 6 naming the field.
fn take<T: DeserializeOwned>(
    map: &mut Map<String, Value>,
    key: &str,
) -> Result<Option<T>, CniError> {
    match map.remove(key) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => serde_json::from_value(value)
            .map(Some)
            .map_err(|e| decode_error(&format!("network config field `{key}`"), e)),
    }
}

impl NetConf {
    /// Parses and validates the configuration read from stdin.
    ///
    /// - Not JSON, not an object, or a known field of the wrong type: error 6
    ///   (the message names the field).
    /// - `name` missing or not a valid network name, `type` missing or not a
    ///   file name, a malformed `daemon-endpoint`: error 7 naming the field.
    /// - `cniVersion` missing (or empty) means 0.1.0; unsupported is error 1.
    ///
    /// Unknown fields are kept in [`NetConf::extra`]; `null` values of known
    /// fields count as absent.
    ///
    /// ```
    /// use sarena_plugin::cni::{NetConf, Version};
    /// let conf = NetConf::parse(br#"{"cniVersion":"1.1.0","name":"sarena","type":"sarena-cni","mtu":9000}"#).unwrap();
    /// assert_eq!(conf.version().unwrap(), Version::V1_1_0);
    /// assert_eq!(conf.extra["mtu"], 9000);
    /// ```
    pub fn parse(stdin: &[u8]) -> Result<NetConf, CniError> {
        let value: Value =
            serde_json::from_slice(stdin).map_err(|e| decode_error("network config", e))?;
        let Value::Object(mut map) = value else {
            return Err(CniError::new(
                ErrorCode::Decode,
                "network config is not a JSON object",
            ));
        };
        let conf = NetConf {
            cni_version: take(&mut map, "cniVersion")?,
            name: take(&mut map, "name")?.unwrap_or_default(),
            plugin_type: take(&mut map, "type")?.unwrap_or_default(),
            enable_debug: take(&mut map, "enable-debug")?.unwrap_or_default(),
            log_file: take(&mut map, "log-file")?,
            log_max_bytes: take(&mut map, "log-max-bytes")?,
            daemon_endpoint: take(&mut map, "daemon-endpoint")?,
            daemon_token_file: take(&mut map, "daemon-token-file")?,
            delete_queue_dir: take(&mut map, "delete-queue-dir")?,
            cni_conf_dir: take(&mut map, "cni-conf-dir")?,
            prev_result: take(&mut map, "prevResult")?,
            runtime_config: take(&mut map, "runtimeConfig")?,
            capabilities: take(&mut map, "capabilities")?,
            args: take(&mut map, "args")?,
            valid_attachments: take(&mut map, "cni.dev/valid-attachments")?,
            attachments: take(&mut map, "cni.dev/attachments")?,
            extra: map,
        };
        conf.version()?;
        conf.validate()?;
        Ok(conf)
    }

    fn validate(&self) -> Result<(), CniError> {
        if self.name.is_empty() {
            return Err(invalid("missing network config field `name`".into()));
        }
        validate::network_name(&self.name)?;
        if self.plugin_type.is_empty() {
            return Err(invalid("missing network config field `type`".into()));
        }
        if self.plugin_type.contains(['/', '\\', '\0']) {
            return Err(invalid(format!(
                "invalid network config field `type` {:?}: must be a file name",
                truncate(&self.plugin_type)
            )));
        }
        if let Some(prev) = &self.prev_result
            && !prev.is_object()
        {
            return Err(CniError::new(
                ErrorCode::Decode,
                "`prevResult` is not a JSON object",
            ));
        }
        if let Some(endpoint) = &self.daemon_endpoint {
            check_endpoint(endpoint)?;
        }
        if let Some(max) = self.log_max_bytes
            && max < MIN_LOG_MAX_BYTES
        {
            return Err(invalid(format!(
                "invalid network config field `log-max-bytes` {max}: must be at least {MIN_LOG_MAX_BYTES}"
            )));
        }
        for path in [
            &self.log_file,
            &self.delete_queue_dir,
            &self.cni_conf_dir,
            &self.daemon_token_file,
        ]
        .into_iter()
        .flatten()
        {
            if path.as_os_str().is_empty() {
                return Err(invalid("network config has an empty path field".into()));
            }
        }
        Ok(())
    }

    /// The size past which `log-file` is rotated: `log-max-bytes`, else
    /// [`DEFAULT_LOG_MAX_BYTES`].
    pub fn log_max_bytes(&self) -> u64 {
        self.log_max_bytes.unwrap_or(DEFAULT_LOG_MAX_BYTES)
    }

    /// The config's version: `cniVersion`, or 0.1.0 when it is absent or empty.
    /// Unsupported is error 1.
    pub fn version(&self) -> Result<Version, CniError> {
        match self.cni_version.as_deref() {
            None | Some("") => Ok(Version::V0_1_0),
            Some(v) => Version::parse(v),
        }
    }

    /// Addresses the runtime asks for: the `ips` capability
    /// (`runtimeConfig.ips`) then `args.cni.ips` (CONVENTIONS.md), each entry
    /// `"<ip>[/<prefix>]"` with the prefix dropped, duplicates removed.
    /// A malformed list or entry is error 7 naming the field.
    pub fn requested_ips(&self) -> Result<Vec<IpAddr>, CniError> {
        let mut out = Vec::new();
        if let Some(ips) = self.runtime_config.as_ref().and_then(|rc| rc.get("ips")) {
            collect_ips(ips, "runtimeConfig.ips", &mut out)?;
        }
        let from_args = self
            .args
            .as_ref()
            .and_then(|a| a.get("cni"))
            .and_then(Value::as_object)
            .and_then(|cni| cni.get("ips"));
        if let Some(ips) = from_args {
            collect_ips(ips, "args.cni.ips", &mut out)?;
        }
        Ok(out)
    }

    /// GC's list of attachments still in use: `cni.dev/valid-attachments`, or
    /// else the older `cni.dev/attachments`; `None` when neither was sent.
    pub fn gc_valid_attachments(&self) -> Option<Vec<GcAttachment>> {
        self.valid_attachments
            .clone()
            .or_else(|| self.attachments.clone())
    }
}

fn collect_ips(value: &Value, field: &str, out: &mut Vec<IpAddr>) -> Result<(), CniError> {
    match value {
        Value::Null => Ok(()),
        Value::Array(items) => {
            for item in items {
                let ip = item.as_str().and_then(parse_ip_maybe_cidr).ok_or_else(|| {
                    let shown = item.to_string();
                    invalid(format!(
                        "invalid network config field `{field}`: bad entry {}",
                        truncate(&shown)
                    ))
                })?;
                if !out.contains(&ip) {
                    out.push(ip);
                }
            }
            Ok(())
        }
        _ => Err(invalid(format!(
            "invalid network config field `{field}`: not a list of strings"
        ))),
    }
}

/// Whether `endpoint` is a daemon endpoint Sarena takes: an absolute socket
/// path, `unix://<absolute path>`, or `http://<host>:<port>[/]`. The one
/// rule for the CNI config's `daemon-endpoint` and the netavark network
/// option of the same name.
pub(crate) fn endpoint_is_valid(endpoint: &str) -> bool {
    if let Some(path) = endpoint.strip_prefix("unix://") {
        path.starts_with('/')
    } else if let Some(rest) = endpoint.strip_prefix("http://") {
        let authority = rest.strip_suffix('/').unwrap_or(rest);
        match authority.rsplit_once(':') {
            Some((host, port)) => {
                let host_ok = if let Some(v6) = host.strip_prefix('[') {
                    v6.strip_suffix(']')
                        .is_some_and(|h| h.parse::<std::net::Ipv6Addr>().is_ok())
                } else {
                    !host.is_empty()
                        && host
                            .bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-')
                };
                host_ok && port.parse::<u16>().is_ok_and(|p| p != 0)
            }
            None => false,
        }
    } else {
        endpoint.starts_with('/')
    }
}

/// Checks `daemon-endpoint` ([`endpoint_is_valid`]).
fn check_endpoint(endpoint: &str) -> Result<(), CniError> {
    if endpoint_is_valid(endpoint) {
        Ok(())
    } else {
        Err(invalid(format!(
            "invalid network config field `daemon-endpoint` {:?}: expected an absolute socket \
             path, unix://PATH or http://HOST:PORT",
            truncate(endpoint)
        )))
    }
}

/// Checks that the config's version knows `cmd`: CHECK needs 0.4.0, STATUS and
/// GC need 1.1.0. Error 1 (incompatible version) otherwise.
pub fn check_command_version(cmd: Command, v: Version) -> Result<(), CniError> {
    let min = cmd.min_version();
    if v >= min {
        return Ok(());
    }
    Err(CniError::new(
        ErrorCode::IncompatibleVersion,
        format!(
            "{cmd} requires cniVersion {min} or later, but the network config has cniVersion {v}"
        ),
    ))
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
