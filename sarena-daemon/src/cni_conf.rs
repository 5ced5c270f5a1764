//! `--write-cni-conf`: the daemon puts the conflist into the CNI conf dir
//! once it is ready to serve ADD, the way Cilium's agent does. The runtime
//! (containerd, CRI-O) reports the node's network ready as soon as a config
//! is there, and kubelet then sends ADDs; written earlier, those ADDs would
//! meet a daemon that cannot answer them yet (in Kubernetes mode: before
//! the Node's podCIDRs are known). The write itself is
//! [`sarena_core::install::Installer::write_conflist`]: temp file + rename
//! in the same directory, nothing touched when the file is up to date.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use sarena_core::api::NodeApi;
use sarena_core::install::{
    ConflistOptions, InstallError, Installer, Outcome, generate_conflist, validate_conflist,
};
use tokio::task::JoinHandle;

use crate::cli::Cli;

/// How often the daemon's health is looked at until it is ready.
pub const POLL: Duration = Duration::from_millis(200);
/// How long to wait after a failed write before the next try.
pub const RETRY: Duration = Duration::from_secs(5);

/// Why the conflist cannot be written at all (found at start-up).
#[derive(Debug, thiserror::Error)]
pub enum CniConfError {
    /// `--cni-conf-source` could not be read.
    #[error("cannot read --cni-conf-source {path}")]
    Source {
        /// The file.
        path: PathBuf,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// `--cni-conf-source` is not a conflist that calls Sarena.
    #[error("--cni-conf-source {path}: {reason}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// `--write-cni-conf` is not a file in a directory, or its name is one
    /// the runtime would not load.
    #[error("--write-cni-conf {path}")]
    Target {
        /// The path given.
        path: PathBuf,
        /// Cause.
        #[source]
        source: InstallError,
    },
}

/// The conflist and where it goes.
#[derive(Debug, Clone)]
pub struct CniConfWriter {
    installer: Installer,
    body: Vec<u8>,
}

impl CniConfWriter {
    /// The writer `--write-cni-conf` asks for (`None` without it): the
    /// conflist read and checked now, so that a bad one stops the start.
    pub fn from_cli(cli: &Cli) -> Result<Option<Self>, CniConfError> {
        let Some(path) = &cli.cni_conf.write else {
            return Ok(None);
        };
        let body = match &cli.cni_conf.source {
            Some(source) => {
                let body = std::fs::read(source).map_err(|e| CniConfError::Source {
                    path: source.clone(),
                    source: e,
                })?;
                validate_conflist(&body).map_err(|reason| CniConfError::Invalid {
                    path: source.clone(),
                    reason,
                })?;
                body
            }
            None => generate_conflist(&ConflistOptions::for_daemon(
                &cli.socket,
                &cli.delete_queue_dir(),
            )),
        };
        Ok(Some(Self::new(path, body)?))
    }

    /// A writer of `body` to `path`.
    pub fn new(path: &Path, body: Vec<u8>) -> Result<Self, CniConfError> {
        let target = |source| CniConfError::Target {
            path: path.to_path_buf(),
            source,
        };
        let (Some(dir), Some(name)) = (path.parent(), path.file_name().and_then(|n| n.to_str()))
        else {
            return Err(target(InstallError::ConflistName {
                name: path.display().to_string(),
            }));
        };
        let installer = Installer::new(sarena_core::install::DEFAULT_CNI_BIN_DIR, dir)
            .with_conflist_name(name)
            .map_err(target)?;
        Ok(CniConfWriter { installer, body })
    }

    /// Where the conflist goes.
    pub fn path(&self) -> PathBuf {
        self.installer.conflist_path()
    }

    /// Waits until `daemon` is ready (asking every `poll`), then writes the
    /// conflist, trying again every `retry` while the write fails.
    pub async fn write_when_ready(&self, daemon: &dyn NodeApi, poll: Duration, retry: Duration) {
        loop {
            match daemon.health().await {
                Ok(health) if health.ready => break,
                Ok(_) => {}
                Err(e) => tracing::debug!(
                    "health, waiting to write the CNI config: {}",
                    sarena_core::error_chain(&e)
                ),
            }
            tokio::time::sleep(poll).await;
        }
        loop {
            let writer = self.clone();
            let written =
                tokio::task::spawn_blocking(move || writer.installer.write_conflist(&writer.body))
                    .await;
            match written {
                Ok(Ok(Outcome::Written)) => {
                    tracing::info!(path = %self.path().display(), "ready: CNI config written");
                    return;
                }
                Ok(Ok(Outcome::Unchanged)) => {
                    tracing::info!(path = %self.path().display(), "ready: CNI config already in place");
                    return;
                }
                Ok(Err(e)) => tracing::warn!(
                    "cannot write the CNI config (retrying): {}",
                    sarena_core::error_chain(&e)
                ),
                Err(e) => tracing::warn!(
                    "the CNI config write did not complete (retrying): {}",
                    sarena_core::error_chain(&e)
                ),
            }
            tokio::time::sleep(retry).await;
        }
    }

    /// [`CniConfWriter::write_when_ready`] in the background.
    pub fn spawn(self, daemon: Arc<dyn NodeApi>) -> JoinHandle<()> {
        tokio::spawn(async move { self.write_when_ready(daemon.as_ref(), POLL, RETRY).await })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use sarena_core::api::{DaemonError, Health, MockNodeApi};

    use super::*;

    fn health(ready: bool) -> Result<Health, DaemonError> {
        Ok(Health {
            ready,
            message: String::new(),
        })
    }

    /// The file appears only after the daemon said it is ready: the mock
    /// checks that it is absent at every earlier answer.
    #[tokio::test]
    async fn the_conflist_is_written_only_once_the_daemon_is_ready() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("net.d/10-sarena.conflist");
        let writer =
            CniConfWriter::new(&path, generate_conflist(&ConflistOptions::default())).unwrap();
        let calls = Arc::new(AtomicUsize::new(0));
        let mut daemon = MockNodeApi::new();
        let (seen, absent) = (calls.clone(), path.clone());
        daemon.expect_health().times(4).returning(move || {
            assert!(!absent.exists(), "written before the daemon was ready");
            match seen.fetch_add(1, Ordering::SeqCst) {
                0 => Err(DaemonError::api(
                    sarena_core::api::ApiErrorKind::Unavailable,
                    "starting",
                )),
                1 | 2 => health(false),
                _ => health(true),
            }
        });
        writer
            .write_when_ready(&daemon, Duration::from_millis(1), Duration::from_millis(1))
            .await;
        assert_eq!(calls.load(Ordering::SeqCst), 4);
        assert_eq!(
            std::fs::read(&path).unwrap(),
            generate_conflist(&ConflistOptions::default())
        );
    }

    #[tokio::test]
    async fn a_failed_write_is_retried() {
        let dir = tempfile::tempdir().unwrap();
        let blocker = dir.path().join("net.d");
        std::fs::write(&blocker, b"a file where the directory should be").unwrap();
        let path = blocker.join("10-sarena.conflist");
        let writer =
            CniConfWriter::new(&path, generate_conflist(&ConflistOptions::default())).unwrap();
        let mut daemon = MockNodeApi::new();
        daemon.expect_health().returning(|| health(true));
        let fix = blocker.clone();
        let fixer = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            std::fs::remove_file(&fix).unwrap();
        });
        tokio::time::timeout(
            Duration::from_secs(10),
            writer.write_when_ready(&daemon, Duration::from_millis(1), Duration::from_millis(10)),
        )
        .await
        .expect("the write was not retried");
        fixer.await.unwrap();
        assert!(path.exists());
    }

    #[test]
    fn a_bad_source_or_target_stops_the_start() {
        let dir = tempfile::tempdir().unwrap();
        let parse = |args: &[&str]| {
            <Cli as clap::Parser>::try_parse_from(
                std::iter::once("sarena-daemon").chain(args.iter().copied()),
            )
            .unwrap()
        };
        assert!(CniConfWriter::from_cli(&parse(&[])).unwrap().is_none());
        let target = dir.path().join("10-sarena.conflist");
        let target = target.to_str().unwrap();
        let source = dir.path().join("src.conflist");
        let source_arg = source.to_str().unwrap();
        let err = CniConfWriter::from_cli(&parse(&[
            "--write-cni-conf",
            target,
            "--cni-conf-source",
            source_arg,
        ]))
        .unwrap_err();
        assert!(matches!(err, CniConfError::Source { .. }), "{err}");
        std::fs::write(
            &source,
            br#"{"cniVersion":"1.0.0","name":"x","plugins":[{"type":"bridge"}]}"#,
        )
        .unwrap();
        let err = CniConfWriter::from_cli(&parse(&[
            "--write-cni-conf",
            target,
            "--cni-conf-source",
            source_arg,
        ]))
        .unwrap_err();
        assert!(
            err.to_string().contains("no plugin of type `sarena-cni`"),
            "{err}"
        );
        let err = CniConfWriter::from_cli(&parse(&["--write-cni-conf", "/etc/cni/net.d/sarena"]))
            .unwrap_err();
        assert!(matches!(err, CniConfError::Target { .. }), "{err}");

        let socket = dir.path().join("s.sock");
        let writer = CniConfWriter::from_cli(&parse(&[
            "--write-cni-conf",
            target,
            "--socket",
            socket.to_str().unwrap(),
        ]))
        .unwrap()
        .unwrap();
        let body: serde_json::Value = serde_json::from_slice(&writer.body).unwrap();
        assert_eq!(
            body["plugins"][0]["daemon-endpoint"],
            socket.display().to_string(),
            "the generated conflist points at this daemon's socket"
        );
    }
}
