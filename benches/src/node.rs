//! A throwaway node per contender ([`NodeNetns`]): its own network namespace
//! standing in for a node's host netns, so contenders never see each other or the
//! real host. In it one contender: Sarena (a real `sarena-daemon` started inside
//! the node netns, eBPF or kernel dataplane) or a reference plugin (`ptp` /
//! `bridge` with `host-local`). Plugins are executed as a runtime does (see
//! [`exec`]): a fresh process each time, entering the node netns before exec.
//! Everything is removed on drop.

mod bins;
mod contender;
mod daemon;
pub mod exec;
pub mod netns;
mod state;

use std::fs::{File, OpenOptions};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use sarena_core::api::Inspect as _;
use serde_json::json;

use crate::BenchError;

pub use bins::Bins;
pub use contender::Contender;
pub use exec::PluginRun;
pub use netns::{Netns, Pod, run_cmd, run_id, unique_name};
pub use state::{IpamUsage, count_host_local};

use daemon::{DaemonProcess, DaemonSpec};

/// A throwaway node: its netns, work dir, and the contender's plugin (and daemon).
pub struct NodeNetns {
    contender: Contender,
    index: u8,
    daemon: Option<DaemonProcess>,
    netns_file: File,
    netns: Netns,
    plugin: PathBuf,
    cni_path: String,
    config: serde_json::Value,
    subnet: String,
    gateway: Ipv4Addr,
    /// The IPv6 half of a dual-stack pool (Sarena only).
    subnet6: Option<String>,
    stderr_log: File,
    work: tempfile::TempDir,
    /// Where `sarena-cni` appends its phases (`SARENA_CNI_PHASES`), when set.
    phases_file: Option<PathBuf>,
}

impl std::fmt::Debug for NodeNetns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeNetns")
            .field("contender", &self.contender)
            .field("netns", &self.netns.name())
            .field("subnet", &self.subnet)
            .field("daemon_pid", &self.daemon.as_ref().map(DaemonProcess::pid))
            .finish()
    }
}

/// The plugin binary, `CNI_PATH` and network config of `contender` on a node
/// named `name` with work dir `dir`.
fn plugin_setup(
    contender: Contender,
    index: u8,
    bins: &Bins,
    dir: &Path,
    subnet: &str,
    gateway: Ipv4Addr,
) -> (PathBuf, String, serde_json::Value) {
    let name = format!("sb{}-{}", run_id(), contender.slug());
    if contender.is_sarena() {
        let cni_dir = bins.sarena_cni.parent().unwrap_or(Path::new("/"));
        let config = json!({
            "cniVersion": "1.1.0", "name": name, "type": "sarena-cni",
            "daemon-endpoint": dir.join("sarena.sock"), "log-file": dir.join("sarena-cni.log"),
            "delete-queue-dir": dir.join("state/delete-queue"),
        });
        return (
            bins.sarena_cni.clone(),
            cni_dir.display().to_string(),
            config,
        );
    }
    let ipam = json!({
        "type": "host-local", "dataDir": dir.join("host-local"),
        "ranges": [[{"subnet": subnet, "gateway": gateway.to_string()}]],
        "routes": [{"dst": "0.0.0.0/0"}],
    });
    let (ty, config) = if contender == Contender::PtpHostLocal {
        let config = json!({"cniVersion": "1.0.0", "name": name, "type": "ptp",
                            "ipMasq": false, "mtu": 1500, "ipam": ipam});
        ("ptp", config)
    } else {
        let config = json!({"cniVersion": "1.0.0", "name": name, "type": "bridge",
                            "bridge": format!("sbbr{index}"), "isGateway": true,
                            "ipMasq": false, "mtu": 1500, "ipam": ipam});
        ("bridge", config)
    };
    (
        bins.cni_dir.join(ty),
        bins.cni_dir.display().to_string(),
        config,
    )
}

impl NodeNetns {
    /// Starts a node for `contender`; `index` picks its pod subnet 10.(150+index).0.0/16.
    pub fn start(contender: Contender, index: u8, bins: &Bins) -> Result<NodeNetns, BenchError> {
        NodeNetns::start_with(contender, index, bins, false)
    }

    /// [`NodeNetns::start`] with a dual-stack pool: `fd00:(150+index)::/64`
    /// beside the IPv4 subnet (Sarena contenders only).
    pub fn start_dual_stack(
        contender: Contender,
        index: u8,
        bins: &Bins,
    ) -> Result<NodeNetns, BenchError> {
        if !contender.is_sarena() {
            return Err(BenchError::Input {
                what: format!("{}: dual-stack nodes are Sarena's only", contender.label()),
            });
        }
        NodeNetns::start_with(contender, index, bins, true)
    }

    fn start_with(
        contender: Contender,
        index: u8,
        bins: &Bins,
        dual_stack: bool,
    ) -> Result<NodeNetns, BenchError> {
        if index >= 100 {
            return Err(BenchError::Input {
                what: format!("node index {index} (must be < 100)"),
            });
        }
        let work = tempfile::Builder::new()
            .prefix(&format!("sarena-bench-{}-{}-", run_id(), contender.slug()))
            .tempdir()
            .map_err(|e| BenchError::io("mkdtemp", "/tmp", e))?;
        let netns = Netns::create(&unique_name(&format!("node-{}", contender.slug())))?;
        let netns_file = netns.open()?;
        let stderr_path = work.path().join("plugin-stderr.log");
        let stderr_log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&stderr_path)
            .map_err(|e| BenchError::io("create", &stderr_path, e))?;
        let subnet = format!("10.{}.0.0/16", 150 + index);
        let gateway = Ipv4Addr::new(10, 150 + index, 0, 1);
        let subnet6 = dual_stack.then(|| format!("fd00:{}::/64", 150 + u16::from(index)));
        let (plugin, cni_path, config) =
            plugin_setup(contender, index, bins, work.path(), &subnet, gateway);
        let mut node = NodeNetns {
            contender,
            index,
            daemon: None,
            netns_file,
            netns,
            plugin,
            cni_path,
            config,
            subnet,
            gateway,
            subnet6,
            stderr_log,
            work,
            phases_file: None,
        };
        if contender.is_sarena() {
            node.start_daemon(bins)?;
        }
        Ok(node)
    }

    fn start_daemon(&mut self, bins: &Bins) -> Result<(), BenchError> {
        let dir = self.work.path().to_path_buf();
        let dataplane = if self.contender == Contender::SarenaEbpf {
            "ebpf"
        } else {
            "kernel"
        };
        let v6 = self
            .subnet6
            .as_ref()
            .map_or(String::new(), |s| format!(", \"{s}\""));
        let toml = format!(
            "mtu = 1500\ndataplane = \"{dataplane}\"\nmasquerade = false\n\n[[ipam.pools]]\n\
             name = \"bench\"\ncidrs = [\"{}\"{v6}]\ngateways = [\"{}\"]\n",
            self.subnet, self.gateway
        );
        let config = dir.join("sarena.toml");
        std::fs::write(&config, toml).map_err(|e| BenchError::io("write", &config, e))?;
        let state_dir = dir.join("state");
        std::fs::create_dir_all(state_dir.join("delete-queue"))
            .map_err(|e| BenchError::io("mkdir", &state_dir, e))?;
        let spec = DaemonSpec {
            binary: &bins.sarena_daemon,
            config: &config,
            state_dir: &state_dir,
            socket: dir.join("sarena.sock"),
            pin_dir: PathBuf::from(format!(
                "/sys/fs/bpf/sarena-bench-{}-{}",
                run_id(),
                self.index
            )),
            log: &dir.join("daemon.log"),
        };
        self.daemon = Some(DaemonProcess::start(
            spec,
            self.dup_netns()?,
            self.netns.name(),
        )?);
        Ok(())
    }

    /// A new handle on the node netns (each spawn that enters it consumes one).
    fn dup_netns(&self) -> Result<File, BenchError> {
        self.netns_file
            .try_clone()
            .map_err(|source| BenchError::io("dup", self.netns.path(), source))
    }

    /// DELs `pod`, warning on stderr when that fails (for teardown paths,
    /// which go on regardless).
    pub fn del_or_warn(&self, pod: &Pod) {
        match self.del(pod) {
            Ok(run) if run.ok() => {}
            Ok(run) => eprintln!(
                "sarena-bench: warning: DEL of {} on {}: {}",
                pod.container_id(),
                self.contender.label(),
                run.error_text()
            ),
            Err(e) => eprintln!(
                "sarena-bench: warning: DEL of {}: {}",
                pod.container_id(),
                sarena_core::error_chain(&e)
            ),
        }
    }

    /// The contender on this node.
    pub fn contender(&self) -> Contender {
        self.contender
    }

    /// The node netns (`/run/netns/...`).
    pub fn netns_path(&self) -> &Path {
        self.netns.path()
    }

    /// The node's pod subnet (CIDR).
    pub fn subnet(&self) -> &str {
        &self.subnet
    }

    /// The node's private work dir (logs, state).
    pub fn work_dir(&self) -> &Path {
        self.work.path()
    }

    /// The daemon's bpffs pin dir (Sarena only).
    pub fn pin_dir(&self) -> Option<&Path> {
        self.daemon.as_ref().map(DaemonProcess::pin_dir)
    }

    /// The daemon's resident memory (VmRSS), KiB.
    pub fn daemon_rss_kib(&self) -> Result<Option<u64>, BenchError> {
        let Some(pid) = self.daemon.as_ref().map(DaemonProcess::pid) else {
            return Ok(None);
        };
        let status = process(pid)
            .and_then(|p| p.status())
            .map_err(|source| BenchError::Proc {
                what: "status of sarena-daemon",
                source,
            })?;
        Ok(status.vmrss)
    }

    /// The daemon's CPU time so far (user and system, every thread; from
    /// `/proc/PID/stat`), `None` for a node without a daemon or when it
    /// cannot be read.
    pub fn daemon_cpu(&self) -> Option<Duration> {
        let pid = self.daemon.as_ref().map(DaemonProcess::pid)?;
        let stat = process(pid).and_then(|p| p.stat()).ok()?;
        let ticks = stat.utime + stat.stime;
        Some(Duration::from_secs_f64(
            ticks as f64 / crate::dataplane::cpu::ticks_per_second(),
        ))
    }

    /// CNI ADD of `pod` (ifname eth0); remembers the result as the pod's prevResult.
    pub fn add(&self, pod: &Pod) -> Result<PluginRun, BenchError> {
        self.op("ADD", Some(pod), false)
    }

    /// CNI DEL of `pod` (with its prevResult, as runtimes send it).
    pub fn del(&self, pod: &Pod) -> Result<PluginRun, BenchError> {
        self.op("DEL", Some(pod), false)
    }

    /// CNI CHECK of `pod` (with its prevResult).
    pub fn check(&self, pod: &Pod) -> Result<PluginRun, BenchError> {
        self.op("CHECK", Some(pod), false)
    }

    /// Like [`NodeNetns::check`] but a failed CHECK is an error.
    pub fn check_ok(&self, pod: &Pod) -> Result<PluginRun, BenchError> {
        let run = self.check(pod)?;
        if !run.ok() {
            return Err(self.plugin_error("CHECK", pod, &run));
        }
        Ok(run)
    }

    /// CNI STATUS (no container).
    pub fn status(&self) -> Result<PluginRun, BenchError> {
        self.op("STATUS", None, false)
    }

    /// CNI VERSION (no container).
    pub fn version(&self) -> Result<PluginRun, BenchError> {
        self.op("VERSION", None, false)
    }

    /// Has the plugin append its phases to `file` from now on (`None`:
    /// no more); only `sarena-cni` writes them.
    pub fn record_phases(&mut self, file: Option<PathBuf>) {
        self.phases_file = file;
    }

    /// Runs `binary` instead of the plugin, exactly as the plugin is run
    /// (same harness, netns, environment and stdin as a STATUS): the
    /// baseline of a process start.
    pub fn exec_other(&self, binary: &Path) -> Result<PluginRun, BenchError> {
        let inv = exec::Invocation {
            plugin: binary,
            cni_path: &self.cni_path,
            command: "STATUS",
            container_id: "",
            netns: "",
            ifname: "",
            args: "",
            stdin: &self.stdin_for(None, None)?,
            rss_file: None,
            phases_file: None,
        };
        exec::run_plugin(&inv, &self.netns_file, &self.stderr_log)
    }

    /// `command` ("ADD", "CHECK", "STATUS", "DEL") of `pod` run through GNU time to
    /// measure the plugin's peak RSS (`max_rss_kib`); not for latency. ADD/DEL update
    /// the pod's prevResult like [`NodeNetns::add`] / [`NodeNetns::del`].
    pub fn run_measuring_rss(&self, command: &str, pod: &Pod) -> Result<PluginRun, BenchError> {
        self.op(command, (command != "STATUS").then_some(pod), true)
    }

    /// [`NodeNetns::add`] with `sarena-cni` appending its phases to `file`
    /// (concurrent runs: a file each, so every line is matched to its run).
    pub fn add_recording(&self, pod: &Pod, file: &Path) -> Result<PluginRun, BenchError> {
        self.op_with("ADD", Some(pod), false, Some(file))
    }

    /// One CNI operation: CHECK and DEL carry the pod's prevResult, a successful
    /// ADD sets it and a successful DEL clears it.
    fn op(
        &self,
        command: &str,
        pod: Option<&Pod>,
        measure_rss: bool,
    ) -> Result<PluginRun, BenchError> {
        self.op_with(command, pod, measure_rss, self.phases_file.as_deref())
    }

    /// [`NodeNetns::op`] with the phases going to `phases` (`None`: not recorded).
    fn op_with(
        &self,
        command: &str,
        pod: Option<&Pod>,
        measure_rss: bool,
        phases: Option<&Path>,
    ) -> Result<PluginRun, BenchError> {
        let prev = match (command, pod) {
            ("CHECK" | "DEL", Some(p)) => p.prev_result(),
            _ => None,
        };
        let run = self.run(command, pod, prev, measure_rss, phases)?;
        if let (true, Some(pod)) = (run.ok(), pod) {
            match command {
                "ADD" => pod.set_prev_result(run.json.clone()),
                "DEL" => pod.set_prev_result(None),
                _ => {}
            }
        }
        Ok(run)
    }

    fn stdin_for(
        &self,
        pod: Option<&Pod>,
        prev: Option<serde_json::Value>,
    ) -> Result<Vec<u8>, BenchError> {
        let mut config = self.config.clone();
        if let Some(obj) = config.as_object_mut() {
            if let Some(prev) = prev {
                obj.insert("prevResult".into(), prev);
            }
            if let Some(rc) = pod.and_then(Pod::runtime_config) {
                obj.insert("runtimeConfig".into(), rc.clone());
            }
        }
        serde_json::to_vec(&config).map_err(|source| BenchError::Json {
            what: "network config".into(),
            source,
        })
    }

    fn run(
        &self,
        command: &str,
        pod: Option<&Pod>,
        prev: Option<serde_json::Value>,
        measure_rss: bool,
        phases: Option<&Path>,
    ) -> Result<PluginRun, BenchError> {
        let netns = pod.map_or(String::new(), |p| p.netns_path().display().to_string());
        let args = pod.map_or(String::new(), |p| {
            format!(
                "IgnoreUnknown=1;K8S_POD_NAMESPACE=bench;K8S_POD_NAME={}",
                p.netns_name()
            )
        });
        let rss_file = measure_rss.then(|| {
            self.work
                .path()
                .join(format!("rss-{}.txt", unique_name(command)))
        });
        let inv = exec::Invocation {
            plugin: &self.plugin,
            cni_path: &self.cni_path,
            command,
            container_id: pod.map_or("", |p| p.container_id()),
            netns: &netns,
            ifname: if pod.is_some() { "eth0" } else { "" },
            args: &args,
            stdin: &self.stdin_for(pod, prev)?,
            rss_file: rss_file.as_deref(),
            phases_file: phases,
        };
        exec::run_plugin(&inv, &self.netns_file, &self.stderr_log)
    }

    /// Like [`NodeNetns::add`] but a failed ADD is an error naming the CNI error.
    pub fn add_ok(&self, pod: &Pod) -> Result<PluginRun, BenchError> {
        let run = self.add(pod)?;
        if !run.ok() || run.ip.is_none() {
            return Err(self.plugin_error("ADD", pod, &run));
        }
        Ok(run)
    }

    /// Like [`NodeNetns::del`] but a failed DEL is an error.
    pub fn del_ok(&self, pod: &Pod) -> Result<PluginRun, BenchError> {
        let run = self.del(pod)?;
        if !run.ok() {
            return Err(self.plugin_error("DEL", pod, &run));
        }
        Ok(run)
    }

    /// The error for a failed `command` of `pod`.
    pub fn plugin_error(&self, command: &str, pod: &Pod, run: &PluginRun) -> BenchError {
        BenchError::Plugin {
            node: self.contender.label().to_string(),
            command: command.to_string(),
            container_id: pod.container_id().to_string(),
            detail: run.error_text(),
        }
    }

    /// What the node's IPAM holds right now.
    pub fn ipam_usage(&self) -> Result<IpamUsage, BenchError> {
        if let Some(d) = &self.daemon {
            let endpoints = d.call("GET endpoints", |api| api.endpoints())?.len();
            let ipam = d.call("GET ipam", |api| api.ipam_state())?;
            return Ok(IpamUsage {
                endpoints: Some(endpoints),
                addresses: ipam.allocations.len(),
            });
        }
        let dir = self.work.path().join("host-local");
        Ok(IpamUsage {
            endpoints: None,
            addresses: count_host_local(&dir)?,
        })
    }
}

/// The /proc entry of process `pid` (a child's id).
pub fn process(pid: u32) -> procfs::ProcResult<procfs::process::Process> {
    let pid = i32::try_from(pid).map_err(|_| procfs::ProcError::NotFound(None))?;
    procfs::process::Process::new(pid)
}

/// The last `n` lines of a file (for error messages).
fn tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}
