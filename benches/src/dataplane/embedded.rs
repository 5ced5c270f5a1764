//! Sarena embedded in this process, as a Rust runtime embeds it
//! (`examples/embed_inprocess.rs`): IPAM and the endpoint registry
//! ([`Registry`]), the eBPF dataplane ([`AyaDataplane`]) and the two
//! composed ([`WithDataplane`]), driven by the plugin's own ADD and DEL
//! sequences ([`Plugin`]). No `sarena-cni` and no `sarena-daemon` process:
//! a standalone daemon has no policy source, an embedder can hand the
//! engine's output to the dataplane itself ([`EmbeddedNode::apply_policy`]).
//!
//! Everything is private to the run: a throwaway node netns (the host
//! veths live there, the host netns is not touched), two pod netns, a state
//! dir and a pin dir. Netlink calls run on one worker thread inside the node
//! netns with its own tokio runtime; map reads and writes need no netns and
//! run on the caller's thread. Dropping the node deletes the pods (the
//! plugin's DEL), stops the worker, removes the pins, then the namespaces.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::thread::JoinHandle;
use std::time::Duration;

use sarena_common::peers::NodeCounters;
use sarena_core::api::{Attachment, EventsSettings, PodRef};
use sarena_core::cluster::rtnl::RtnetlinkPeers;
use sarena_core::cluster::{
    ClusterView, KubernetesConfig, PeerRouting as _, PeerSync, RoutingMode, cluster_networks,
};
use sarena_core::cni::Version;
use sarena_core::dataplane::ebpf::{AyaDataplane, EventStats, PolicyApplied, events_config};
use sarena_core::dataplane::{KernelDataplane, NodeUpdate, NodeUpdates as _};
use sarena_core::links::RtnetlinkLinks;
use sarena_core::node::{NodeConfig, Registry, WithDataplane};
use sarena_core::plugin::{AddRequest, DelRequest, Plugin};
use sarena_core::policy::CompiledPolicy;

use super::netns;
use super::netpol::NAMESPACE;
use crate::BenchError;
use crate::node::{Netns, unique_name};

/// A job of the worker thread (it runs inside the node netns).
type Job = Box<dyn FnOnce(&tokio::runtime::Runtime) + Send>;

/// One pod of the embedded node.
#[derive(Debug)]
pub struct EmbeddedPod {
    /// Its netns (removed on drop, after the DEL).
    pub netns: Netns,
    /// Its Kubernetes name (namespace [`NAMESPACE`]).
    pub name: String,
    /// The attachment its ADD used.
    pub attachment: Attachment,
    /// Its IPv4 address (from the ADD result).
    pub ip: Option<IpAddr>,
}

/// Sarena in this process on a throwaway node netns, with its pods.
pub struct EmbeddedNode {
    label: String,
    plugin: Option<Arc<Plugin>>,
    dataplane: Option<Arc<AyaDataplane>>,
    pods: Vec<EmbeddedPod>,
    jobs: Option<mpsc::Sender<Job>>,
    worker: Option<JoinHandle<Result<(), BenchError>>>,
    pin_dir: PathBuf,
    _state_dir: tempfile::TempDir,
    node_ns: Netns,
}

impl std::fmt::Debug for EmbeddedNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddedNode")
            .field("label", &self.label)
            .field("pods", &self.pods)
            .field("pin_dir", &self.pin_dir)
            .field("node_ns", &self.node_ns)
            .finish_non_exhaustive()
    }
}

/// The eBPF object sarena-daemon's build embeds (`SARENA_EBPF_OBJECT`).
fn ebpf_object() -> Result<Vec<u8>, BenchError> {
    let path = std::env::var_os("SARENA_EBPF_OBJECT").ok_or(BenchError::MissingBinary {
        what: "the eBPF object",
        path: PathBuf::from("$SARENA_EBPF_OBJECT"),
        hint: "export SARENA_EBPF_OBJECT=$(ls -t target/release/build/sarena-daemon-*/out/sarena-ebpf | head -1)",
    })?;
    std::fs::read(&path).map_err(|e| BenchError::io("read eBPF object", path, e))
}

impl EmbeddedNode {
    /// A node with pool `10.<subnet>.0.0/24`, the eBPF dataplane loaded and
    /// pinned under a fresh pin dir, and no pods yet.
    pub fn start(label: &str, subnet: u8) -> Result<EmbeddedNode, BenchError> {
        EmbeddedNode::start_with(label, subnet, None)
    }

    /// [`EmbeddedNode::start`] with the pods' MTU set (`None`: the default).
    pub fn start_with(
        label: &str,
        subnet: u8,
        mtu: Option<u32>,
    ) -> Result<EmbeddedNode, BenchError> {
        let object = ebpf_object()?;
        let node_ns = Netns::create(&unique_name("dp-emb-node"))?;
        let state_dir = tempfile::Builder::new()
            .prefix("sarena-bench-embedded-")
            .tempdir()
            .map_err(|e| BenchError::io("create state dir", std::env::temp_dir(), e))?;
        let pin_dir = Path::new("/sys/fs/bpf").join(unique_name("dp-emb"));
        let (tx, rx) = mpsc::channel::<Job>();
        let worker = netns::spawn_in(node_ns.path(), move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| BenchError::io("tokio runtime in", "the node netns", e))?;
            for job in rx {
                job(&rt);
            }
            Ok(())
        })?;
        let mut node = EmbeddedNode {
            label: label.to_string(),
            plugin: None,
            dataplane: None,
            pods: Vec::new(),
            jobs: Some(tx),
            worker: Some(worker),
            pin_dir: pin_dir.clone(),
            _state_dir: state_dir,
            node_ns,
        };
        let mtu = mtu.map_or(String::new(), |m| format!("mtu = {m}\n"));
        let config = format!(
            "{mtu}dataplane = \"ebpf\"\n[[ipam.pools]]\nname = \"embedded\"\ncidrs = [\"10.{subnet}.0.0/24\"]\n"
        );
        let state = node._state_dir.path().to_owned();
        let (plugin, dataplane) = node.on_worker(move |rt| {
            rt.block_on(async move {
                let config = NodeConfig::from_toml_str(&config)
                    .map_err(|e| BenchError::embedded("node config", config.clone(), e))?;
                let registry = Registry::open(&state, config).map_err(|e| {
                    BenchError::embedded("Registry::open", state.display().to_string(), e)
                })?;
                // As the daemon composes it: the kernel dataplane (host
                // routes to the pods, masquerading) for what the programs
                // leave to the host stack.
                let host_stack = KernelDataplane::new()
                    .map_err(|e| BenchError::embedded("KernelDataplane::new", "node netns", e))?
                    .without_antispoof()
                    .without_policy();
                let dataplane = AyaDataplane::open(&object, &pin_dir).map_err(|e| {
                    BenchError::embedded("AyaDataplane::open", pin_dir.display().to_string(), e)
                })?;
                let dataplane = Arc::new(dataplane.with_host_stack(Arc::new(host_stack)));
                let daemon = Arc::new(WithDataplane::new(Arc::new(registry), dataplane.clone()));
                let links = RtnetlinkLinks::new()
                    .map_err(|e| BenchError::embedded("RtnetlinkLinks::new", "node netns", e))?;
                Ok((Arc::new(Plugin::new(daemon, Arc::new(links))), dataplane))
            })
        })??;
        node.plugin = Some(plugin);
        node.dataplane = Some(dataplane);
        Ok(node)
    }

    /// What a call on a node whose start failed half-way gets.
    fn not_started(&self) -> BenchError {
        BenchError::Input {
            what: format!("{}: the node did not start", self.label),
        }
    }

    /// The node's dataplane (an error if it did not start).
    fn dataplane(&self) -> Result<&Arc<AyaDataplane>, BenchError> {
        self.dataplane.as_ref().ok_or_else(|| self.not_started())
    }

    /// Runs `f` on the worker thread (inside the node netns) and waits.
    fn on_worker<T: Send + 'static>(
        &self,
        f: impl FnOnce(&tokio::runtime::Runtime) -> T + Send + 'static,
    ) -> Result<T, BenchError> {
        let gone = || BenchError::ThreadPanicked {
            what: "embedded node worker",
        };
        let (tx, rx) = mpsc::channel();
        let jobs = self.jobs.as_ref().ok_or_else(gone)?;
        jobs.send(Box::new(move |rt| {
            let _ = tx.send(f(rt));
        }))
        .map_err(|_| gone())?;
        rx.recv().map_err(|_| gone())
    }

    /// ADDs a pod `NAMESPACE/name` (a fresh netns) through the plugin's
    /// sequence, with its pod ref set as `K8S_POD_NAMESPACE` /
    /// `K8S_POD_NAME` would; returns its index.
    pub fn add_pod(&mut self, name: &str) -> Result<usize, BenchError> {
        let plugin = self.plugin.clone().ok_or_else(|| self.not_started())?;
        let netns = Netns::create(&unique_name(&format!("dp-emb-{name}")))?;
        let attachment = Attachment {
            container_id: format!("{}-ctr", netns.name()),
            ifname: "eth0".into(),
        };
        let request = AddRequest {
            attachment: attachment.clone(),
            netns: netns.path().to_owned(),
            pod: PodRef {
                namespace: Some(NAMESPACE.into()),
                name: Some(name.into()),
                uid: None,
            },
            requested_ips: vec![],
            requested_mac: None,
            version: Version::V1_1_0,
            bandwidth: None,
            chain_check: None,
        };
        // Recorded before the ADD: a half-done ADD is deleted on drop too.
        self.pods.push(EmbeddedPod {
            netns,
            name: name.into(),
            attachment,
            ip: None,
        });
        let context = format!("{} pod {name}", self.label);
        let result = self.on_worker(move |rt| {
            rt.block_on(async move { plugin.add(&request).await })
                .map_err(|e| BenchError::embedded("ADD", context, e))
        })??;
        let index = self.pods.len() - 1;
        self.pods[index].ip = result
            .ips
            .iter()
            .map(|c| c.address.addr())
            .find(IpAddr::is_ipv4);
        Ok(index)
    }

    /// The pods, in the order they were added.
    pub fn pods(&self) -> &[EmbeddedPod] {
        &self.pods
    }

    /// The node's pin dir (its counters map and programs).
    pub fn pin_dir(&self) -> &Path {
        &self.pin_dir
    }

    /// The node's netns.
    pub fn node_netns(&self) -> &Netns {
        &self.node_ns
    }

    /// The node's pod CIDR (its pool).
    pub fn pod_cidr(subnet: u8) -> ipnet::IpNet {
        ipnet::IpNet::from(ipnet::Ipv4Net::new_assert(
            std::net::Ipv4Addr::new(10, subnet, 0, 0),
            24,
        ))
    }

    /// Makes the node a member of `view` as Kubernetes mode does once the
    /// API server has told it: the peer routes or the VXLAN overlay of
    /// `routing` (the daemon's own [`PeerSync`] over rtnetlink, in the
    /// node netns), then the cluster's networks handed to the dataplane,
    /// which hooks the node's devices and routes to the peers' pods itself.
    pub fn join_cluster(&self, view: ClusterView, routing: RoutingMode) -> Result<(), BenchError> {
        let dataplane = self.dataplane()?.clone();
        let context = self.label.clone();
        self.on_worker(move |rt| {
            rt.block_on(async move {
                let peers = Arc::new(
                    RtnetlinkPeers::new()
                        .map_err(|e| BenchError::embedded("RtnetlinkPeers::new", &context, e))?,
                );
                let config = KubernetesConfig {
                    routing,
                    ..KubernetesConfig::default()
                };
                let sync = PeerSync::new(config, None, peers.clone(), peers);
                let report = sync
                    .sync(&view)
                    .await
                    .map_err(|e| BenchError::embedded("PeerSync::sync", &context, e))?;
                if !report.failed.is_empty() || report.deferred {
                    return Err(BenchError::Verify {
                        what: format!("{context}: peer routing: {report:?}"),
                    });
                }
                let networks = cluster_networks(&view, &[]);
                dataplane
                    .apply(&NodeUpdate::ClusterNetworks(networks))
                    .await
                    .map_err(|e| BenchError::embedded("NodeUpdates::apply", &context, e))?;
                Ok(())
            })
        })?
    }

    /// Turns eBPF host routing off on a node that joined a cluster: no
    /// peer pod CIDRs in the programs' map, so `from_container` leaves
    /// packets for the peers' pods to the host stack and `from_network`
    /// delivers none (the node as it was before issue 27; the peer routes,
    /// the overlay and the device hooks stay).
    pub fn host_stack_routing(&self) -> Result<(), BenchError> {
        let dataplane = self.dataplane()?;
        dataplane
            .set_peer_pods(&[])
            .map_err(|e| BenchError::embedded("set_peer_pods", self.label.clone(), e))?;
        Ok(())
    }

    /// What eBPF host routing did on this node so far.
    pub fn node_counters(&self) -> Result<NodeCounters, BenchError> {
        let dataplane = self.dataplane()?;
        dataplane
            .node_counters()
            .map_err(|e| BenchError::embedded("node_counters", self.label.clone(), e))
    }

    /// Switches drop and flow events as `settings` say (node-wide; no
    /// watched pods), as the daemon's `POST /v1/events/config` does.
    pub fn set_events(&self, settings: &EventsSettings) -> Result<(), BenchError> {
        self.dataplane()?
            .set_events_config(events_config(settings, false))
            .map_err(|e| BenchError::embedded("set_events_config", self.label.clone(), e))
    }

    /// The programs' event counts so far.
    pub fn event_stats(&self) -> Result<EventStats, BenchError> {
        self.dataplane()?
            .event_stats()
            .map_err(|e| BenchError::embedded("event_stats", self.label.clone(), e))
    }

    /// Drains the events' ring buffer on a thread of its own until the
    /// returned [`EventDrain`] finishes, as the daemon's reader task does
    /// (an undrained ring fills, and a full ring costs the programs less
    /// than a written event). Once per node: the ring has one reader.
    pub fn drain_events(&self) -> Result<EventDrain, BenchError> {
        let dataplane = self.dataplane()?.clone();
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let label = self.label.clone();
        let thread = std::thread::Builder::new()
            .name("bench-events".into())
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| BenchError::io("tokio runtime for", "the event reader", e))?;
                rt.block_on(async move {
                    let mut reader = dataplane
                        .take_event_reader()
                        .map_err(|e| BenchError::embedded("take_event_reader", label.clone(), e))?
                        .ok_or_else(|| BenchError::Input {
                            what: format!("{label}: the event reader was taken already"),
                        })?;
                    let (mut batch, mut read) = (Vec::new(), 0u64);
                    while !stopping.load(Ordering::Relaxed) {
                        batch.clear();
                        reader
                            .read_for(&mut batch, 4096, Duration::from_millis(50))
                            .await
                            .map_err(|e| BenchError::io("read", "the events ring buffer", e))?;
                        read += batch.len() as u64;
                    }
                    Ok(read)
                })
            })
            .map_err(|e| BenchError::io("spawn thread for", "the event reader", e))?;
        Ok(EventDrain {
            stop,
            thread: Some(thread),
        })
    }

    /// Hands the engine's output to the dataplane, as the daemon does.
    pub fn apply_policy(&self, compiled: Arc<CompiledPolicy>) -> Result<PolicyApplied, BenchError> {
        let dataplane = self.dataplane()?;
        Ok(dataplane.apply_policy(compiled))
    }
}

/// The thread draining a node's events ([`EmbeddedNode::drain_events`]).
/// Dropped unfinished, it stops the thread without waiting.
#[derive(Debug)]
pub struct EventDrain {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<u64, BenchError>>>,
}

impl EventDrain {
    /// Stops the thread; the events it read.
    pub fn finish(mut self) -> Result<u64, BenchError> {
        self.stop.store(true, Ordering::Relaxed);
        let thread = self.thread.take().ok_or(BenchError::ThreadPanicked {
            what: "event reader",
        })?;
        netns::join(thread, "event reader")
    }
}

impl Drop for EventDrain {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

impl Drop for EmbeddedNode {
    fn drop(&mut self) {
        if let Some(plugin) = self.plugin.take() {
            for pod in self.pods.iter().rev() {
                let request = DelRequest {
                    attachment: pod.attachment.clone(),
                    netns: Some(pod.netns.path().to_owned()),
                };
                let plugin = plugin.clone();
                let context = format!("{} pod {}", self.label, pod.name);
                let deleted = self
                    .on_worker(move |rt| {
                        rt.block_on(async move { plugin.del(&request).await })
                            .map_err(|e| BenchError::embedded("DEL", context, e))
                    })
                    .and_then(|r| r);
                match deleted {
                    Ok(()) => {}
                    Err(e) => eprintln!(
                        "sarena-bench: warning: {}: DEL of {}: {}",
                        self.label,
                        pod.name,
                        sarena_core::error_chain(&e)
                    ),
                }
            }
        }
        self.dataplane = None;
        // The worker ends when its queue closes.
        self.jobs = None;
        if let Some(worker) = self.worker.take()
            && let Err(e) = netns::join(worker, "embedded node worker")
        {
            eprintln!(
                "sarena-bench: warning: {}: worker: {}",
                self.label,
                sarena_core::error_chain(&e)
            );
        }
        if let Err(e) = AyaDataplane::purge(&self.pin_dir) {
            eprintln!(
                "sarena-bench: warning: {}: removing pins: {}",
                self.label,
                sarena_core::error_chain(&e)
            );
        }
        // Then the fields: pod netns, state dir, node netns.
    }
}
