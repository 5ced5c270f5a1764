//! The host-changes ledger: what Sarena changed on the node that cannot be
//! told afterwards, written down *before* the change (write-ahead), so an
//! uninstall can put the node back exactly as it was.
//!
//! Two such facts exist:
//! - the value a sysctl had before Sarena overwrote it (`ip_forward`,
//!   `conf/all/forwarding`): recorded only when it differed from the value
//!   written, and only by the first writer, so a restarted daemon never
//!   replaces the pre-install value with its own;
//! - a `clsact` qdisc Sarena added on a node device (the uplink, the VXLAN
//!   device) that had none: only then may an uninstall remove it.
//!
//! The file, `host-changes.json`, lives in the socket's directory
//! (`/run/sarena`, a tmpfs): it has the lifetime of what it describes,
//! since a reboot resets the sysctls and drops the qdiscs. The kernel's
//! `boot_id` guards against a directory that survives reboots: entries of
//! another boot are ignored.
//!
//! ```json
//! {"boot_id": "…",
//!  "sysctls": [{"key": "net/ipv4/ip_forward", "before": "0", "written": "1"}],
//!  "clsact": [{"ifindex": 2, "ifname": "eth0"}]}
//! ```

use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use crate::durable::{self, FileError};
use crate::sysctl::{self, SysctlError};

/// The ledger's file name in its directory.
pub const LEDGER_FILE: &str = "host-changes.json";

/// Where the kernel says which boot this is.
pub const BOOT_ID_PATH: &str = "/proc/sys/kernel/random/boot_id";

/// The ledger file's permission bits (nothing secret in it).
const MODE: u32 = 0o644;

/// What the ledger could not do.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    /// The current boot's id could not be read.
    #[error("host ledger: read boot id {}", .path.display())]
    BootId {
        /// The file read.
        path: PathBuf,
        /// Cause.
        #[source]
        source: io::Error,
    },
    /// The ledger file could not be read.
    #[error("host ledger: read {}", .path.display())]
    Read {
        /// The ledger file.
        path: PathBuf,
        /// Cause.
        #[source]
        source: io::Error,
    },
    /// The ledger file holds no ledger.
    #[error("host ledger: parse {}", .path.display())]
    Parse {
        /// The ledger file.
        path: PathBuf,
        /// Cause.
        #[source]
        source: serde_json::Error,
    },
    /// The ledger's directory could not be created.
    #[error("host ledger: create directory {}", .path.display())]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// Cause.
        #[source]
        source: io::Error,
    },
    /// The ledger file could not be written.
    #[error("host ledger: write {}", .path.display())]
    Write {
        /// The ledger file.
        path: PathBuf,
        /// Cause.
        #[source]
        source: FileError,
    },
    /// The ledger could not be turned into JSON.
    #[error("host ledger: serialize")]
    Serialize {
        /// Cause.
        #[source]
        source: serde_json::Error,
    },
    /// Reading or restoring a recorded sysctl failed.
    #[error("host ledger: restore sysctl {key}")]
    Sysctl {
        /// The sysctl's key.
        key: String,
        /// Cause.
        #[source]
        source: SysctlError,
    },
}

/// A sysctl Sarena overwrote.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SysctlChange {
    /// Its path under `/proc/sys`, e.g. `net/ipv4/ip_forward`.
    pub key: String,
    /// Its value before Sarena's first write.
    pub before: String,
    /// The value Sarena wrote.
    pub written: String,
}

/// A `clsact` qdisc Sarena added on a node device that had none.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClsactAdded {
    /// The device's ifindex when the qdisc was added.
    pub ifindex: u32,
    /// The device's name then.
    pub ifname: String,
}

/// The ledger's content.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ledger {
    /// The boot the entries belong to (`/proc/sys/kernel/random/boot_id`).
    #[serde(default)]
    pub boot_id: String,
    /// The sysctls overwritten, one entry per key.
    #[serde(default)]
    pub sysctls: Vec<SysctlChange>,
    /// The `clsact` qdiscs added, one entry per (ifindex, ifname).
    #[serde(default)]
    pub clsact: Vec<ClsactAdded>,
}

/// The ledger file of one node. Clones share one lock, so the records of
/// concurrent tasks of one process never lose each other's entries.
#[derive(Debug, Clone)]
pub struct HostLedger {
    path: PathBuf,
    turn: Arc<Mutex<()>>,
}

impl HostLedger {
    /// The ledger `DIR/host-changes.json` (nothing is read or created yet).
    pub fn in_dir(dir: &Path) -> HostLedger {
        HostLedger {
            path: dir.join(LEDGER_FILE),
            turn: Arc::default(),
        }
    }

    /// The ledger file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Records, before the write, that Sarena is about to set `key` from
    /// `before` to `written`. Nothing is recorded when the two are equal or
    /// when the key has an entry already (the first writer's `before` is
    /// the value the node had before Sarena).
    pub fn record_sysctl(&self, key: &str, before: &str, written: &str) -> Result<(), LedgerError> {
        if before == written {
            return Ok(());
        }
        self.update(|ledger| {
            if ledger.sysctls.iter().any(|s| s.key == key) {
                return false;
            }
            ledger.sysctls.push(SysctlChange {
                key: key.to_owned(),
                before: before.to_owned(),
                written: written.to_owned(),
            });
            true
        })
    }

    /// Records, before adding it, that Sarena is about to add a `clsact`
    /// qdisc on the device `ifindex` called `ifname`.
    pub fn record_clsact(&self, ifindex: u32, ifname: &str) -> Result<(), LedgerError> {
        self.update(|ledger| {
            if ledger
                .clsact
                .iter()
                .any(|c| c.ifindex == ifindex && c.ifname == ifname)
            {
                return false;
            }
            ledger.clsact.push(ClsactAdded {
                ifindex,
                ifname: ifname.to_owned(),
            });
            true
        })
    }

    /// The ledger of this boot: empty when there is no file or when it was
    /// written during another boot.
    pub fn read(&self) -> Result<Ledger, LedgerError> {
        let boot_id = current_boot_id()?;
        self.read_for(&boot_id)
    }

    /// The ledger as of the boot `boot_id`.
    fn read_for(&self, boot_id: &str) -> Result<Ledger, LedgerError> {
        let body = match std::fs::read(&self.path) {
            Ok(body) => body,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Ledger::default()),
            Err(source) => {
                return Err(LedgerError::Read {
                    path: self.path.clone(),
                    source,
                });
            }
        };
        let ledger: Ledger =
            serde_json::from_slice(&body).map_err(|source| LedgerError::Parse {
                path: self.path.clone(),
                source,
            })?;
        if ledger.boot_id != boot_id {
            tracing::info!(path = %self.path.display(), "host ledger of another boot ignored");
            return Ok(Ledger::default());
        }
        Ok(ledger)
    }

    /// Reads this boot's ledger, lets `change` add to it, and writes it
    /// back durably when `change` says it changed something.
    fn update(&self, change: impl FnOnce(&mut Ledger) -> bool) -> Result<(), LedgerError> {
        let _turn = self.turn.lock().unwrap_or_else(|p| p.into_inner());
        let boot_id = current_boot_id()?;
        let mut ledger = self.read_for(&boot_id)?;
        ledger.boot_id = boot_id;
        if !change(&mut ledger) {
            return Ok(());
        }
        self.write(&ledger)
    }

    /// Replaces the file with `ledger` (temporary file, fsync, rename).
    fn write(&self, ledger: &Ledger) -> Result<(), LedgerError> {
        let dir = self.path.parent().unwrap_or(Path::new("."));
        if !dir.as_os_str().is_empty() && !dir.exists() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o755)
                .create(dir)
                .map_err(|source| LedgerError::CreateDir {
                    path: dir.to_owned(),
                    source,
                })?;
        }
        let body = serde_json::to_vec_pretty(ledger)
            .map_err(|source| LedgerError::Serialize { source })?;
        durable::replace(dir, LEDGER_FILE, &body, MODE).map_err(|source| LedgerError::Write {
            path: self.path.clone(),
            source,
        })
    }
}

/// This boot's id.
fn current_boot_id() -> Result<String, LedgerError> {
    std::fs::read_to_string(BOOT_ID_PATH)
        .map(|id| id.trim().to_owned())
        .map_err(|source| LedgerError::BootId {
            path: PathBuf::from(BOOT_ID_PATH),
            source,
        })
}

/// Puts back the sysctls of `ledger` Sarena overwrote, under the process's
/// sysctl root ([`sysctl::root`]). See [`restore_sysctls_under`].
pub fn restore_sysctls(ledger: &Ledger, dry_run: bool) -> Result<Vec<String>, LedgerError> {
    restore_sysctls_under(sysctl::root(), ledger, dry_run)
}

/// [`restore_sysctls`] under `root` instead of the process's sysctl root.
///
/// Per entry: a key still holding the value Sarena wrote gets its `before`
/// back (`restored sysctl KEY = BEFORE`, or `would restore …` in a dry
/// run); a key holding its `before` already needs nothing (no line); a key
/// someone changed since is left (`left sysctl KEY = CUR: changed since
/// Sarena wrote WRITTEN`).
pub fn restore_sysctls_under(
    root: &Path,
    ledger: &Ledger,
    dry_run: bool,
) -> Result<Vec<String>, LedgerError> {
    let mut lines = Vec::new();
    for entry in &ledger.sysctls {
        let failed = |source| LedgerError::Sysctl {
            key: entry.key.clone(),
            source,
        };
        let current = sysctl::read_under(root, &entry.key).map_err(failed)?;
        let (key, before, written) = (&entry.key, &entry.before, &entry.written);
        if current == *written {
            if dry_run {
                lines.push(format!("would restore sysctl {key} = {before}"));
            } else {
                sysctl::write_under(root, key, before).map_err(failed)?;
                lines.push(format!("restored sysctl {key} = {before}"));
            }
        } else if current != *before {
            lines.push(format!(
                "left sysctl {key} = {current}: changed since Sarena wrote {written}"
            ));
        }
    }
    Ok(lines)
}

#[cfg(test)]
#[path = "host_ledger_tests.rs"]
mod tests;
