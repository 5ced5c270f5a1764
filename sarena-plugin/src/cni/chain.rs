//! What else the network's conflist chains after Sarena, read from the
//! runtime's config directory: a runtime hands each plugin only its own
//! entry, so this is the one place Sarena can see the rest of the chain.
//!
//! Used for one question: is the reference `bandwidth` plugin chained after
//! Sarena? On the eBPF dataplane it cannot work (Sarena holds the qdiscs it
//! needs on the host veth, and pod → pod traffic is redirected past them),
//! so ADD refuses such a network up front with the fix in the message,
//! rather than leaving it to fail after Sarena's ADD (see
//! [`crate::plugin`]'s ADD).
//!
//! The directory is read the way libcni reads it: files ending in
//! `.conf`, `.conflist` or `.json`, in name order, the first whose `name`
//! is the network's is the network's. A directory that cannot be read, or
//! holds no such file, tells nothing: the check passes.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::conf_dir;

pub use super::conf_dir::DEFAULT_CONF_DIR;

/// Type of the reference plugin the check looks for.
pub const REFERENCE_BANDWIDTH: &str = "bandwidth";

/// Config files larger than this are not read (a conflist is a few KB).
const MAX_CONF_BYTES: u64 = 1 << 20;

/// Where to look for the network's conflist, and for which plugin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainCheck {
    /// The runtime's config directory (the plugin field `cni-conf-dir`, by
    /// default [`DEFAULT_CONF_DIR`]).
    pub conf_dir: PathBuf,
    /// The network's name.
    pub network: String,
    /// Sarena's own plugin type in the chain (the `type` it was run as).
    pub plugin_type: String,
}

impl ChainCheck {
    /// The file defining the network, when it chains the reference
    /// `bandwidth` plugin after `plugin_type`; `None` otherwise (or when no
    /// file defines the network).
    pub fn reference_bandwidth_after_us(&self) -> Option<PathBuf> {
        let (path, conf) = network_file(&self.conf_dir, &self.network)?;
        let types: Vec<&str> = conf
            .get("plugins")?
            .as_array()?
            .iter()
            .map(|p| p.get("type").and_then(Value::as_str).unwrap_or(""))
            .collect();
        let ours = types.iter().position(|t| *t == self.plugin_type)?;
        types[ours + 1..]
            .contains(&REFERENCE_BANDWIDTH)
            .then_some(path)
    }
}

/// The first config file under `dir`, in name order, whose `name` is
/// `network`, with its parsed contents (each file is read once).
fn network_file(dir: &Path, network: &str) -> Option<(PathBuf, Value)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(conf_dir::is_loadable)
        })
        .collect();
    files.sort();
    files.into_iter().find_map(|path| {
        let conf = read(&path)?;
        (conf.get("name").and_then(Value::as_str) == Some(network)).then_some((path, conf))
    })
}

/// The JSON object in `path`; `None` when it is unreadable, too large or
/// not JSON.
fn read(path: &Path) -> Option<Value> {
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() || meta.len() > MAX_CONF_BYTES {
        return None;
    }
    serde_json::from_slice(&std::fs::read(path).ok()?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Dir(tempfile::TempDir);

    impl Dir {
        fn new() -> Dir {
            Dir(tempfile::tempdir().unwrap())
        }

        fn path(&self) -> &Path {
            self.0.path()
        }

        fn write(&self, file: &str, conf: Value) {
            std::fs::write(self.path().join(file), conf.to_string()).unwrap();
        }

        fn check(&self, network: &str) -> Option<PathBuf> {
            ChainCheck {
                conf_dir: self.path().to_owned(),
                network: network.into(),
                plugin_type: "sarena-cni".into(),
            }
            .reference_bandwidth_after_us()
        }
    }

    fn conflist(name: &str, types: &[&str]) -> Value {
        let plugins: Vec<Value> = types
            .iter()
            .map(|t| serde_json::json!({"type": t}))
            .collect();
        serde_json::json!({"cniVersion": "1.0.0", "name": name, "plugins": plugins})
    }

    #[test]
    fn bandwidth_after_sarena_is_found() {
        let dir = Dir::new();
        dir.write(
            "10-net.conflist",
            conflist("net", &["sarena-cni", "portmap", "bandwidth"]),
        );
        assert_eq!(dir.check("net"), Some(dir.path().join("10-net.conflist")));
    }

    #[test]
    fn other_chains_and_other_networks_pass() {
        let dir = Dir::new();
        dir.write("10-a.conflist", conflist("a", &["sarena-cni", "portmap"]));
        // The reference plugin before Sarena is someone else's problem.
        dir.write("20-b.conflist", conflist("b", &["bandwidth", "sarena-cni"]));
        dir.write("30-c.conflist", conflist("c", &["ptp", "bandwidth"]));
        for net in ["a", "b", "c", "missing"] {
            assert_eq!(dir.check(net), None, "{net}");
        }
    }

    #[test]
    fn the_first_file_of_the_network_in_name_order_counts() {
        let dir = Dir::new();
        dir.write(
            "20-net.conflist",
            conflist("net", &["sarena-cni", "bandwidth"]),
        );
        dir.write("10-net.conf", conflist("net", &["sarena-cni"]));
        assert_eq!(dir.check("net"), None);
        dir.write("05-net.json", conflist("net", &["sarena-cni", "bandwidth"]));
        assert_eq!(dir.check("net"), Some(dir.path().join("05-net.json")));
    }

    #[test]
    fn unreadable_or_foreign_files_tell_nothing() {
        let dir = Dir::new();
        std::fs::write(dir.path().join("00-junk.conflist"), "{not json").unwrap();
        dir.write("10-net.txt", conflist("net", &["sarena-cni", "bandwidth"]));
        assert_eq!(dir.check("net"), None);
        let gone = ChainCheck {
            conf_dir: dir.path().join("no-such-dir"),
            network: "net".into(),
            plugin_type: "sarena-cni".into(),
        };
        assert_eq!(gone.reference_bandwidth_after_us(), None);
    }
}
