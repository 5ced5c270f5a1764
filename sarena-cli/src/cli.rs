//! The arguments of `sarena`.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};
use sarena_core::api::DEFAULT_SOCKET;
use sarena_core::install;

/// The operator's view of a node's Sarena daemon: its status, endpoints and
/// address pools.
#[derive(Debug, Clone, Parser)]
#[command(name = "sarena", version, about, long_about = None)]
pub struct Cli {
    /// The daemon's API socket (or unix:///PATH, http://IP:PORT).
    #[arg(long, global = true, value_name = "PATH", env = "SARENA_SOCKET", default_value = DEFAULT_SOCKET)]
    pub socket: PathBuf,

    /// The daemon's token file, for an http:// --socket (the daemon's
    /// --tcp-token-file) [default: /var/lib/sarena/api-token when it exists].
    #[arg(long, global = true, value_name = "FILE", env = "SARENA_TOKEN_FILE")]
    pub token_file: Option<PathBuf>,

    /// Output: a human-readable table, or JSON for scripts.
    #[arg(short, long, global = true, value_enum, default_value_t = OutputFormat::Table)]
    pub output: OutputFormat,

    /// How long to wait for the daemon's answer, in seconds.
    #[arg(long, global = true, value_name = "SECONDS", default_value_t = Seconds(5))]
    pub timeout: Seconds,

    /// What to show.
    #[command(subcommand)]
    pub command: Command,
}

/// A whole number of seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seconds(pub u64);

impl std::str::FromStr for Seconds {
    type Err = std::num::ParseIntError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        s.parse().map(Seconds)
    }
}

impl std::fmt::Display for Seconds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl From<Seconds> for Duration {
    fn from(s: Seconds) -> Duration {
        Duration::from_secs(s.0)
    }
}

/// `-o`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// Tables and key/value lines.
    Table,
    /// The API's JSON (stable field names, see docs/api.md).
    Json,
}

/// The commands.
#[derive(Debug, Clone, Subcommand)]
pub enum Command {
    /// Daemon health and version, dataplane and programs, pools, endpoints,
    /// deletion queue, Kubernetes mode.
    Status,
    /// The endpoints (pods) of this node.
    #[command(subcommand)]
    Endpoint(EndpointCommand),
    /// Pools, allocations and leases.
    #[command(subcommand)]
    Ipam(IpamCommand),
    /// NetworkPolicy as this node enforces it (Kubernetes mode).
    #[command(subcommand)]
    Policy(PolicyCommand),
    /// Exits 0 when the daemon is ready to serve ADD, else 1 with the reason
    /// (a readiness probe).
    Health,
    /// Streams drop (and, when switched on, flow) events as they happen,
    /// resolved to pods (eBPF dataplane); ends when the daemon goes away.
    /// `monitor config` shows or changes what is sent.
    Monitor(MonitorArgs),
    /// Installs Sarena on this node: the plugin into the CNI bin dir (by
    /// rename, never over a running binary), then the conflist into the CNI
    /// conf dir (temp file + rename); idempotent. `--uninstall` removes the
    /// conflist again.
    InstallCni(InstallCniArgs),
}

/// `sarena install-cni …`.
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub struct InstallCniArgs {
    /// The CNI bin dir (created when missing).
    #[arg(long, value_name = "DIR", default_value = install::DEFAULT_CNI_BIN_DIR)]
    pub cni_bin_dir: PathBuf,
    /// The CNI conf dir (created when missing).
    #[arg(long, value_name = "DIR", default_value = install::DEFAULT_CNI_CONF_DIR)]
    pub cni_conf_dir: PathBuf,
    /// The conflist's file name in the conf dir.
    #[arg(long, value_name = "NAME", default_value = install::DEFAULT_CONFLIST_NAME)]
    pub conflist_name: String,
    /// The plugin binary to install [default: sarena-cni beside this command].
    #[arg(long, value_name = "FILE")]
    pub plugin: Option<PathBuf>,
    /// The conflist to write [default: one sarena-cni plugin, cniVersion
    /// 1.0.0, talking to --socket].
    #[arg(long, value_name = "FILE", conflicts_with = "plugin_only")]
    pub conflist: Option<PathBuf>,
    /// Install the plugin only: the daemon writes the conflist once it
    /// serves (sarena-daemon --write-cni-conf), so kubelet never calls a
    /// plugin the daemon cannot answer yet.
    #[arg(long)]
    pub plugin_only: bool,
    /// Rename every other network config in the conf dir to NAME.sarena-bak
    /// (the runtime loads only the first config; --uninstall puts them back).
    #[arg(long)]
    pub exclusive: bool,
    /// Remove Sarena's conflist (never another network's) and put back what
    /// --exclusive set aside; the plugin stays for the DELs of pods still on
    /// the node. Kubelet then reports the node NotReady.
    #[arg(long, conflicts_with_all = ["plugin_only", "conflist", "plugin", "exclusive"])]
    pub uninstall: bool,
}

/// `sarena endpoint …`.
#[derive(Debug, Clone, Subcommand)]
pub enum EndpointCommand {
    /// Every endpoint with its addresses, host interface, age and traffic.
    List,
    /// One endpoint with all its eBPF counters and drops by reason.
    Get {
        /// The container id (CNI_CONTAINERID).
        container_id: String,
        /// The pod-side interface (CNI_IFNAME).
        #[arg(long, default_value = "eth0")]
        ifname: String,
    },
}

/// `sarena policy …`.
#[derive(Debug, Clone, Subcommand)]
pub enum PolicyCommand {
    /// Every endpoint of this node: isolated for ingress and egress or
    /// not, and the policies selecting it.
    List,
    /// Whether a packet passes (the sender's egress, the receiver's
    /// ingress), naming the policy rule that allows it. Exits 0 when
    /// allowed, 1 when denied (the explanation is printed either way).
    Explain {
        /// The sender: NAMESPACE/POD or an IP address.
        #[arg(long, value_name = "NS/POD|IP")]
        from: sarena_core::api::PolicyParty,
        /// The receiver: NAMESPACE/POD or an IP address.
        #[arg(long, value_name = "NS/POD|IP")]
        to: sarena_core::api::PolicyParty,
        /// The receiver's port, with its protocol (TCP, UDP, SCTP; default TCP).
        #[arg(long, value_name = "PORT[/PROTOCOL]")]
        port: crate::policy::PortArg,
    },
}

/// `sarena monitor …`.
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct MonitorArgs {
    /// Only this pod's events: NAMESPACE/NAME, a name, or a container id.
    #[arg(long, value_name = "POD")]
    pub pod: Option<String>,
    /// Only events of pods of this namespace.
    #[arg(long, value_name = "NAMESPACE")]
    pub namespace: Option<String>,
    /// Only these drop reasons or flow paths (repeatable).
    #[arg(long, value_name = "REASON")]
    pub reason: Vec<String>,
    /// Only drops.
    #[arg(long)]
    pub drops: bool,
    /// Only flows.
    #[arg(long)]
    pub flows: bool,
    /// First the events the daemon kept of this last while (`90s`, `5m`,
    /// `1h`; a bare number is seconds).
    #[arg(long, value_name = "DURATION", value_parser = crate::monitor::parse_duration)]
    pub since: Option<Duration>,
    /// End after the kept events (with --since) instead of streaming.
    #[arg(long)]
    pub no_follow: bool,
    /// `monitor config`: what the daemon sends.
    #[command(subcommand)]
    pub config: Option<MonitorCommand>,
}

/// `sarena monitor config …`.
#[derive(Debug, Clone, PartialEq, Eq, Subcommand)]
pub enum MonitorCommand {
    /// Shows the settings, or changes those given.
    Config {
        /// Drop events on or off (node-wide).
        #[arg(long, value_name = "on|off", value_parser = crate::monitor::parse_on_off)]
        drops: Option<bool>,
        /// Flow events: off, new (each new connection) or sample (one frame
        /// in --sample); node-wide, or for --pod only.
        #[arg(long, value_name = "MODE", value_parser = crate::monitor::parse_flow_mode)]
        flows: Option<sarena_core::api::FlowMode>,
        /// Sampled flow events: one forwarded frame in this many.
        #[arg(long, value_name = "N")]
        sample: Option<u32>,
        /// The pod --flows applies to (NAMESPACE/NAME, a name or a container
        /// id); `--flows off` gives it the node's mode again.
        #[arg(long, value_name = "POD", requires = "flows")]
        pod: Option<String>,
    },
}

/// `sarena ipam …`.
#[derive(Debug, Clone, Subcommand)]
pub enum IpamCommand {
    /// Pools with their usage, then every allocation and its lease.
    List,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("sarena").chain(args.iter().copied()))
    }

    #[test]
    fn commands_and_global_options() {
        let cli = parse(&["status"]).unwrap();
        assert_eq!(cli.output, OutputFormat::Table);
        assert_eq!(cli.timeout, Seconds(5));
        let cli = parse(&[
            "endpoint", "get", "abc", "--ifname", "net1", "-o", "json", "--socket", "/s",
        ])
        .unwrap();
        assert_eq!(cli.output, OutputFormat::Json);
        assert_eq!(cli.socket, PathBuf::from("/s"));
        match cli.command {
            Command::Endpoint(EndpointCommand::Get {
                container_id,
                ifname,
            }) => {
                assert_eq!((container_id.as_str(), ifname.as_str()), ("abc", "net1"));
            }
            other => panic!("{other:?}"),
        }
        match parse(&["endpoint", "get", "abc"]).unwrap().command {
            Command::Endpoint(EndpointCommand::Get { ifname, .. }) => assert_eq!(ifname, "eth0"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            parse(&["ipam", "list"]).unwrap().command,
            Command::Ipam(IpamCommand::List)
        ));
        assert!(parse(&["-o", "yaml", "status"]).is_err());
        assert!(parse(&["endpoint"]).is_err());
        assert!(matches!(
            parse(&["health"]).unwrap().command,
            Command::Health
        ));
    }

    #[test]
    fn install_cni_defaults_and_conflicts() {
        let Command::InstallCni(args) = parse(&["install-cni"]).unwrap().command else {
            panic!("not install-cni");
        };
        assert_eq!(
            args,
            InstallCniArgs {
                cni_bin_dir: "/opt/cni/bin".into(),
                cni_conf_dir: "/etc/cni/net.d".into(),
                conflist_name: "10-sarena.conflist".into(),
                plugin: None,
                conflist: None,
                plugin_only: false,
                exclusive: false,
                uninstall: false,
            }
        );
        let Command::InstallCni(args) = parse(&[
            "install-cni",
            "--cni-bin-dir=/b",
            "--cni-conf-dir=/c",
            "--plugin-only",
            "--exclusive",
        ])
        .unwrap()
        .command
        else {
            panic!("not install-cni");
        };
        assert_eq!(
            (args.cni_bin_dir, args.cni_conf_dir),
            ("/b".into(), "/c".into())
        );
        assert!(args.plugin_only && args.exclusive);
        assert!(parse(&["install-cni", "--plugin-only", "--conflist", "/x"]).is_err());
        assert!(parse(&["install-cni", "--uninstall", "--exclusive"]).is_err());
        assert!(parse(&["install-cni", "--uninstall", "--cni-conf-dir", "/c"]).is_ok());
    }
}
