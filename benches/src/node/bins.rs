//! Where the plugin, daemon and reference plugin binaries are.

use std::path::{Path, PathBuf};

use crate::BenchError;

/// Where the binaries are.
#[derive(Debug, Clone)]
pub struct Bins {
    /// `sarena-cni` (release build).
    pub sarena_cni: PathBuf,
    /// `sarena-daemon` (release build).
    pub sarena_daemon: PathBuf,
    /// Directory of the reference plugins (ptp, bridge, host-local).
    pub cni_dir: PathBuf,
}

impl Bins {
    /// `SARENA_BIN_DIR` when set (and then only it: binaries from elsewhere
    /// would measure something else than asked), else the directory of this
    /// executable, else the workspace's `target/release`; reference plugins
    /// from `SARENA_REF_CNI_DIR` or /usr/lib/cni.
    pub fn locate() -> Result<Bins, BenchError> {
        let mut dirs: Vec<PathBuf> = Vec::new();
        if let Some(d) = std::env::var_os("SARENA_BIN_DIR").filter(|d| !d.is_empty()) {
            dirs.push(PathBuf::from(d));
        } else {
            if let Ok(exe) = std::env::current_exe()
                && let Some(d) = exe.parent()
            {
                dirs.push(d.to_path_buf());
            }
            dirs.push(Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/release"));
        }
        let bin_dir = dirs
            .iter()
            .find(|d| d.join("sarena-cni").is_file() && d.join("sarena-daemon").is_file())
            .ok_or_else(|| BenchError::MissingBinary {
                what: "sarena-cni and sarena-daemon",
                path: dirs.last().cloned().unwrap_or_default(),
                hint: "bash scripts/build-release.sh, then SARENA_BIN_DIR=target/sarena-bin (copies: cp -rL)",
            })?;
        let cni_dir = std::env::var_os("SARENA_REF_CNI_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/usr/lib/cni"));
        for p in ["ptp", "bridge", "host-local"] {
            if !cni_dir.join(p).is_file() {
                return Err(BenchError::MissingBinary {
                    what: "reference CNI plugin",
                    path: cni_dir.join(p),
                    hint: "apt-get install containernetworking-plugins (scripts/setup.sh)",
                });
            }
        }
        Ok(Bins {
            sarena_cni: bin_dir.join("sarena-cni"),
            sarena_daemon: bin_dir.join("sarena-daemon"),
            cni_dir,
        })
    }
}
