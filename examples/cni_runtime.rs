//! A minimal container runtime that executes CNI plugins the way libcni
//! does, for any plugin (Sarena's or the reference ones): it loads a
//! conflist, runs ADD through the chain (each plugin gets the previous
//! result as `prevResult`), caches the final result, and runs CHECK and DEL
//! (DEL in reverse order) with the cached result.
//!
//! ```text
//! cni_runtime ADD|CHECK|DEL CONFLIST CONTAINER_ID NETNS [IFNAME]
//! ```
//! Environment: `CNI_PATH` (plugin directories, `:`-separated; default
//! `/opt/cni/bin:/usr/lib/cni`), `CNI_CACHE_DIR` (default
//! `/var/lib/cni/results`), `CNI_ARGS` (passed through). Needs whatever the
//! plugins need (root, for plugins that make interfaces).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

type Error = Box<dyn std::error::Error>;

/// One invocation of the chain.
struct Invocation {
    command: String,
    container_id: String,
    netns: String,
    ifname: String,
    cni_path: String,
}

/// Finds `plugin_type` on `CNI_PATH` (as libcni's FindInPath does).
fn find_plugin(cni_path: &str, plugin_type: &str) -> Result<PathBuf, Error> {
    cni_path
        .split(':')
        .map(|dir| Path::new(dir).join(plugin_type))
        .find(|p| p.is_file())
        .ok_or_else(|| format!("plugin {plugin_type:?} not found in {cni_path}").into())
}

/// The network config one plugin sees: its entry plus the list's name and
/// version and, when there is one, the previous result.
fn plugin_config(list: &Value, plugin: &Value, prev: Option<&Value>) -> Value {
    let mut conf = plugin.clone();
    conf["name"] = list["name"].clone();
    conf["cniVersion"] = list["cniVersion"].clone();
    if let Some(prev) = prev {
        conf["prevResult"] = prev.clone();
    }
    conf
}

/// Executes one plugin with the CNI environment and `conf` on stdin; its
/// result (`null` for CHECK and DEL), or its error object as the error.
fn exec(inv: &Invocation, conf: &Value) -> Result<Value, Error> {
    let plugin_type = conf["type"].as_str().ok_or("plugin without \"type\"")?;
    let mut child = Command::new(find_plugin(&inv.cni_path, plugin_type)?)
        .env("CNI_COMMAND", &inv.command)
        .env("CNI_CONTAINERID", &inv.container_id)
        .env("CNI_NETNS", &inv.netns)
        .env("CNI_IFNAME", &inv.ifname)
        .env("CNI_PATH", &inv.cni_path)
        .env("CNI_ARGS", std::env::var("CNI_ARGS").unwrap_or_default())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()?;
    child
        .stdin
        .take()
        .ok_or("no stdin")?
        .write_all(conf.to_string().as_bytes())?;
    let out = child.wait_with_output()?;
    let answer: Value = match out.stdout.is_empty() {
        true => Value::Null,
        false => serde_json::from_slice(&out.stdout)?,
    };
    if !out.status.success() {
        return Err(format!("{plugin_type} {} failed: {answer}", inv.command).into());
    }
    Ok(answer)
}

fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [command, conflist, container_id, netns, rest @ ..] = args.as_slice() else {
        return Err("usage: cni_runtime ADD|CHECK|DEL CONFLIST CONTAINER_ID NETNS [IFNAME]".into());
    };
    let inv = Invocation {
        command: command.to_uppercase(),
        container_id: container_id.clone(),
        netns: netns.clone(),
        ifname: rest.first().cloned().unwrap_or_else(|| "eth0".into()),
        cni_path: std::env::var("CNI_PATH").unwrap_or_else(|_| "/opt/cni/bin:/usr/lib/cni".into()),
    };
    let list: Value = serde_json::from_str(&std::fs::read_to_string(conflist)?)?;
    let plugins = list["plugins"]
        .as_array()
        .ok_or("conflist without \"plugins\"")?;
    let cache_dir =
        std::env::var("CNI_CACHE_DIR").unwrap_or_else(|_| "/var/lib/cni/results".into());
    let name = list["name"].as_str().ok_or("conflist without \"name\"")?;
    let cache = Path::new(&cache_dir).join(format!("{name}-{}-{}", inv.container_id, inv.ifname));
    let cached = || -> Result<Value, Error> {
        let entry: Value = serde_json::from_str(&std::fs::read_to_string(&cache)?)?;
        Ok(entry["result"].clone())
    };

    match inv.command.as_str() {
        "ADD" => {
            let mut prev: Option<Value> = None;
            for plugin in plugins {
                prev = Some(exec(&inv, &plugin_config(&list, plugin, prev.as_ref()))?);
            }
            let result = prev.unwrap_or(Value::Null);
            std::fs::create_dir_all(&cache_dir)?;
            let entry = json!({"kind": "cniCacheV1", "containerId": inv.container_id,
                               "ifName": inv.ifname, "networkName": name, "result": result});
            std::fs::write(&cache, entry.to_string())?;
            println!("{}", serde_json::to_string_pretty(&result)?);
        }
        "CHECK" => {
            let result = cached()?;
            for plugin in plugins {
                exec(&inv, &plugin_config(&list, plugin, Some(&result)))?;
            }
            println!("CHECK ok: {} plugin(s)", plugins.len());
        }
        "DEL" => {
            // Without a cached result (ADD never finished) DEL still runs.
            let result = cached().ok();
            for plugin in plugins.iter().rev() {
                exec(&inv, &plugin_config(&list, plugin, result.as_ref()))?;
            }
            let _ = std::fs::remove_file(&cache);
            println!("DEL ok: {} plugin(s)", plugins.len());
        }
        other => return Err(format!("unknown command {other:?}").into()),
    }
    Ok(())
}
