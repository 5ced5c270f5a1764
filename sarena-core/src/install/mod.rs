//! Installing Sarena on a node the way a CNI DaemonSet does: the plugin
//! binary into the CNI bin dir and the network config into the CNI conf dir,
//! both without a moment in which the runtime can see half of either.
//!
//! - [`Installer::install_plugin`] copies `sarena-cni` in: a temporary file
//!   in the bin dir, fsync'd, then renamed over the old one. A plugin that
//!   runs at that moment keeps its (old) inode, so the copy never fails with
//!   "text file busy" and never leaves a truncated binary behind.
//! - [`Installer::write_conflist`] does the same for the conflist in the
//!   conf dir; the temporary file's name ends in `.sarena-tmp`, an extension
//!   libcni does not load, so the runtime (which watches the directory) only
//!   ever reads a complete config. The daemon calls it once it serves
//!   (`sarena-daemon --write-cni-conf`), so kubelet never sends an ADD the
//!   daemon cannot answer.
//! - Both are idempotent: an identical file is left alone (no write, no
//!   inotify event for the runtime).
//! - Another network's config is left untouched unless asked
//!   ([`Installer::set_aside_others`] renames it to `NAME.sarena-bak`, which
//!   libcni does not load; [`Installer::uninstall`] puts it back).
//! - [`Installer::uninstall`] removes Sarena's conflist, so kubelet marks the
//!   node NotReady instead of calling a plugin with no daemon behind it. The
//!   binary stays: pods still on the node need their DEL, which the plugin
//!   queues durably until a daemon is back.
//!
//! Everything here blocks (file I/O, fsync).

mod atomic;
mod conflist;
mod error;
mod others;

#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};

pub use atomic::Outcome;
pub use conflist::{ConflistOptions, generate_conflist, validate_conflist};
pub use error::InstallError;

/// The CNI bin dir of kubelet, containerd and CRI-O unless configured.
pub const DEFAULT_CNI_BIN_DIR: &str = "/opt/cni/bin";
/// The CNI conf dir of kubelet, containerd and CRI-O unless configured.
pub use sarena_plugin::cni::conf_dir::DEFAULT_CONF_DIR as DEFAULT_CNI_CONF_DIR;
/// The extensions libcni loads from a conf dir.
pub use sarena_plugin::cni::conf_dir::{CONF_EXTENSIONS, is_loadable};
/// The name of Sarena's conflist in the conf dir.
pub const DEFAULT_CONFLIST_NAME: &str = "10-sarena.conflist";
/// The plugin's binary name (the conflist's `type`).
pub const PLUGIN_NAME: &str = "sarena-cni";
/// Appended to another network's config set aside by
/// [`Installer::set_aside_others`].
pub const SET_ASIDE_SUFFIX: &str = ".sarena-bak";

/// What [`Installer::uninstall`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UninstallReport {
    /// Sarena's conflist was there and is gone.
    pub removed: Option<PathBuf>,
    /// Other networks' configs put back under their names.
    pub restored: Vec<PathBuf>,
}

/// A node's CNI directories and the name of Sarena's conflist in them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Installer {
    bin_dir: PathBuf,
    conf_dir: PathBuf,
    conflist_name: String,
}

impl Default for Installer {
    /// `/opt/cni/bin`, `/etc/cni/net.d`, `10-sarena.conflist`.
    fn default() -> Self {
        Installer::new(DEFAULT_CNI_BIN_DIR, DEFAULT_CNI_CONF_DIR)
    }
}

impl Installer {
    /// The installer for these directories, with the default conflist name.
    pub fn new(bin_dir: impl Into<PathBuf>, conf_dir: impl Into<PathBuf>) -> Self {
        Installer {
            bin_dir: bin_dir.into(),
            conf_dir: conf_dir.into(),
            conflist_name: DEFAULT_CONFLIST_NAME.to_owned(),
        }
    }

    /// Another name for the conflist: a file name (no `/`) ending in one
    /// of [`CONF_EXTENSIONS`], else libcni would never load it.
    pub fn with_conflist_name(mut self, name: &str) -> Result<Self, InstallError> {
        if name.is_empty() || name.contains('/') || name.starts_with('.') || !is_loadable(name) {
            return Err(InstallError::ConflistName {
                name: name.to_owned(),
            });
        }
        self.conflist_name = name.to_owned();
        Ok(self)
    }

    /// The CNI bin dir.
    pub fn bin_dir(&self) -> &Path {
        &self.bin_dir
    }

    /// The CNI conf dir.
    pub fn conf_dir(&self) -> &Path {
        &self.conf_dir
    }

    /// Where Sarena's conflist goes.
    pub fn conflist_path(&self) -> PathBuf {
        self.conf_dir.join(&self.conflist_name)
    }

    /// Copies the plugin binary `source` to `BIN_DIR/sarena-cni` (mode 0755),
    /// replacing an older one by rename.
    pub fn install_plugin(&self, source: &Path) -> Result<Outcome, InstallError> {
        let body = std::fs::read(source).map_err(|e| InstallError::io("read", source, e))?;
        atomic::replace_file(&self.bin_dir, PLUGIN_NAME, &body, 0o755)
    }

    /// Writes `conflist` (checked by [`validate_conflist`]) to the conflist
    /// path (mode 0644), replacing an older one by rename.
    pub fn write_conflist(&self, conflist: &[u8]) -> Result<Outcome, InstallError> {
        validate_conflist(conflist).map_err(|reason| InstallError::Conflist {
            path: self.conflist_path(),
            reason,
        })?;
        atomic::replace_file(&self.conf_dir, &self.conflist_name, conflist, 0o644)
    }

    /// Renames every other network config in the conf dir to
    /// `NAME.sarena-bak` so that the runtime loads Sarena's; returns their
    /// new paths.
    pub fn set_aside_others(&self) -> Result<Vec<PathBuf>, InstallError> {
        others::set_aside(&self.conf_dir, &self.conflist_name)
    }

    /// Sarena's conflist as it is on disk; `Ok(None)` when there is none,
    /// [`InstallError::NotSarenas`] when the file of that name is another
    /// network's config.
    pub fn read_conflist(&self) -> Result<Option<Vec<u8>>, InstallError> {
        let path = self.conflist_path();
        match std::fs::read(&path) {
            Ok(body) => {
                validate_conflist(&body)
                    .map_err(|reason| InstallError::NotSarenas { path, reason })?;
                Ok(Some(body))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(InstallError::io("read", &path, e)),
        }
    }

    /// Removes Sarena's conflist (refusing a file of that name that is not
    /// Sarena's) and the temporary files a writer of it left behind; the
    /// conflist's path when it was there.
    pub fn remove_conflist(&self) -> Result<Option<PathBuf>, InstallError> {
        let path = self.conflist_path();
        let removed = match self.read_conflist()? {
            Some(_) => {
                std::fs::remove_file(&path).map_err(|e| InstallError::io("remove", &path, e))?;
                Some(path)
            }
            None => None,
        };
        sarena_plugin::durable::remove_stale_temps(&self.conf_dir, Some(&self.conflist_name))?;
        if removed.is_some() {
            atomic::sync_dir(&self.conf_dir)?;
        }
        Ok(removed)
    }

    /// The configs [`Installer::set_aside_others`] set aside, each with
    /// whether it can be put back (its original name is free).
    pub fn set_aside_configs(&self) -> Result<Vec<(PathBuf, bool)>, InstallError> {
        others::list_set_aside(&self.conf_dir)
    }

    /// Puts back what [`Installer::set_aside_others`] set aside, where the
    /// original name is free; the restored paths.
    pub fn restore_set_aside(&self) -> Result<Vec<PathBuf>, InstallError> {
        let restored = others::restore(&self.conf_dir)?;
        if !restored.is_empty() {
            atomic::sync_dir(&self.conf_dir)?;
        }
        Ok(restored)
    }

    /// [`Installer::remove_conflist`] then [`Installer::restore_set_aside`]
    /// (`sarena install-cni --uninstall`). The plugin binary stays.
    pub fn uninstall(&self) -> Result<UninstallReport, InstallError> {
        let removed = self.remove_conflist()?;
        let restored = self.restore_set_aside()?;
        Ok(UninstallReport { removed, restored })
    }
}
