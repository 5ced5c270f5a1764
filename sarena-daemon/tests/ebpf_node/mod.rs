//! The eBPF node fixture the privileged daemon tests share: `sarena-daemon`
//! in `ebpf` mode on a unique site, state and pin dir, pods in throwaway
//! netns added by the real `sarena-cni` plugin, and the node state removed
//! on drop.
#![allow(dead_code)] // each test binary uses its own part of it

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::Command;

use sarena_core::dataplane::ebpf::AyaDataplane;
use sarena_test_support::daemon::{Running, Site, raw_tcp};
use sarena_test_support::{
    PinDir, TestNetns, output_with_stdin, ping_summary, require, require_root, succeeds,
    workspace_binary,
};

/// A pool no other test or the demo uses.
pub const POOL: &str = "10.246.0.0/16";
pub const GATEWAY: &str = "10.246.0.1";
const GATEWAY_DEVICE: &str = "sarena_host";

fn config() -> String {
    format!(
        "dataplane = \"ebpf\"\nmasquerade = false\n\
         [[ipam.pools]]\nname = \"restart\"\ncidrs = [\"{POOL}\"]\ngateways = [\"{GATEWAY}\"]\n"
    )
}

/// One scrape of the daemon's metrics at `addr`, parsed.
pub async fn scrape(addr: SocketAddr) -> prometheus_parse::Scrape {
    let answer = raw_tcp(addr, "GET /metrics HTTP/1.1").await;
    assert_eq!(answer.status, 200, "{answer:?}");
    prometheus_parse::Scrape::parse(answer.body.lines().map(|l| Ok(l.to_owned()))).unwrap()
}

/// Every value of `metric` whose labels include `labels`.
pub fn values(
    scrape: &prometheus_parse::Scrape,
    metric: &str,
    labels: &[(&str, &str)],
) -> Vec<f64> {
    scrape
        .samples
        .iter()
        .filter(|s| s.metric == metric && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .map(|s| match s.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => v,
            ref other => panic!("{metric}: {other:?}"),
        })
        .collect()
}

/// The tests share the node-global gateway device: one at a time.
pub static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Fails the test unless it can run: root and a daemon built with the eBPF
/// object.
pub fn preconditions(test: &str) {
    require_root(test);
    require(
        test,
        sarena_daemon::ebpf_object::ebpf_object().is_some(),
        "the daemon was built without the eBPF object (run scripts/setup-ebpf.sh)",
    );
}

/// One pod: its netns (the container id is the netns name) and address.
pub struct Pod {
    pub netns: TestNetns,
    pub ip: Ipv4Addr,
}

impl Pod {
    pub fn id(&self) -> &str {
        &self.netns.name
    }

    /// `ping` from this pod; (transmitted, received).
    pub fn ping(&self, to: &str, count: u32, interval: &str) -> (u32, u32) {
        let out = Command::new("ip")
            .args(["netns", "exec", self.id(), "ping", "-n", "-q", "-W", "1"])
            .args(["-i", interval, "-c", &count.to_string(), to])
            .output()
            .unwrap();
        ping_summary(&out)
    }

    pub fn pings(&self, to: &Pod, count: u32) -> bool {
        let (sent, received) = self.ping(&to.ip.to_string(), count, "0.2");
        sent == count && received == count
    }
}

/// One daemon in ebpf mode on unique state, socket and pins, and the node
/// state it creates; everything is removed on drop.
pub struct Node {
    pub site: Site,
    config: PathBuf,
    pub pin_dir: PinDir,
    had_gateway_device: bool,
    pub daemon: Option<Running>,
    extra: Vec<String>,
}

impl Node {
    /// A node whose daemon runs with the fixture's arguments.
    pub async fn start() -> Node {
        Node::start_with(&[]).await
    }

    /// A node whose daemon also gets `extra` arguments.
    pub async fn start_with(extra: &[&str]) -> Node {
        let had_gateway_device = succeeds(&["ip", "link", "show", GATEWAY_DEVICE]);
        let site = Site::new();
        let config = site.config(&config());
        let pin_dir = PinDir::new();
        let mut node = Node {
            site,
            config,
            pin_dir,
            had_gateway_device,
            daemon: None,
            extra: extra.iter().map(|a| a.to_string()).collect(),
        };
        node.daemon = Some(node.spawn().await);
        node
    }

    /// Starts the daemon on this node's site and pins.
    pub async fn spawn(&self) -> Running {
        self.spawn_with_env(&[]).await
    }

    /// [`Node::spawn`] with `env` added to the daemon's environment.
    pub async fn spawn_with_env(&self, env: &[(&str, &str)]) -> Running {
        let mut args = vec![
            "--config",
            self.config.to_str().unwrap(),
            "--bpf-pin-dir",
            self.pin_dir.0.to_str().unwrap(),
            "--log-level",
            "info",
        ];
        args.extend(self.extra.iter().map(String::as_str));
        self.site.start_with_env(&args, env).await
    }

    /// The pins as the daemon left them (maps re-opened, nothing attached).
    pub fn pins(&self) -> AyaDataplane {
        let object = sarena_daemon::ebpf_object::ebpf_object().unwrap();
        AyaDataplane::open(object, &self.pin_dir.0).unwrap()
    }

    /// Runs the plugin exactly as a runtime does; (success, stdout, stderr).
    pub fn cni(&self, command: &str, netns: &TestNetns) -> (bool, String, String) {
        self.cni_with(command, &netns.name, &netns.path(), &[], &[])
    }

    /// [`Node::cni`] for the container `id` with `CNI_NETNS` = `netns`,
    /// `extra` (key, value) added to the network config, and the plugin run
    /// as the last argument of `wrapper` when it is not empty.
    pub fn cni_with(
        &self,
        command: &str,
        id: &str,
        netns: &std::path::Path,
        extra: &[(&str, serde_json::Value)],
        wrapper: &[&str],
    ) -> (bool, String, String) {
        let dir = self.site.dir.path();
        let mut conf = serde_json::json!({
            "cniVersion": "1.1.0",
            "name": "sarena",
            "type": "sarena-cni",
            "daemon-endpoint": self.site.socket(),
            "log-file": dir.join("sarena-cni.log"),
            "delete-queue-dir": dir.join("delete-queue"),
        });
        for (key, value) in extra {
            conf[*key] = value.clone();
        }
        let plugin = workspace_binary("sarena-cni");
        let mut cmd = match wrapper.split_first() {
            Some((program, args)) => {
                let mut c = Command::new(program);
                c.args(args).arg(&plugin);
                c
            }
            None => Command::new(&plugin),
        };
        let out = output_with_stdin(
            cmd.env_clear()
                .env("PATH", std::env::var("PATH").unwrap_or_default())
                .env("CNI_COMMAND", command)
                .env("CNI_CONTAINERID", id)
                .env("CNI_NETNS", netns)
                .env("CNI_IFNAME", "eth0")
                .env("CNI_PATH", plugin.parent().unwrap())
                .env(
                    "CNI_ARGS",
                    format!("K8S_POD_NAMESPACE=default;K8S_POD_NAME={id}"),
                ),
            conf.to_string().as_bytes(),
        );
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// A new netns networked by `sarena-cni ADD`.
    pub fn add_pod(&self) -> Pod {
        let netns = TestNetns::new();
        let (ok, out, err) = self.cni("ADD", &netns);
        assert!(ok, "ADD failed: {out} {err}");
        let result: serde_json::Value = serde_json::from_str(&out).unwrap();
        let address = result["ips"][0]["address"].as_str().unwrap();
        let ip: Ipv4Addr = address.split('/').next().unwrap().parse().unwrap();
        assert!(
            POOL.parse::<ipnet::Ipv4Net>().unwrap().contains(&ip),
            "{ip} not from {POOL}"
        );
        Pod { netns, ip }
    }

    pub fn del_pod(&self, pod: &Pod) {
        let (ok, out, err) = self.cni("DEL", &pod.netns);
        assert!(ok, "DEL failed: {out} {err}");
    }

    pub fn daemon(&mut self) -> Running {
        self.daemon.take().unwrap()
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.site.log()).unwrap_or_default()
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        // The pins go with `pin_dir`, after the daemon is gone.
        drop(self.daemon.take());
        if self.had_gateway_device {
            succeeds(&[
                "ip",
                "addr",
                "del",
                &format!("{GATEWAY}/32"),
                "dev",
                GATEWAY_DEVICE,
            ]);
        } else {
            succeeds(&["ip", "link", "del", GATEWAY_DEVICE]);
        }
        if std::thread::panicking() {
            eprintln!("--- daemon log ---\n{}", self.log());
        }
    }
}
