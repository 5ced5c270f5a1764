//! `sarena-daemon --uninstall`: removes Sarena from this node with the
//! daemon's own flags saying where everything is (see
//! [`sarena_core::uninstall`] for the steps).
//!
//! - The config file is optional: only `[kubernetes]` is read from it
//!   (whether to clear the Node condition, the kubeconfig); a missing or
//!   unreadable one means the defaults.
//! - The state and pin dirs are locked without being created, so a live
//!   daemon makes the command fail ("stop the daemon first"); a dry run
//!   takes no lock and changes nothing.
//! - `--keep-running` (the uninstall DaemonSet): retry, waiting for the
//!   old daemon to let go of its locks, from 5 s backing off to 60 s, until
//!   the node is clean; keep `--clean-marker` in step; then wait for
//!   SIGTERM/SIGINT.
//!
//! Each run prints one line per object and then the JSON summary to stdout.

use std::future::Future;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use sarena_core::install::InstallError;
use sarena_core::node::NodeConfig;
use sarena_core::uninstall::{HostPaths, HostTeardown, Report, UninstallOptions, uninstall};
use sarena_k8s::KubeClusterApi;

use crate::cli::Cli;
use crate::kubernetes::{self, KubernetesError};
use crate::locks::{DirLocks, LockError};

/// The first wait between attempts in `--keep-running` mode.
const FIRST_RETRY: Duration = Duration::from_secs(5);
/// The longest wait between attempts.
const LAST_RETRY: Duration = Duration::from_secs(60);

/// Why the uninstall could not run at all.
#[derive(Debug, thiserror::Error)]
pub enum UninstallError {
    /// `--sysctl-dir` cannot be used.
    #[error(transparent)]
    SysctlDir(#[from] crate::sysctl_dir::SysctlDirError),
    /// The conflist's path cannot be Sarena's.
    #[error("--write-cni-conf / --cni-conf-dir")]
    Paths(#[source] InstallError),
    /// Kubernetes mode: no node name or no client.
    #[error("Kubernetes mode")]
    Kubernetes(#[from] KubernetesError),
    /// A daemon holds the state or pin dir.
    #[error("a sarena-daemon is running on this node: stop the daemon first")]
    DaemonRunning(#[source] LockError),
    /// The state or pin dir could not be locked.
    #[error(transparent)]
    Lock(LockError),
    /// `--clean-marker` could not be written or removed.
    #[error("--clean-marker {}: {call}", .path.display())]
    Marker {
        /// `create` or `remove`.
        call: &'static str,
        /// The marker.
        path: PathBuf,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
}

impl From<LockError> for UninstallError {
    fn from(e: LockError) -> Self {
        match e {
            held @ LockError::Held { .. } => UninstallError::DaemonRunning(held),
            e => UninstallError::Lock(e),
        }
    }
}

/// The config file when there is a readable one, else the defaults.
fn config_for(cli: &Cli) -> NodeConfig {
    match crate::app::load_config(cli) {
        Ok(config) => config,
        Err(e) => {
            tracing::warn!("using the default config: {}", sarena_core::error_chain(&e));
            NodeConfig::default()
        }
    }
}

/// The paths of `cli`, as the daemon uses them.
pub fn host_paths(cli: &Cli) -> HostPaths {
    HostPaths {
        cni_bin_dir: cli.uninstall.cni_bin_dir.clone(),
        conflist: cli.conflist_path(),
        state_dir: cli.state_dir.clone(),
        socket: cli.socket.clone(),
        pin_dir: cli.bpf_pin_dir.clone(),
    }
}

/// The teardown for `cli`: its paths, and in Kubernetes mode the Node.
async fn teardown_for(cli: &Cli) -> Result<HostTeardown, UninstallError> {
    let config = config_for(cli);
    let teardown = HostTeardown::new(host_paths(cli)).map_err(UninstallError::Paths)?;
    if !(cli.kubernetes || config.kubernetes.enabled) {
        return Ok(teardown);
    }
    let node = kubernetes::node_name(cli)?;
    let client = sarena_k8s::connect(kubernetes::kubeconfig(cli, &config).as_deref())
        .await
        .map_err(KubernetesError::from)?;
    Ok(teardown.with_cluster(Arc::new(KubeClusterApi::new(client)), node))
}

/// Prints `report`: its lines, then the JSON summary.
fn print(report: &Report) {
    let mut out = std::io::stdout().lock();
    for line in report.text_lines() {
        let _ = writeln!(out, "{line}");
    }
    let _ = writeln!(out, "{}", report.summary_json());
    let _ = out.flush();
}

/// Locks the dirs (as they exist) and runs one uninstall.
async fn attempt(
    cli: &Cli,
    teardown: &HostTeardown,
    options: UninstallOptions,
) -> Result<Report, UninstallError> {
    let _locks: Option<DirLocks> = if options.dry_run {
        None
    } else {
        Some(crate::locks::lock_existing(
            &cli.state_dir,
            &cli.bpf_pin_dir,
        )?)
    };
    Ok(uninstall(teardown, options).await)
}

/// Runs `--uninstall` (see the module's doc); whether the node is clean.
pub async fn run(cli: &Cli, shutdown: impl Future<Output = ()>) -> Result<bool, UninstallError> {
    crate::sysctl_dir::apply(cli.sysctl_dir.as_deref())?;
    let teardown = teardown_for(cli).await?;
    tracing::info!(paths = ?teardown.paths(), dry_run = cli.uninstall.dry_run, "uninstalling Sarena from this node");
    let options = UninstallOptions {
        dry_run: cli.uninstall.dry_run,
        keep_sysctls: cli.uninstall.keep_sysctls,
    };
    if !cli.uninstall.keep_running {
        let report = attempt(cli, &teardown, options).await?;
        print(&report);
        return Ok(report.clean());
    }
    let marker = cli.uninstall.clean_marker.as_deref();
    tokio::pin!(shutdown);
    let mut delay = FIRST_RETRY;
    loop {
        let outcome = tokio::select! {
            () = &mut shutdown => return Ok(false),
            outcome = attempt(cli, &teardown, options) => outcome,
        };
        let clean = match outcome {
            Ok(report) => {
                print(&report);
                report.clean()
            }
            Err(e @ UninstallError::DaemonRunning(_)) => {
                tracing::info!("{}; retrying in {delay:?}", sarena_core::error_chain(&e));
                false
            }
            Err(e) => {
                tracing::warn!("{}; retrying in {delay:?}", sarena_core::error_chain(&e));
                false
            }
        };
        set_marker(marker, clean)?;
        if clean {
            break;
        }
        tokio::select! {
            () = &mut shutdown => return Ok(false),
            () = tokio::time::sleep(delay) => {}
        }
        delay = (delay * 2).min(LAST_RETRY);
    }
    tracing::info!("this node is clean; waiting for SIGTERM");
    shutdown.await;
    Ok(true)
}

/// Creates `marker` when `clean`, else removes it.
fn set_marker(marker: Option<&Path>, clean: bool) -> Result<(), UninstallError> {
    let Some(path) = marker else { return Ok(()) };
    let error = |call| {
        move |source| UninstallError::Marker {
            call,
            path: path.to_path_buf(),
            source,
        }
    };
    if clean {
        std::fs::write(path, b"clean\n").map_err(error("create"))
    } else {
        match std::fs::remove_file(path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(error("remove")(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[test]
    fn the_paths_are_the_daemons() {
        let cli = Cli::parse_from([
            "sarena-daemon",
            "--uninstall",
            "--socket=/run/s/x.sock",
            "--state-dir=/var/lib/s",
            "--bpf-pin-dir=/sys/fs/bpf/sarena-node/n1",
            "--write-cni-conf=/etc/cni/net.d/10-sarena.conflist",
            "--cni-bin-dir=/opt/cni/bin",
        ]);
        let paths = host_paths(&cli);
        assert_eq!(paths.socket_dir(), Path::new("/run/s"));
        assert_eq!(paths.state_dir, PathBuf::from("/var/lib/s"));
        assert_eq!(paths.pin_dir, PathBuf::from("/sys/fs/bpf/sarena-node/n1"));
        assert_eq!(
            paths.conflist,
            PathBuf::from("/etc/cni/net.d/10-sarena.conflist")
        );
    }

    #[test]
    fn the_marker_follows_the_verdict() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("clean");
        set_marker(Some(&marker), false).unwrap();
        assert!(!marker.exists());
        set_marker(Some(&marker), true).unwrap();
        assert!(marker.exists());
        set_marker(Some(&marker), false).unwrap();
        assert!(!marker.exists());
        set_marker(None, true).unwrap();
    }

    #[test]
    fn a_held_lock_means_stop_the_daemon_first() {
        let held = LockError::Held {
            what: "state dir",
            path: "/var/lib/sarena".into(),
            holder: Some(7),
        };
        let err = UninstallError::from(held);
        assert!(matches!(err, UninstallError::DaemonRunning(_)));
        let text = sarena_core::error_chain(&err);
        assert!(text.contains("stop the daemon first"), "{text}");
        assert!(text.contains("pid 7"), "{text}");
    }
}
