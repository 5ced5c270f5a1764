//! Sarena's network config list: the one the installer writes by default,
//! and the check every conflist passes before it is written.

use std::path::PathBuf;

use serde_json::{Map, Value, json};

use super::PLUGIN_NAME;
use crate::api::DEFAULT_SOCKET;
use crate::cni::NetConf;
use crate::delqueue::DeleteQueue;

/// The fields of the generated conflist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConflistOptions {
    /// `cniVersion`. Default `1.0.0`: containerd 1.6/1.7 and CRI-O vendor
    /// libcni 1.1, which refuses a 1.1.0 result ("unsupported CNI result
    /// version"); the plugin answers every version from 0.1.0 to 1.1.0.
    pub cni_version: String,
    /// The network's `name`.
    pub name: String,
    /// The plugin's `log-file`.
    pub log_file: Option<PathBuf>,
    /// The plugin's `daemon-endpoint`; `None`: the plugin's default socket.
    pub daemon_endpoint: Option<String>,
    /// The plugin's `delete-queue-dir`; `None`: the plugin's default.
    pub delete_queue_dir: Option<PathBuf>,
}

impl Default for ConflistOptions {
    fn default() -> Self {
        ConflistOptions {
            cni_version: "1.0.0".to_owned(),
            name: "sarena".to_owned(),
            log_file: Some(PathBuf::from("/var/log/sarena-cni.log")),
            daemon_endpoint: None,
            delete_queue_dir: None,
        }
    }
}

impl ConflistOptions {
    /// The options for a daemon serving `socket` with its deletion queue in
    /// `delete_queue_dir`: both left out of the conflist when they are the
    /// plugin's defaults.
    pub fn for_daemon(socket: &std::path::Path, delete_queue_dir: &std::path::Path) -> Self {
        ConflistOptions {
            daemon_endpoint: (socket != std::path::Path::new(DEFAULT_SOCKET))
                .then(|| socket.display().to_string()),
            delete_queue_dir: (delete_queue_dir != std::path::Path::new(DeleteQueue::DEFAULT_DIR))
                .then(|| delete_queue_dir.to_path_buf()),
            ..ConflistOptions::default()
        }
    }
}

/// The conflist of `options`: one `sarena-cni` plugin, pretty JSON with a
/// final newline.
pub fn generate_conflist(options: &ConflistOptions) -> Vec<u8> {
    let mut plugin = Map::new();
    plugin.insert("type".into(), PLUGIN_NAME.into());
    if let Some(endpoint) = &options.daemon_endpoint {
        plugin.insert("daemon-endpoint".into(), endpoint.as_str().into());
    }
    if let Some(dir) = &options.delete_queue_dir {
        plugin.insert("delete-queue-dir".into(), dir.display().to_string().into());
    }
    if let Some(file) = &options.log_file {
        plugin.insert("log-file".into(), file.display().to_string().into());
    }
    let conflist = json!({
        "cniVersion": options.cni_version,
        "name": options.name,
        "plugins": [Value::Object(plugin)],
    });
    // A Value always serializes.
    let mut text = serde_json::to_vec_pretty(&conflist).unwrap_or_default();
    text.push(b'\n');
    text
}

/// Checks that `body` is a conflist through which the runtime calls Sarena:
/// a JSON object with `cniVersion`, `name` and `plugins`, one of them of
/// type `sarena-cni` whose config (the list's version and name merged in,
/// as the runtime does) the plugin accepts. `Err` says what is wrong.
pub fn validate_conflist(body: &[u8]) -> Result<(), String> {
    let value: Value = serde_json::from_slice(body).map_err(|e| format!("not valid JSON: {e}"))?;
    let Value::Object(list) = value else {
        return Err("not a JSON object".to_owned());
    };
    let field = |name: &str| match list.get(name) {
        Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
        _ => Err(format!("no `{name}` string")),
    };
    let (version, name) = (field("cniVersion")?, field("name")?);
    let Some(Value::Array(plugins)) = list.get("plugins") else {
        return Err("no `plugins` list".to_owned());
    };
    let ours = plugins
        .iter()
        .find(|p| p.get("type").and_then(Value::as_str) == Some(PLUGIN_NAME))
        .ok_or_else(|| format!("no plugin of type `{PLUGIN_NAME}` in `plugins`"))?;
    let Value::Object(mut conf) = ours.clone() else {
        return Err(format!("the `{PLUGIN_NAME}` plugin is not a JSON object"));
    };
    conf.insert("cniVersion".into(), version.into());
    conf.insert("name".into(), name.into());
    let conf = serde_json::to_vec(&Value::Object(conf)).map_err(|e| e.to_string())?;
    NetConf::parse(&conf)
        .map(|_| ())
        .map_err(|e| format!("the `{PLUGIN_NAME}` plugin's config: {}", e.msg))
}
