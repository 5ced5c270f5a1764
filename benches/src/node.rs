//! A throwaway "node" per contender: its own network namespace standing in for a
//! node's host netns, so contenders never see each other or the real host. In it one
//! contender: Sarena (a real `sarena-daemon` started inside the node netns, eBPF or
//! kernel dataplane) or a reference plugin (`ptp` / `bridge` with `host-local`).
//! Plugins are executed as a runtime does (see [`exec`]): a fresh process each time,
//! entering the node netns before exec. Everything is removed on drop.

mod bins;
mod contender;
mod error;
pub mod exec;
pub mod http;
pub mod netns;
mod state;

use std::fs::{File, OpenOptions};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

pub use bins::Bins;
pub use contender::Contender;
pub use error::BenchError;
pub use exec::PluginRun;
pub use netns::{Netns, Pod, run_cmd, run_id, unique_name};
pub use state::{IpamUsage, count_host_local, parse_vm_rss};

struct Daemon {
    child: Child,
    socket: PathBuf,
    pin_dir: PathBuf,
}

/// A throwaway node: netns, work dir, and the contender's plugin (and daemon).
pub struct Node {
    contender: Contender,
    index: u8,
    daemon: Option<Daemon>,
    netns_file: File,
    netns: Netns,
    plugin: PathBuf,
    cni_path: String,
    config: serde_json::Value,
    subnet: String,
    gateway: Ipv4Addr,
    stderr_log: File,
    work: tempfile::TempDir,
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node")
            .field("contender", &self.contender)
            .field("netns", &self.netns.name())
            .field("subnet", &self.subnet)
            .field("daemon_pid", &self.daemon_pid())
            .finish()
    }
}

impl Node {
    /// Starts a node for `contender`; `index` picks its pod subnet 10.(150+index).0.0/16.
    pub fn start(contender: Contender, index: u8, bins: &Bins) -> Result<Node, BenchError> {
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
        let name = format!("sb{}-{}", run_id(), contender.slug());
        let dir = work.path().to_path_buf();
        let (plugin, cni_path, config) = if contender.is_sarena() {
            let socket = dir.join("sarena.sock");
            let cni_dir = bins.sarena_cni.parent().unwrap_or(Path::new("/"));
            let config = json!({
                "cniVersion": "1.1.0", "name": name, "type": "sarena-cni",
                "daemon-endpoint": socket, "log-file": dir.join("sarena-cni.log"),
                "delete-queue-dir": dir.join("state/delete-queue"),
            });
            (
                bins.sarena_cni.clone(),
                cni_dir.display().to_string(),
                config,
            )
        } else {
            let ipam = json!({
                "type": "host-local", "dataDir": dir.join("host-local"),
                "ranges": [[{"subnet": subnet, "gateway": gateway.to_string()}]],
                "routes": [{"dst": "0.0.0.0/0"}],
            });
            let config = if contender == Contender::PtpHostLocal {
                json!({"cniVersion": "1.0.0", "name": name, "type": "ptp",
                       "ipMasq": false, "mtu": 1500, "ipam": ipam})
            } else {
                json!({"cniVersion": "1.0.0", "name": name, "type": "bridge",
                       "bridge": format!("sbbr{index}"), "isGateway": true,
                       "ipMasq": false, "mtu": 1500, "ipam": ipam})
            };
            let ty = if contender == Contender::PtpHostLocal {
                "ptp"
            } else {
                "bridge"
            };
            (
                bins.cni_dir.join(ty),
                bins.cni_dir.display().to_string(),
                config,
            )
        };
        let mut node = Node {
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
            stderr_log,
            work,
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
        let toml = format!(
            "mtu = 1500\ndataplane = \"{dataplane}\"\nmasquerade = false\n\n[[ipam.pools]]\n\
             name = \"bench\"\ncidrs = [\"{}\"]\ngateways = [\"{}\"]\n",
            self.subnet, self.gateway
        );
        let cfg = dir.join("sarena.toml");
        std::fs::write(&cfg, toml).map_err(|e| BenchError::io("write", &cfg, e))?;
        let state = dir.join("state");
        std::fs::create_dir_all(state.join("delete-queue"))
            .map_err(|e| BenchError::io("mkdir", &state, e))?;
        let socket = dir.join("sarena.sock");
        let pin_dir = PathBuf::from(format!(
            "/sys/fs/bpf/sarena-bench-{}-{}",
            run_id(),
            self.index
        ));
        let log_path = dir.join("daemon.log");
        let log = File::create(&log_path).map_err(|e| BenchError::io("create", &log_path, e))?;
        let log2 = log
            .try_clone()
            .map_err(|e| BenchError::io("dup", &log_path, e))?;
        let mut cmd = Command::new(&bins.sarena_daemon);
        cmd.arg("--socket")
            .arg(&socket)
            .arg("--state-dir")
            .arg(&state)
            .arg("--config")
            .arg(&cfg)
            .arg("--bpf-pin-dir")
            .arg(&pin_dir)
            .arg("--log-level")
            .arg("warn")
            .stdin(Stdio::null())
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(log2));
        self.enter_netns_on_exec(&mut cmd)?;
        let child = cmd
            .spawn()
            .map_err(|e| BenchError::io("spawn", &bins.sarena_daemon, e))?;
        self.daemon = Some(Daemon {
            child,
            socket: socket.clone(),
            pin_dir,
        });
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if socket.exists() && http::get(&socket, "/v1/daemon/health").is_ok() {
                return Ok(());
            }
            let exited = match self.daemon.as_mut() {
                Some(d) => d.child.try_wait().ok().flatten().map(|s| s.to_string()),
                None => None,
            };
            let reason = match exited {
                Some(status) => Some(format!("exited ({status})")),
                None if Instant::now() > deadline => {
                    Some("no answer on its socket within 20 s".into())
                }
                None => None,
            };
            if let Some(reason) = reason {
                return Err(BenchError::DaemonStart {
                    node: self.netns.name().to_string(),
                    reason,
                    log_tail: tail(&log_path, 20),
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Makes `cmd` enter this node's netns between fork and exec.
    fn enter_netns_on_exec(&self, cmd: &mut Command) -> Result<(), BenchError> {
        let netns = self
            .netns_file
            .try_clone()
            .map_err(|source| BenchError::io("dup", self.netns.path(), source))?;
        netns::enter_on_exec(cmd, netns);
        Ok(())
    }

    /// The contender on this node.
    pub fn contender(&self) -> Contender {
        self.contender
    }

    /// The node's netns (the stand-in for the host netns).
    pub fn netns(&self) -> &Netns {
        &self.netns
    }

    /// The pod subnet, "10.X.0.0/16".
    pub fn subnet(&self) -> &str {
        &self.subnet
    }

    /// The pods' gateway address.
    pub fn gateway(&self) -> Ipv4Addr {
        self.gateway
    }

    /// The node's private work dir (logs, state).
    pub fn work_dir(&self) -> &Path {
        self.work.path()
    }

    /// The daemon's pid (Sarena only).
    pub fn daemon_pid(&self) -> Option<u32> {
        self.daemon.as_ref().map(|d| d.child.id())
    }

    /// The daemon's API socket (Sarena only).
    pub fn daemon_socket(&self) -> Option<&Path> {
        self.daemon.as_ref().map(|d| d.socket.as_path())
    }

    /// The daemon's bpffs pin dir (Sarena only).
    pub fn pin_dir(&self) -> Option<&Path> {
        self.daemon.as_ref().map(|d| d.pin_dir.as_path())
    }

    /// The daemon's resident memory (VmRSS), KiB.
    pub fn daemon_rss_kib(&self) -> Result<Option<u64>, BenchError> {
        let Some(pid) = self.daemon_pid() else {
            return Ok(None);
        };
        let path = format!("/proc/{pid}/status");
        let status =
            std::fs::read_to_string(&path).map_err(|e| BenchError::io("read", &path, e))?;
        Ok(parse_vm_rss(&status))
    }

    /// CNI ADD of `pod` (ifname eth0); remembers the result as the pod's prevResult.
    pub fn add(&self, pod: &Pod) -> Result<PluginRun, BenchError> {
        let run = self.run("ADD", Some(pod), None, false)?;
        if run.ok() {
            pod.set_prev_result(run.json.clone());
        }
        Ok(run)
    }

    /// CNI DEL of `pod` (with its prevResult, as runtimes send it).
    pub fn del(&self, pod: &Pod) -> Result<PluginRun, BenchError> {
        let prev = pod.prev_result();
        let run = self.run("DEL", Some(pod), prev, false)?;
        if run.ok() {
            pod.set_prev_result(None);
        }
        Ok(run)
    }

    /// CNI CHECK of `pod` (with its prevResult).
    pub fn check(&self, pod: &Pod) -> Result<PluginRun, BenchError> {
        let prev = pod.prev_result();
        self.run("CHECK", Some(pod), prev, false)
    }

    /// CNI STATUS (no container).
    pub fn status(&self) -> Result<PluginRun, BenchError> {
        self.run("STATUS", None, None, false)
    }

    /// `command` ("ADD", "CHECK", "STATUS", "DEL") of `pod` run through GNU time to
    /// measure the plugin's peak RSS (`max_rss_kib`); not for latency. ADD/DEL update
    /// the pod's prevResult like [`Node::add`] / [`Node::del`].
    pub fn run_measuring_rss(&self, command: &str, pod: &Pod) -> Result<PluginRun, BenchError> {
        let prev = if matches!(command, "CHECK" | "DEL") {
            pod.prev_result()
        } else {
            None
        };
        let target = (command != "STATUS").then_some(pod);
        let run = self.run(command, target, prev, true)?;
        if run.ok() {
            match command {
                "ADD" => pod.set_prev_result(run.json.clone()),
                "DEL" => pod.set_prev_result(None),
                _ => {}
            }
        }
        Ok(run)
    }

    fn stdin_for(&self, prev: Option<serde_json::Value>) -> Result<Vec<u8>, BenchError> {
        let mut config = self.config.clone();
        if let (Some(prev), Some(obj)) = (prev, config.as_object_mut()) {
            obj.insert("prevResult".into(), prev);
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
            stdin: &self.stdin_for(prev)?,
            rss_file: rss_file.as_deref(),
        };
        exec::run_plugin(&inv, &self.netns_file, &self.stderr_log)
    }

    /// Like [`Node::add`] but a failed ADD is an error naming the CNI error.
    pub fn add_ok(&self, pod: &Pod) -> Result<PluginRun, BenchError> {
        let run = self.add(pod)?;
        if !run.ok() || run.ip.is_none() {
            return Err(self.plugin_error("ADD", pod, &run));
        }
        Ok(run)
    }

    /// Like [`Node::del`] but a failed DEL is an error.
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

    /// Runs `argv` inside the node netns; its stdout, or an error with its stderr.
    pub fn exec_in(&self, argv: &[&str]) -> Result<String, BenchError> {
        let (program, args) = argv.split_first().ok_or_else(|| BenchError::Input {
            what: "exec_in with an empty argv".into(),
        })?;
        let mut cmd = Command::new(program);
        cmd.args(args);
        self.enter_netns_on_exec(&mut cmd)?;
        let out = cmd
            .output()
            .map_err(|e| BenchError::io("spawn in node netns", *program, e))?;
        if !out.status.success() {
            return Err(BenchError::Command {
                command: argv.join(" "),
                status: out.status.to_string(),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            });
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// GET `path` (e.g. "/v1/endpoints") from the node's daemon (Sarena only).
    pub fn api_get(&self, path: &str) -> Result<serde_json::Value, BenchError> {
        let socket = self.daemon_socket().ok_or_else(|| BenchError::Input {
            what: format!("{} has no daemon API", self.contender.label()),
        })?;
        let body = http::get(socket, path)?;
        serde_json::from_str(&body).map_err(|source| BenchError::Json {
            what: format!("GET {path}"),
            source,
        })
    }

    /// What the node's IPAM holds right now.
    pub fn ipam_usage(&self) -> Result<IpamUsage, BenchError> {
        if self.contender.is_sarena() {
            let eps = self.api_get("/v1/endpoints")?;
            let ipam = self.api_get("/v1/ipam")?;
            let endpoints = eps.as_array().map(Vec::len);
            let addresses = ipam
                .get("allocations")
                .and_then(|a| a.as_array())
                .map(Vec::len)
                .ok_or_else(|| BenchError::Verify {
                    what: format!("GET /v1/ipam has no allocations array: {ipam}"),
                })?;
            return Ok(IpamUsage {
                endpoints,
                addresses,
            });
        }
        let dir = self.work.path().join("host-local");
        Ok(IpamUsage {
            endpoints: None,
            addresses: count_host_local(&dir)?,
        })
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if let Some(mut d) = self.daemon.take() {
            stop_child(&mut d.child, Duration::from_secs(5));
            if d.pin_dir.exists()
                && let Err(e) = std::fs::remove_dir_all(&d.pin_dir)
            {
                netns::warn(&format!("removing {}: {e}", d.pin_dir.display()));
            }
        }
    }
}

/// SIGTERM, then SIGKILL after `grace`; always reaps.
fn stop_child(child: &mut Child, grace: Duration) {
    if let Ok(pid) = libc::pid_t::try_from(child.id()) {
        // SAFETY: signalling our own unreaped child.
        unsafe {
            libc::kill(pid, libc::SIGTERM);
        }
    }
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// The last `n` lines of a file (for error messages).
fn tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}
