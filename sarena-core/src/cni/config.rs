//! The network configuration the runtime sends on stdin.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

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
    /// Sarena: daemon endpoint — a Unix socket path, `unix://PATH`, or `http://HOST:PORT`.
    #[serde(
        default,
        rename = "daemon-endpoint",
        skip_serializing_if = "Option::is_none"
    )]
    pub daemon_endpoint: Option<String>,
    /// Sarena: where DELs that could not reach the daemon are queued.
    #[serde(
        default,
        rename = "delete-queue-dir",
        skip_serializing_if = "Option::is_none"
    )]
    pub delete_queue_dir: Option<PathBuf>,
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

/// One entry of a GC request's attachment list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GcAttachment {
    /// Container id.
    #[serde(rename = "containerID")]
    pub container_id: String,
    /// Interface name.
    pub ifname: String,
}
