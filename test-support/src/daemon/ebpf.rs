//! A real `sarena-daemon` in `ebpf` mode on a private site, pin directory and
//! pool, with the plugin configured for it: the node a whole-stack test runs.
//!
//! The kernel host stack uses the node-global gateway device `sarena_host`:
//! on drop, the device is removed if it did not exist before, otherwise only
//! this node's gateway address. Tests that use this run one at a time.

use std::path::PathBuf;

use sarena_core::api::HttpDaemon;

use super::{Running, Site};
use crate::bpffs::PinDir;
use crate::command::succeeds;
use crate::plugin::Cni;

/// The node-global device the kernel host stack keeps the gateways on.
pub const GATEWAY_DEVICE: &str = "sarena_host";

/// One eBPF-mode daemon and its plugin; everything is removed on drop.
#[derive(Debug)]
pub struct EbpfNode {
    /// Socket, state, config and log.
    pub site: Site,
    /// The daemon's `--bpf-pin-dir`.
    pub pin_dir: PinDir,
    /// The plugin, configured for this daemon.
    pub cni: Cni,
    config: PathBuf,
    gateway: String,
    had_gateway_device: bool,
    daemon: Option<Running>,
}

impl EbpfNode {
    /// Starts a daemon serving `pool` (a CIDR) through `gateway`, with
    /// `extra` appended to its config (e.g. `lease_seconds = 2`).
    pub async fn start(pool: &str, gateway: &str, extra: &str) -> EbpfNode {
        let had_gateway_device = succeeds(&["ip", "link", "show", GATEWAY_DEVICE]);
        let site = Site::new();
        let config = site.config(&format!(
            "dataplane = \"ebpf\"\nmasquerade = false\n{extra}\n\
             [[ipam.pools]]\nname = \"test\"\ncidrs = [\"{pool}\"]\ngateways = [\"{gateway}\"]\n"
        ));
        let cni = Cni::new(&site.socket(), site.dir.path());
        let mut node = EbpfNode {
            site,
            pin_dir: PinDir::new(),
            cni,
            config,
            gateway: gateway.to_string(),
            had_gateway_device,
            daemon: None,
        };
        node.daemon = Some(node.spawn().await);
        node
    }

    /// Starts the daemon (again) on the same state, socket and pins, with the
    /// plugin's deletion queue (replayed at start-up); waits until it answers.
    pub async fn spawn(&self) -> Running {
        self.site
            .start(&[
                "--config",
                self.config.to_str().unwrap(),
                "--bpf-pin-dir",
                self.pin_dir.0.to_str().unwrap(),
                "--delete-queue",
                self.cni.queue_dir().to_str().unwrap(),
                "--log-level",
                "info",
            ])
            .await
    }

    /// The pins as the daemon left them: the maps re-opened (nothing is
    /// attached by this).
    pub fn pins(&self, object: &[u8]) -> sarena_core::dataplane::ebpf::AyaDataplane {
        sarena_core::dataplane::ebpf::AyaDataplane::open(object, &self.pin_dir.0).unwrap()
    }

    /// Starts the daemon if it is not running.
    pub async fn ensure_running(&mut self) {
        if self.daemon.is_none() {
            self.daemon = Some(self.spawn().await);
        }
    }

    /// SIGKILLs the daemon (if running) and waits until it is gone.
    pub fn kill(&mut self) {
        if let Some(daemon) = self.daemon.take() {
            daemon.kill();
        }
    }

    /// Whether the daemon is running (as far as this fixture knows).
    pub fn is_running(&self) -> bool {
        self.daemon.is_some()
    }

    /// A client of the daemon's socket.
    pub fn client(&self) -> HttpDaemon {
        self.site.client()
    }

    /// The daemon's `--config`.
    pub fn config_path(&self) -> &std::path::Path {
        &self.config
    }

    /// Whether the gateway device is this node's (it did not exist before):
    /// only then may a test remove it.
    pub fn owns_gateway_device(&self) -> bool {
        !self.had_gateway_device
    }

    /// The daemon's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.site.log()).unwrap_or_default()
    }
}

impl Drop for EbpfNode {
    fn drop(&mut self) {
        // The pins go with `pin_dir`, after the daemon is gone.
        drop(self.daemon.take());
        if self.had_gateway_device {
            let address = format!("{}/32", self.gateway);
            succeeds(&["ip", "addr", "del", &address, "dev", GATEWAY_DEVICE]);
        } else {
            succeeds(&["ip", "link", "del", GATEWAY_DEVICE]);
        }
        if std::thread::panicking() {
            eprintln!("--- daemon log ---\n{}", self.log());
        }
    }
}
