//! The command line.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Parser;
use sarena_core::api::DEFAULT_SOCKET;

/// Where the daemon keeps its state unless told otherwise.
pub const DEFAULT_STATE_DIR: &str = "/var/lib/sarena";

/// The Sarena node daemon: IPAM and endpoint registry behind a REST API on a Unix
/// socket (and optionally loopback TCP).
#[derive(Debug, Clone, PartialEq, Eq, Parser)]
#[command(name = "sarena-daemon", version, about, long_about = None)]
pub struct Cli {
    /// Unix socket the API is served on (created mode 0600; a stale one is replaced).
    #[arg(long, value_name = "PATH", default_value = DEFAULT_SOCKET)]
    pub socket: PathBuf,

    /// Directory of the durable state (IPAM and endpoint registry).
    #[arg(long, value_name = "DIR", default_value = DEFAULT_STATE_DIR)]
    pub state_dir: PathBuf,

    /// Configuration file (TOML); without it the embedded default is used
    /// (see --print-default-config).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Also serve the API on this TCP address (IP:PORT); loopback only unless
    /// --allow-remote-tcp is given. Every route but the health check needs
    /// the bearer token of --tcp-token-file.
    #[arg(long, value_name = "ADDR")]
    pub listen_tcp: Option<SocketAddr>,

    /// Drop and flow events (eBPF dataplane).
    #[command(flatten)]
    pub events: EventArgs,

    /// Allow --listen-tcp on a non-loopback address (there is no TLS: the
    /// token crosses the network in clear).
    #[arg(long, requires = "listen_tcp")]
    pub allow_remote_tcp: bool,

    /// The bearer token TCP clients must present: created (mode 0600, 256
    /// random bits) when missing; refused when others can read it, or it is
    /// a symlink or another user's [default: STATE_DIR/api-token].
    #[arg(long, value_name = "FILE", requires = "listen_tcp")]
    pub tcp_token_file: Option<PathBuf>,

    /// The plugin's deletion queue, replayed at start-up [default: STATE_DIR/delete-queue].
    #[arg(long, value_name = "DIR")]
    pub delete_queue: Option<PathBuf>,

    /// bpffs directory where the eBPF dataplane pins its maps and links (they
    /// outlive the daemon, so pod traffic keeps flowing across restarts).
    #[arg(long, value_name = "DIR", default_value = sarena_core::dataplane::ebpf::DEFAULT_PIN_DIR)]
    pub bpf_pin_dir: PathBuf,

    /// Write sysctls under DIR instead of /proc/sys: in a non-privileged
    /// container, where /proc/sys is read-only, the host's /proc/sys/net
    /// mounted read-write at DIR/net (checked at start-up).
    #[arg(long, value_name = "DIR", env = "SARENA_SYSCTL_DIR")]
    pub sysctl_dir: Option<PathBuf>,

    /// Log filter: a level (error, warn, info, debug, trace) or tracing directives
    /// such as `sarena_daemon=debug,info`.
    #[arg(long, value_name = "LEVEL", default_value = "info")]
    pub log_level: String,

    /// Print the embedded default configuration and exit.
    #[arg(long, conflicts_with = "uninstall")]
    pub print_default_config: bool,

    /// Kubernetes mode (also `[kubernetes] enabled = true`): pools from this
    /// node's spec.podCIDRs, routes to the other nodes' podCIDRs, the Node's
    /// NetworkUnavailable condition. In-cluster credentials unless --kubeconfig.
    #[arg(long)]
    pub kubernetes: bool,

    /// Kubeconfig file for Kubernetes mode outside a pod (overrides
    /// `[kubernetes] kubeconfig`).
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,

    /// This node's name in Kubernetes mode [default: the hostname].
    #[arg(long, value_name = "NAME", env = "NODE_NAME")]
    pub node_name: Option<String>,

    /// The Prometheus metrics listener.
    #[command(flatten)]
    pub metrics: MetricsArgs,

    /// The CNI config the daemon writes once it serves.
    #[command(flatten)]
    pub cni_conf: CniConfArgs,

    /// `--uninstall` and its options.
    #[command(flatten)]
    pub uninstall: UninstallArgs,
}

/// `--uninstall`: remove Sarena from this node instead of running the
/// daemon, with the daemon's own flags saying where everything is.
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub struct UninstallArgs {
    /// Remove everything Sarena put on this node (and only that) instead of
    /// running the daemon; stop the daemon first. Give the daemon's own
    /// flags. Prints one line per object and a JSON summary; exit 0 when
    /// the node is clean, 1 when something is left or failed.
    #[arg(long = "uninstall", id = "uninstall")]
    pub enabled: bool,

    /// With --uninstall: list what would be removed, change nothing (no
    /// lock taken); exit 0 when nothing is there, 1 otherwise.
    #[arg(long, requires = "uninstall", conflicts_with = "keep_running")]
    pub dry_run: bool,

    /// With --uninstall: retry (5 s, backing off to 60 s) until the node is
    /// clean, waiting for a live daemon to stop; then wait for SIGTERM or
    /// SIGINT and exit 0 (the uninstall DaemonSet's mode).
    #[arg(long, requires = "uninstall")]
    pub keep_running: bool,

    /// With --keep-running: created when the node is clean, removed when a
    /// later scan finds something (for a readiness probe).
    #[arg(long, value_name = "FILE", requires = "keep_running")]
    pub clean_marker: Option<PathBuf>,

    /// With --uninstall: leave the sysctls Sarena changed as they are.
    #[arg(long, requires = "uninstall")]
    pub keep_sysctls: bool,

    /// The CNI bin dir holding the plugin `sarena-cni`.
    #[arg(long, value_name = "DIR", default_value = sarena_core::install::DEFAULT_CNI_BIN_DIR)]
    pub cni_bin_dir: PathBuf,

    /// The CNI conf dir holding Sarena's conflist (10-sarena.conflist;
    /// --write-cni-conf, when given, names the conflist exactly).
    #[arg(long, value_name = "DIR", default_value = sarena_core::install::DEFAULT_CNI_CONF_DIR)]
    pub cni_conf_dir: PathBuf,
}

impl Default for UninstallArgs {
    fn default() -> Self {
        UninstallArgs {
            enabled: false,
            dry_run: false,
            keep_running: false,
            clean_marker: None,
            keep_sysctls: false,
            cni_bin_dir: PathBuf::from(sarena_core::install::DEFAULT_CNI_BIN_DIR),
            cni_conf_dir: PathBuf::from(sarena_core::install::DEFAULT_CNI_CONF_DIR),
        }
    }
}

/// `--write-cni-conf` and `--cni-conf-source` (off by default).
#[derive(Debug, Clone, Default, PartialEq, Eq, clap::Args)]
pub struct CniConfArgs {
    /// Once the daemon is ready to serve ADD, write this conflist (e.g.
    /// /etc/cni/net.d/10-sarena.conflist; temp file + rename in its
    /// directory, left alone when it is already up to date), so kubelet
    /// never calls the plugin before the daemon can answer.
    #[arg(long = "write-cni-conf", value_name = "FILE")]
    pub write: Option<PathBuf>,

    /// The conflist to write (checked at start-up: it must call sarena-cni)
    /// [default: one sarena-cni plugin, cniVersion 1.0.0, pointing at
    /// --socket and --delete-queue].
    #[arg(long = "cni-conf-source", value_name = "FILE", requires = "write")]
    pub source: Option<PathBuf>,
}

/// `--metrics-listen` and its companions (off by default).
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub struct MetricsArgs {
    /// Serve Prometheus metrics on this TCP address (IP:PORT) at /metrics;
    /// loopback only unless --allow-remote-metrics is given. Off by default.
    #[arg(long = "metrics-listen", value_name = "ADDR")]
    pub listen: Option<SocketAddr>,

    /// Allow --metrics-listen on a non-loopback address. Remote scrapers see
    /// no pod names or namespaces unless --allow-remote-pod-names.
    #[arg(long = "allow-remote-metrics", requires = "listen")]
    pub allow_remote: bool,

    /// Show pod names and namespaces to scrapers from non-loopback addresses
    /// too (by default only loopback scrapers see them).
    #[arg(long = "allow-remote-pod-names", requires = "allow_remote")]
    pub remote_pod_names: bool,

    /// Per-endpoint series are exported for at most this many endpoints (the
    /// rest are counted in sarena_metrics_endpoints_omitted).
    #[arg(long = "metrics-endpoint-limit", value_name = "N", default_value_t = crate::metrics::DEFAULT_ENDPOINT_LIMIT)]
    pub endpoint_limit: usize,
}

impl Default for MetricsArgs {
    fn default() -> Self {
        MetricsArgs {
            listen: None,
            allow_remote: false,
            remote_pod_names: false,
            endpoint_limit: crate::metrics::DEFAULT_ENDPOINT_LIMIT,
        }
    }
}

impl Cli {
    /// The TCP listener's token file: `--tcp-token-file` or `<state-dir>/api-token`.
    pub fn tcp_token_file(&self) -> PathBuf {
        self.tcp_token_file
            .clone()
            .unwrap_or_else(|| self.state_dir.join(sarena_core::store::API_TOKEN_FILE))
    }

    /// Sarena's conflist: `--write-cni-conf`, else `10-sarena.conflist` in
    /// `--cni-conf-dir`.
    pub fn conflist_path(&self) -> PathBuf {
        self.cni_conf.write.clone().unwrap_or_else(|| {
            self.uninstall
                .cni_conf_dir
                .join(sarena_core::install::DEFAULT_CONFLIST_NAME)
        })
    }

    /// The deletion queue directory: `--delete-queue` or `<state-dir>/delete-queue`.
    pub fn delete_queue_dir(&self) -> PathBuf {
        self.delete_queue
            .clone()
            .unwrap_or_else(|| self.state_dir.join(sarena_core::store::DELETE_QUEUE_DIR))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("sarena-daemon").chain(args.iter().copied()))
    }

    #[test]
    fn defaults() {
        let cli = parse(&[]).unwrap();
        assert_eq!(cli.socket, PathBuf::from("/run/sarena/sarena.sock"));
        assert_eq!(cli.state_dir, PathBuf::from("/var/lib/sarena"));
        assert_eq!(cli.config, None);
        assert_eq!(cli.listen_tcp, None);
        assert!(!cli.allow_remote_tcp);
        assert_eq!(cli.log_level, "info");
        assert_eq!(cli.metrics, MetricsArgs::default());
        assert_eq!(cli.cni_conf, CniConfArgs::default());
        assert!(!cli.kubernetes);
        assert_eq!(cli.kubeconfig, None);
        assert_eq!(cli.sysctl_dir, None);
        assert_eq!(cli.uninstall, UninstallArgs::default());
        assert_eq!(
            cli.conflist_path(),
            PathBuf::from("/etc/cni/net.d/10-sarena.conflist")
        );
        assert_eq!(
            cli.delete_queue_dir(),
            PathBuf::from("/var/lib/sarena/delete-queue")
        );
    }

    #[test]
    fn all_options() {
        let cli = parse(&[
            "--socket=/tmp/s.sock",
            "--state-dir",
            "/tmp/st",
            "--config",
            "/etc/sarena.toml",
            "--listen-tcp",
            "[::1]:7070",
            "--allow-remote-tcp",
            "--delete-queue",
            "/tmp/q",
            "--log-level",
            "debug",
            "--sysctl-dir",
            "/host/proc/sys",
        ])
        .unwrap();
        assert_eq!(cli.sysctl_dir, Some(PathBuf::from("/host/proc/sys")));
        assert_eq!(cli.socket, PathBuf::from("/tmp/s.sock"));
        assert_eq!(cli.listen_tcp, Some("[::1]:7070".parse().unwrap()));
        assert!(cli.allow_remote_tcp);
        assert_eq!(cli.delete_queue_dir(), PathBuf::from("/tmp/q"));
        assert_eq!(cli.tcp_token_file(), PathBuf::from("/tmp/st/api-token"));
        let with_file = parse(&["--listen-tcp=127.0.0.1:1", "--tcp-token-file=/etc/t"]).unwrap();
        assert_eq!(with_file.tcp_token_file(), PathBuf::from("/etc/t"));
        assert!(
            parse(&["--tcp-token-file=/etc/t"]).is_err(),
            "needs --listen-tcp"
        );
        assert_eq!(
            parse(&["--state-dir", "/x"]).unwrap().delete_queue_dir(),
            PathBuf::from("/x/delete-queue")
        );
    }

    #[test]
    fn metrics_options() {
        let cli = parse(&[
            "--metrics-listen",
            "127.0.0.1:9464",
            "--allow-remote-metrics",
            "--metrics-endpoint-limit",
            "10",
        ])
        .unwrap();
        assert_eq!(cli.metrics.listen, Some("127.0.0.1:9464".parse().unwrap()));
        assert!(cli.metrics.allow_remote);
        assert_eq!(cli.metrics.endpoint_limit, 10);
        assert!(
            parse(&["--allow-remote-metrics"]).is_err(),
            "needs --metrics-listen"
        );
        assert!(!cli.metrics.remote_pod_names);
        let names = [
            "--metrics-listen",
            "0.0.0.0:9464",
            "--allow-remote-pod-names",
        ];
        assert!(parse(&names).is_err(), "needs --allow-remote-metrics");
        let names = [&names[..], &["--allow-remote-metrics"]].concat();
        assert!(parse(&names).unwrap().metrics.remote_pod_names);
    }

    #[test]
    fn kubernetes_options() {
        let cli = parse(&[
            "--kubernetes",
            "--kubeconfig",
            "/etc/k.conf",
            "--node-name",
            "node7",
        ])
        .unwrap();
        assert!(cli.kubernetes);
        assert_eq!(cli.kubeconfig, Some(PathBuf::from("/etc/k.conf")));
        assert_eq!(cli.node_name.as_deref(), Some("node7"));
    }

    #[test]
    fn cni_conf_options() {
        let cli = parse(&[
            "--write-cni-conf",
            "/etc/cni/net.d/10-sarena.conflist",
            "--cni-conf-source",
            "/etc/sarena/cni.conflist",
        ])
        .unwrap();
        assert_eq!(
            cli.cni_conf.write,
            Some(PathBuf::from("/etc/cni/net.d/10-sarena.conflist"))
        );
        assert_eq!(
            cli.cni_conf.source,
            Some(PathBuf::from("/etc/sarena/cni.conflist"))
        );
        assert!(
            parse(&["--cni-conf-source", "/x"]).is_err(),
            "needs --write-cni-conf"
        );
    }

    #[test]
    fn uninstall_options() {
        let cli = parse(&[
            "--uninstall",
            "--keep-running",
            "--clean-marker",
            "/tmp/u/clean",
            "--keep-sysctls",
            "--cni-bin-dir",
            "/host/opt/cni/bin",
            "--cni-conf-dir",
            "/host/etc/cni/net.d",
        ])
        .unwrap();
        assert!(cli.uninstall.enabled && cli.uninstall.keep_running && cli.uninstall.keep_sysctls);
        assert!(!cli.uninstall.dry_run);
        assert_eq!(
            cli.uninstall.clean_marker,
            Some(PathBuf::from("/tmp/u/clean"))
        );
        assert_eq!(
            cli.uninstall.cni_bin_dir,
            PathBuf::from("/host/opt/cni/bin")
        );
        assert_eq!(
            cli.conflist_path(),
            PathBuf::from("/host/etc/cni/net.d/10-sarena.conflist")
        );
        let named = parse(&["--uninstall", "--write-cni-conf", "/etc/x/05-s.conflist"]).unwrap();
        assert_eq!(named.conflist_path(), PathBuf::from("/etc/x/05-s.conflist"));
        assert!(
            parse(&["--uninstall", "--dry-run"])
                .unwrap()
                .uninstall
                .dry_run
        );
    }

    #[test]
    fn the_uninstall_options_need_uninstall_and_exclude_each_other() {
        for alone in [
            &["--dry-run"][..],
            &["--keep-running"],
            &["--keep-sysctls"],
            &["--uninstall", "--clean-marker", "/x"],
            &["--uninstall", "--dry-run", "--keep-running"],
            &["--uninstall", "--print-default-config"],
        ] {
            let err = parse(alone).unwrap_err();
            assert_eq!(err.exit_code(), 2, "{alone:?}: {err}");
        }
    }

    #[test]
    fn rejects_bad_input() {
        assert!(parse(&["--listen-tcp", "localhost:80"]).is_err());
        assert!(
            parse(&["--allow-remote-tcp"]).is_err(),
            "needs --listen-tcp"
        );
        assert!(parse(&["--bogus"]).is_err());
    }
}

/// The events' flags (`sarena monitor`).
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub struct EventArgs {
    /// No drop events (`sarena monitor`; eBPF dataplane): drops are still
    /// counted. Switchable at run time (`sarena monitor config`).
    #[arg(long)]
    pub no_drop_events: bool,

    /// Drop and flow events each pod may cause per second, on average (0:
    /// no limit); those beyond are counted, not sent.
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub event_rate: u32,

    /// Events each pod may cause in a burst.
    #[arg(long, value_name = "N", default_value_t = 200)]
    pub event_burst: u32,

    /// Events the daemon keeps for `sarena monitor --since`.
    #[arg(long, value_name = "N", default_value_t = crate::events::DEFAULT_HISTORY)]
    pub event_history: usize,
}

impl Default for EventArgs {
    fn default() -> Self {
        EventArgs {
            no_drop_events: false,
            event_rate: 100,
            event_burst: 200,
            event_history: crate::events::DEFAULT_HISTORY,
        }
    }
}
