//! Start-up and the daemon's life: load the config, open the node state, replay
//! the plugin's deletion queue, bind the listeners, expire leases in the
//! background, serve until SIGTERM/SIGINT. Kubernetes mode (`--kubernetes` or
//! `[kubernetes] enabled`) starts up its own way: see [`crate::kubernetes`].

use std::future::Future;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use sarena_core::api::NetworkStatus;
use sarena_core::node::{ConfigError, NetworkCell, NodeConfig, NodeError, Registry};
use sarena_core::plugin::{DeleteQueue, QueueError};
use tokio::signal::unix::{SignalKind, signal};
use tokio::task::JoinHandle;

use crate::cli::Cli;
use crate::cni_conf::{CniConfError, CniConfWriter};
use crate::dataplane::{self, DataplaneStartError};
use crate::kubernetes::{self, KubernetesError};
use crate::metrics::{self, Metrics, MetricsError};
use crate::operated::Operated;
use crate::server::{self, DEFAULT_SHUTDOWN_GRACE, ServerError, TcpApi, UnixSocket};

/// Why the daemon could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The config file could not be read.
    #[error("cannot read config file {path}")]
    ReadConfig {
        /// The file.
        path: PathBuf,
        /// Cause.
        #[source]
        source: io::Error,
    },
    /// The config file is invalid.
    #[error("config file {path}")]
    Config {
        /// The file.
        path: PathBuf,
        /// What is wrong (names the field).
        #[source]
        source: ConfigError,
    },
    /// The state could not be opened.
    #[error("cannot open the state in {state_dir}")]
    Registry {
        /// `--state-dir`.
        state_dir: PathBuf,
        /// Cause (boxed: it is large).
        #[source]
        source: Box<NodeError>,
    },
    /// The deletion queue could not be read.
    #[error("cannot replay the deletion queue")]
    Queue(#[from] QueueError),
    /// A listener could not be set up.
    #[error(transparent)]
    Server(#[from] ServerError),
    /// The dataplane could not start.
    #[error(transparent)]
    Dataplane(#[from] DataplaneStartError),
    /// The state or pin directory is another daemon's.
    #[error(transparent)]
    Lock(#[from] crate::locks::LockError),
    /// The metrics listener could not be set up.
    #[error(transparent)]
    Metrics(#[from] MetricsError),
    /// Signal handlers could not be installed.
    #[error("cannot install signal handlers")]
    Signal(#[source] io::Error),
    /// `--write-cni-conf` / `--cni-conf-source` cannot work.
    #[error(transparent)]
    CniConf(#[from] CniConfError),
    /// Kubernetes mode failed.
    #[error("Kubernetes mode")]
    Kubernetes(#[from] KubernetesError),
    /// `--sysctl-dir` cannot be used.
    #[error(transparent)]
    SysctlDir(#[from] crate::sysctl_dir::SysctlDirError),
}

/// The config from `--config` ([`NodeConfig::load`]), or the embedded default.
pub fn load_config(cli: &Cli) -> Result<NodeConfig, StartError> {
    let Some(path) = &cli.config else {
        return Ok(NodeConfig::default());
    };
    NodeConfig::load(path).map_err(|e| match e {
        ConfigError::Read { path, source } => StartError::ReadConfig { path, source },
        source => StartError::Config {
            path: path.clone(),
            source,
        },
    })
}

/// Resolves on the first SIGTERM or SIGINT.
pub fn shutdown_signal() -> Result<impl Future<Output = ()>, StartError> {
    let mut term = signal(SignalKind::terminate()).map_err(StartError::Signal)?;
    let mut int = signal(SignalKind::interrupt()).map_err(StartError::Signal)?;
    Ok(async move {
        let name = tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = int.recv() => "SIGINT",
        };
        tracing::info!(signal = name, "shutting down");
    })
}

/// How often leases are checked: a quarter of the lease, between 250 ms and 5 s;
/// `None` when leases are disabled (`lease_seconds = 0`).
pub fn lease_check_interval(lease_seconds: u64) -> Option<Duration> {
    (lease_seconds > 0).then(|| {
        Duration::from_millis(lease_seconds.saturating_mul(250))
            .clamp(Duration::from_millis(250), Duration::from_secs(5))
    })
}

/// Runs the daemon until `shutdown` resolves.
pub async fn run(cli: &Cli, shutdown: impl Future<Output = ()>) -> Result<(), StartError> {
    if let Some(addr) = cli.listen_tcp {
        server::check_tcp_addr(addr, cli.allow_remote_tcp)?;
    }
    crate::sysctl_dir::apply(cli.sysctl_dir.as_deref())?;
    let observed = metrics_for(cli)?;
    let config = load_config(cli)?;
    let cni_conf = CniConfWriter::from_cli(cli)?;
    let _locks = crate::locks::lock_dirs(
        &cli.state_dir,
        (config.dataplane == sarena_core::dataplane::DataplaneMode::Ebpf)
            .then_some(cli.bpf_pin_dir.as_path()),
    )?;
    if cli.kubernetes || config.kubernetes.enabled {
        return Ok(kubernetes::run(cli, config, observed, cni_conf, shutdown).await?);
    }
    let mut config = config;
    let configured_mtu = config.mtu;
    let network = standalone_network(&mut config).await?;
    let lease_seconds = config.lease_seconds;
    let state_dir = cli.state_dir.clone();
    let node_config = config.clone();
    let opened = tokio::task::spawn_blocking(move || Registry::open(&state_dir, node_config))
        .await
        .unwrap_or_else(|source| Err(NodeError::Task { source }));
    let node = opened.map_err(|e| StartError::Registry {
        state_dir: cli.state_dir.clone(),
        source: Box::new(e),
    })?;

    let queue = DeleteQueue::new(cli.delete_queue_dir());
    let report = queue.replay(&node).await?;
    if let Some(m) = &observed {
        m.replay(&report);
    }
    if !report.done.is_empty() || report.remaining > 0 {
        tracing::info!(
            dir = %queue.dir().display(),
            done = report.done.len(),
            remaining = report.remaining,
            "deletion queue replayed"
        );
    }

    let parts = dataplane::DataplaneParts::new(
        config.dataplane,
        &cli.bpf_pin_dir,
        dataplane::host_ledger(&cli.socket),
    )?;
    let (daemon, reconciled) = dataplane::start_on(&parts, &config, node.clone()).await?;
    let mut operated = Operated::new(daemon)
        .with_delete_queue(queue.clone())
        .with_network(network.clone());
    if let Some(m) = &observed {
        if let Some(report) = &reconciled {
            m.reconcile(report);
        }
        operated = operated.with_metrics(m.clone());
    }
    let daemon: Arc<dyn sarena_core::api::NodeApi> = Arc::new(operated);
    crate::events::start_for(cli, parts.ebpf(), daemon.clone());

    // TCP first: a token file that cannot be used fails start-up before
    // the socket exists.
    let tcp = TcpApi::from_cli(cli).await?;
    let unix = UnixSocket::bind(&cli.socket)?;
    let metrics_task = serve_metrics(cli, observed.as_ref(), &daemon).await?;
    let expiry =
        lease_check_interval(lease_seconds).map(|every| spawn_lease_expiry(node.clone(), every));
    let cni_conf_task = cni_conf.map(|w| w.spawn(daemon.clone()));
    // no `mtu` configured: new pods follow the uplink's
    let mtu_task = configured_mtu.is_none().then(|| {
        tokio::spawn(sarena_core::uplink::follow_standalone_mtu(
            node.clone(),
            network.clone(),
            sarena_core::uplink::STANDALONE_MTU_POLL,
        ))
    });
    tracing::info!(
        socket = %cli.socket.display(),
        tcp = ?tcp.as_ref().and_then(|t| t.local_addr().ok()),
        state_dir = %cli.state_dir.display(),
        lease_seconds,
        "serving the API"
    );
    let shutdown = async {
        shutdown.await;
        crate::events::close_installed();
    };
    server::serve(daemon, unix, tcp, shutdown, DEFAULT_SHUTDOWN_GRACE).await;
    for task in [expiry, metrics_task, cni_conf_task, mtu_task]
        .into_iter()
        .flatten()
    {
        task.abort();
    }
    parts.hand_over();
    tracing::info!("stopped");
    Ok(())
}

/// Outside Kubernetes mode: resolves the pods' MTU into `config` (the
/// configured one, else the default route's device's) and reports it and
/// masquerading (this node's pools and the configured exemptions).
async fn standalone_network(config: &mut NodeConfig) -> Result<NetworkCell, StartError> {
    let mtu = sarena_core::uplink::standalone_mtu(config.mtu).await;
    tracing::info!(mtu = mtu.mtu, "the pods' MTU: {mtu}");
    config.mtu = Some(mtu.mtu);
    let pools = config
        .node_network()
        .map_err(|e| StartError::Dataplane(e.into()))?
        .pools;
    let masquerade = sarena_core::cluster::masquerade_status(
        config.masquerade_enabled(),
        &pools,
        &config.masquerade_exempt(),
        &Default::default(),
    );
    Ok(Arc::new(std::sync::Mutex::new(NetworkStatus {
        mtu: Some(mtu),
        masquerade: Some(masquerade),
        ..NetworkStatus::default()
    })))
}

/// The metrics the daemon keeps when `--metrics-listen` asks for them (the
/// address checked first).
pub(crate) fn metrics_for(cli: &Cli) -> Result<Option<Arc<Metrics>>, MetricsError> {
    let Some(addr) = cli.metrics.listen else {
        return Ok(None);
    };
    metrics::check_addr(addr, cli.metrics.allow_remote)?;
    Ok(Some(Arc::new(Metrics::new(cli.metrics.endpoint_limit))))
}

/// Serves `observed` at `--metrics-listen` in the background (reading
/// `daemon`'s state at each scrape) and observes every API request.
pub(crate) async fn serve_metrics(
    cli: &Cli,
    observed: Option<&Arc<Metrics>>,
    daemon: &Arc<dyn sarena_core::api::NodeApi>,
) -> Result<Option<JoinHandle<()>>, MetricsError> {
    let (Some(addr), Some(m)) = (cli.metrics.listen, observed) else {
        return Ok(None);
    };
    let listener = metrics::bind(addr, cli.metrics.allow_remote).await?;
    tracing::info!(addr = ?listener.local_addr().ok(), "serving metrics at /metrics");
    crate::routes::set_observer(m.clone());
    let options = metrics::ServeOptions {
        remote_pod_names: cli.metrics.remote_pod_names,
        ..Default::default()
    };
    let serving = metrics::serve(
        listener,
        m.clone(),
        daemon.clone(),
        options,
        std::future::pending(),
    );
    Ok(Some(tokio::spawn(serving)))
}

/// Calls [`Registry::expire_leases`] every `every`, off the async workers.
pub(crate) fn spawn_lease_expiry(node: Registry, every: Duration) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(every);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            let node = node.clone();
            match tokio::task::spawn_blocking(move || node.expire_leases(node.now())).await {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => {
                    tracing::warn!("lease expiry failed: {}", sarena_core::error_chain(&e))
                }
                Err(e) => {
                    tracing::warn!("lease expiry task failed: {}", sarena_core::error_chain(&e))
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_interval_scales_with_the_lease() {
        assert_eq!(lease_check_interval(0), None);
        assert_eq!(lease_check_interval(1), Some(Duration::from_millis(250)));
        assert_eq!(lease_check_interval(8), Some(Duration::from_secs(2)));
        assert_eq!(lease_check_interval(180), Some(Duration::from_secs(5)));
        assert_eq!(lease_check_interval(u64::MAX), Some(Duration::from_secs(5)));
    }

    #[test]
    fn config_file_errors_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let cli = |config: Option<PathBuf>| Cli {
            socket: dir.path().join("s"),
            state_dir: dir.path().join("st"),
            config,
            listen_tcp: None,
            allow_remote_tcp: false,
            tcp_token_file: None,
            delete_queue: None,
            bpf_pin_dir: "/sys/fs/bpf/sarena-unused".into(),
            sysctl_dir: None,
            log_level: "info".into(),
            print_default_config: false,
            metrics: Default::default(),
            events: Default::default(),
            cni_conf: Default::default(),
            uninstall: Default::default(),
            kubernetes: false,
            kubeconfig: None,
            node_name: None,
        };
        assert_eq!(load_config(&cli(None)).unwrap(), NodeConfig::default());
        let missing = dir.path().join("missing.toml");
        let err = load_config(&cli(Some(missing))).unwrap_err();
        assert!(matches!(err, StartError::ReadConfig { .. }), "{err}");
        let bad = dir.path().join("bad.toml");
        std::fs::write(&bad, "mtu = \"big\"\n").unwrap();
        let err = load_config(&cli(Some(bad.clone()))).unwrap_err();
        assert!(err.to_string().contains("bad.toml"), "{err}");
        std::fs::write(&bad, "lease_seconds = 1\n").unwrap();
        assert_eq!(load_config(&cli(Some(bad))).unwrap().lease_seconds, 1);
    }
}
