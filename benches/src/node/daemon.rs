//! The private `sarena-daemon` of a Sarena node: started inside the node netns,
//! spoken to through sarena-core's own API client ([`HttpDaemon`]), stopped
//! (SIGTERM, then SIGKILL) and its bpffs pins removed on drop.

use std::fs::File;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use sarena_core::api::{Daemon as _, DaemonError, HttpDaemon};
use tokio::runtime::Runtime;
use wait_timeout::ChildExt;

use super::netns;
use crate::BenchError;

/// How long the daemon may take to answer its first health check.
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// How long the daemon gets to exit after SIGTERM.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// What the daemon is started with.
#[derive(Debug)]
pub(super) struct DaemonSpec<'a> {
    pub binary: &'a Path,
    pub config: &'a Path,
    pub state_dir: &'a Path,
    pub socket: PathBuf,
    pub pin_dir: PathBuf,
    /// stdout and stderr go here.
    pub log: &'a Path,
}

/// A running daemon and its API client.
#[derive(Debug)]
pub(super) struct DaemonProcess {
    child: Child,
    socket: PathBuf,
    pin_dir: PathBuf,
    api: HttpDaemon,
    /// The harness is synchronous; the client's calls run on this runtime.
    runtime: Runtime,
}

impl DaemonProcess {
    /// Starts the daemon inside the network namespace `netns` and waits until
    /// its API answers a health check; `node` names the node in errors.
    pub(super) fn start(
        spec: DaemonSpec<'_>,
        netns: File,
        node: &str,
    ) -> Result<DaemonProcess, BenchError> {
        let log = File::create(spec.log).map_err(|e| BenchError::io("create", spec.log, e))?;
        let log2 = log
            .try_clone()
            .map_err(|e| BenchError::io("dup", spec.log, e))?;
        let mut cmd = Command::new(spec.binary);
        cmd.arg("--socket")
            .arg(&spec.socket)
            .arg("--state-dir")
            .arg(spec.state_dir)
            .arg("--config")
            .arg(spec.config)
            .arg("--bpf-pin-dir")
            .arg(&spec.pin_dir)
            .arg("--log-level")
            .arg("warn")
            .stdin(Stdio::null())
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(log2));
        netns::enter_on_exec(&mut cmd, netns);
        let socket_text = spec.socket.to_str().ok_or_else(|| BenchError::Input {
            what: format!("daemon socket path {} is not UTF-8", spec.socket.display()),
        })?;
        let api = HttpDaemon::new(socket_text).map_err(|source| BenchError::Api {
            socket: spec.socket.clone(),
            call: "client for",
            source,
        })?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| BenchError::io("build runtime for", &spec.socket, e))?;
        let child = cmd
            .spawn()
            .map_err(|e| BenchError::io("spawn", spec.binary, e))?;
        let mut daemon = DaemonProcess {
            child,
            socket: spec.socket,
            pin_dir: spec.pin_dir,
            api,
            runtime,
        };
        daemon.wait_healthy(node, spec.log)?;
        Ok(daemon)
    }

    fn wait_healthy(&mut self, node: &str, log: &Path) -> Result<(), BenchError> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if self.socket.exists() && self.call("GET health", |api| api.health()).is_ok() {
                return Ok(());
            }
            let reason = match self.child.try_wait() {
                Ok(Some(status)) => Some(format!("exited ({status})")),
                _ if Instant::now() > deadline => Some(format!(
                    "no answer on its socket within {} s",
                    START_TIMEOUT.as_secs()
                )),
                _ => None,
            };
            if let Some(reason) = reason {
                return Err(BenchError::DaemonStart {
                    node: node.to_string(),
                    reason,
                    log_tail: super::tail(log, 20),
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Runs one API call `call` (named in errors) to completion.
    pub(super) fn call<'a, T, F>(
        &'a self,
        call: &'static str,
        f: impl FnOnce(&'a HttpDaemon) -> F,
    ) -> Result<T, BenchError>
    where
        F: Future<Output = Result<T, DaemonError>>,
    {
        self.runtime
            .block_on(f(&self.api))
            .map_err(|source| BenchError::Api {
                socket: self.socket.clone(),
                call,
                source,
            })
    }

    /// The daemon's pid.
    pub(super) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The daemon's bpffs pin dir.
    pub(super) fn pin_dir(&self) -> &Path {
        &self.pin_dir
    }
}

impl Drop for DaemonProcess {
    fn drop(&mut self) {
        if let Ok(pid) = i32::try_from(self.child.id()) {
            // Our own child, not reaped yet: the pid cannot have been reused.
            let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
        }
        if !matches!(self.child.wait_timeout(STOP_GRACE), Ok(Some(_))) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        if self.pin_dir.exists()
            && let Err(e) = std::fs::remove_dir_all(&self.pin_dir)
        {
            netns::warn(&format!(
                "removing {}: {}",
                self.pin_dir.display(),
                sarena_core::error_chain(&e)
            ));
        }
    }
}
