//! The eBPF dataplane: Sarena's TC programs on each pod's host-side veth,
//! loaded and managed with aya.
//!
//! [`AyaDataplane::open`] loads the object (built by sarena-daemon's build
//! script and embedded in the daemon; sarena-core itself needs no eBPF
//! toolchain) with its maps pinned under the pin directory: maps pinned by an
//! earlier run are re-opened, not recreated, so the endpoint table and the
//! counters survive a daemon restart. The programs are attached to each host
//! veth as `cls_bpf` filters on its `clsact` qdisc (see [`tc`] for why not
//! tcx); they belong to the device, so they stay attached while the daemon is
//! down and pod traffic is never interrupted. [`Dataplane::reconcile`] brings
//! filters and maps in line with the registry at start-up, touching only what
//! is missing or runs other code than this daemon's programs.
//!
//! # What the host must provide
//!
//! The programs forward pod → pod traffic of both families on this node and
//! answer the pods' ARP requests and neighbour solicitations. Everything else (pod → host, pod → outside, and the way back)
//! goes through the host stack, which therefore still needs, per pod, a route
//! to the pod address via its host veth, and masquerading for the pools. In the
//! daemon, pass the kernel dataplane to [`AyaDataplane::with_host_stack`] so
//! those are set up alongside the programs.
//!
//! ```no_run
//! # async fn demo(object: &[u8], endpoint: sarena_core::api::Endpoint)
//! # -> Result<(), sarena_core::dataplane::DataplaneError> {
//! use sarena_core::dataplane::Dataplane;
//! use sarena_core::dataplane::ebpf::{AyaDataplane, DEFAULT_PIN_DIR};
//!
//! let dataplane = AyaDataplane::open(object, DEFAULT_PIN_DIR.as_ref())?;
//! dataplane.attach(&endpoint).await?;
//! # Ok(()) }
//! ```

mod attach;
mod bandwidth;
mod entries;
mod error;
mod events;
mod fault;
mod flow_keeper;
mod flows;
mod handover;
mod inspect;
mod load;
mod maps;
mod network_hook;
mod peer_maps;
pub mod pins;
mod pod_side;
mod policy;
mod policy_maps;
pub mod qdisc;
mod reconcile;
mod shaping;
pub mod tc;
pub mod teardown;
mod upgrade;

use std::collections::{BTreeMap, BTreeSet};
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use aya::Ebpf;
pub use bandwidth::{BASE_HORIZON_NS, MAX_BURST_NS, MAX_HORIZON_NS, as_enforced};
pub use error::BpfError;
pub use events::{EventReader, events_config, flow_mode_code};
pub use fault::KILL_AT_ENV;
pub use peer_maps::PeerPodsChange;
pub use pins::{Direction, PinnedAttachment};
pub use policy::PolicyApplied;
pub use policy_maps::PolicyMaps;
pub use sarena_common::events::{Event, EventStats, EventsConfig};
pub use sarena_common::peers::NodeCounters;
pub use sarena_common::{
    BandwidthState, DropReason, Endpoint6Key, EndpointCounters, EndpointInfo, EndpointKey, Pacer,
};
pub use tc::TcAttachment;
use tokio::sync::OnceCell;

use super::{
    Dataplane, DataplaneError, DataplaneMode, EndpointReports, NodeNetwork, NodeUpdates,
    ReconcileReport,
};
use crate::api::{BandwidthStatus, Endpoint, HostRoutingStatus, ProgramsStatus};
use crate::host_ledger::HostLedger;
use crate::netlink;
use bandwidth::PacingMap;
pub use bandwidth::ShapingMode;
use maps::Maps;

/// Where the daemon pins maps and links.
pub const DEFAULT_PIN_DIR: &str = "/sys/fs/bpf/sarena";

/// The dataplane's host netlink handle, and the turn on it: requests on
/// it do not overlap another holder's (see [`AyaDataplane::host_netlink`]).
struct HostNetlink<'a> {
    _turn: tokio::sync::MutexGuard<'a, ()>,
    handle: &'a rtnetlink::Handle,
}

impl std::ops::Deref for HostNetlink<'_> {
    type Target = rtnetlink::Handle;

    fn deref(&self) -> &rtnetlink::Handle {
        self.handle
    }
}

/// The eBPF dataplane. See the [module docs](self).
pub struct AyaDataplane {
    pin_dir: PathBuf,
    /// The object, kept to load a `pod_egress` instance per egress-limited pod.
    object: Vec<u8>,
    state: Mutex<State>,
    /// Puts each endpoint's flows tables in and takes them out, off the
    /// lock (`flow_keeper.rs`).
    tables: Arc<flow_keeper::TableKeeper>,
    host_stack: Option<Arc<dyn Dataplane>>,
    /// The host stack's update path (the cluster's networks for masquerading).
    host_updates: Option<Arc<dyn NodeUpdates>>,
    /// The dataplane's netlink connection in the host netns (filter dumps,
    /// root qdiscs): opened by the first call that needs it, then reused for
    /// the dataplane's lifetime (see [`AyaDataplane::host_netlink`]).
    netlink: OnceCell<rtnetlink::Handle>,
    /// One user of that connection at a time: a netlink socket carries one
    /// dump at a time, and a second dump started meanwhile fails with
    /// EBUSY (concurrent ADDs each dump their veth's qdiscs and filters).
    netlink_turn: tokio::sync::Mutex<()>,
    /// Where a daemon under test kills itself during an upgrade (holds
    /// nothing, and every kill point is empty, without the
    /// `fault-injection` feature; see `fault.rs`).
    kill_at: fault::KillAt,
    /// Where host changes are recorded before they are made (forwarding,
    /// a `clsact` added on a node device); none: unrecorded.
    ledger: Option<HostLedger>,
}

/// What the loaded object is made of, behind the dataplane's lock.
struct State {
    /// Owns the loaded programs (their filters belong to the devices).
    ebpf: Ebpf,
    /// The tags of the loaded programs, by name.
    tags: BTreeMap<&'static str, u64>,
    /// The ids of the maps the loaded programs use (the pinned ones): a
    /// program using one of them belongs to this dataplane.
    map_ids: BTreeSet<u32>,
    /// The endpoint and counter maps.
    maps: Maps,
    /// The pacing map (bandwidth limits).
    pacing: PacingMap,
    /// How limits are enforced on this kernel; known once the first limited
    /// endpoint was attached (see `shaping.rs`).
    shaping: Option<ShapingMode>,
    /// An older generation's pins being taken over (see `upgrade.rs`).
    upgrade: upgrade::Upgrade,
    /// NetworkPolicy: what the maps hold and the engine's last state.
    policy: policy::PolicyLoader,
    /// eBPF host routing: the other nodes' pod CIDRs, its counters.
    peers: peer_maps::PeerMaps,
    /// Drop and flow events: the ring buffer (until a reader takes it),
    /// the configuration, the counts, the watched endpoints.
    events: events::EventMaps,
}

impl State {
    /// The tag of the loaded program `name`.
    fn tag(&self, name: &str) -> Option<u64> {
        self.tags.get(name).copied()
    }
}

impl std::fmt::Debug for AyaDataplane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AyaDataplane")
            .field("pin_dir", &self.pin_dir)
            .field("host_stack", &self.host_stack.as_ref().map(|d| d.mode()))
            .finish_non_exhaustive()
    }
}

impl AyaDataplane {
    /// Also drives `host_stack` (the kernel dataplane: forwarding, host routes
    /// to the pods, masquerading) for the traffic that goes through the host
    /// stack; each trait call runs it first.
    pub fn with_host_stack<H: Dataplane + NodeUpdates + 'static>(
        mut self,
        host_stack: Arc<H>,
    ) -> Self {
        self.host_updates = Some(host_stack.clone());
        self.host_stack = Some(host_stack);
        self
    }

    /// Records the host changes this dataplane makes that an uninstall
    /// cannot tell afterwards (`ip_forward` overwritten, a `clsact` added on
    /// a node device) in `ledger`, each before it is made. Give the host
    /// stack the same ledger ([`super::KernelDataplane::with_ledger`]).
    pub fn with_ledger(mut self, ledger: HostLedger) -> Self {
        self.ledger = Some(ledger);
        self
    }

    /// The host stack's update path, if it has one.
    pub(crate) fn host_stack_updates(&self) -> Option<&Arc<dyn NodeUpdates>> {
        self.host_updates.as_ref()
    }

    /// The pin directory.
    pub fn pin_dir(&self) -> &Path {
        &self.pin_dir
    }

    /// How this dataplane enforces bandwidth limits on this kernel; `None`
    /// until it has attached an endpoint with limits.
    pub fn shaping_mode(&self) -> Option<ShapingMode> {
        self.lock().shaping
    }

    /// The pacers of the endpoint whose host veth is `host_ifindex` (its
    /// bandwidth limits as the programs see them); `None` when it has none.
    pub fn pacers(&self, host_ifindex: u32) -> Result<Option<BandwidthState>, DataplaneError> {
        Ok(self.lock().pacing.get(host_ifindex)?)
    }

    /// The host-side egress policer of the endpoint whose host veth is
    /// `host_ifindex` (its `egress` pacer); `None` when it has none.
    pub fn host_policer(
        &self,
        host_ifindex: u32,
    ) -> Result<Option<BandwidthState>, DataplaneError> {
        Ok(self.lock().pacing.policer(host_ifindex)?)
    }

    /// Every key of the pacing map, sorted: the host ifindexes of limited
    /// endpoints, and `sarena_common::policer_key` of those limited in
    /// egress.
    pub fn bandwidth_keys(&self) -> Vec<u32> {
        self.lock().pacing.keys()
    }

    /// The counters of the endpoint whose host veth is `host_ifindex`, summed
    /// over CPUs; `None` when it is not attached.
    pub fn counters(&self, host_ifindex: u32) -> Result<Option<EndpointCounters>, DataplaneError> {
        Ok(self.lock().maps.counters(host_ifindex)?)
    }

    /// Every entry of the IPv4 endpoint map, sorted by address.
    pub fn endpoint_entries(&self) -> Result<Vec<(Ipv4Addr, EndpointInfo)>, DataplaneError> {
        let entries = self.lock().maps.entries()?;
        Ok(entries
            .into_iter()
            .map(|(k, v)| (Ipv4Addr::from(k.addr), v))
            .collect())
    }

    /// Every entry of the IPv6 endpoint map, sorted by address.
    pub fn ipv6_endpoint_entries(&self) -> Result<Vec<(Ipv6Addr, EndpointInfo)>, DataplaneError> {
        let entries = self.lock().maps.entries6()?;
        Ok(entries
            .into_iter()
            .map(|(k, v)| (Ipv6Addr::from(k.addr), v))
            .collect())
    }

    /// The veths map's entry of `host_ifindex` (what the neighbour-discovery
    /// responder answers with), if the endpoint is attached.
    pub fn veth_entry(&self, host_ifindex: u32) -> Option<EndpointInfo> {
        self.lock().maps.veth(host_ifindex)
    }

    /// Sarena's filters on the device `ifindex`, as the kernel reports them
    /// (at most one per hook). Must run inside a tokio runtime.
    pub async fn attachments(&self, ifindex: u32) -> Result<Vec<TcAttachment>, DataplaneError> {
        let host = self.host_netlink().await?;
        tc::query(&host, ifindex).await
    }

    /// Every tcx link pinned by an earlier version of Sarena (which attached
    /// with tcx), sorted; [`Dataplane::reconcile`] replaces them with filters.
    pub fn pinned_links(&self) -> Result<Vec<PinnedAttachment>, DataplaneError> {
        pins::list_links(&self.pin_dir).map_err(|source| DataplaneError::Io {
            call: "list pins",
            path: pins::links_dir(&self.pin_dir),
            source,
        })
    }

    /// Removes every pin under `pin_dir` and the directory itself: every link
    /// is detached and the maps go away once no program uses them. For
    /// uninstalling Sarena from a node and for tests.
    pub fn purge(pin_dir: &Path) -> Result<(), DataplaneError> {
        match std::fs::remove_dir_all(pin_dir) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(DataplaneError::Io {
                call: "remove pins",
                path: pin_dir.to_owned(),
                source,
            }),
        }
    }

    /// The netlink handle every host-side request of this dataplane goes
    /// through (filter dumps, root qdiscs): one rtnetlink connection, opened
    /// in the caller's (host) netns by the first call that needs it, its
    /// connection task spawned on that call's runtime, and kept for the
    /// dataplane's lifetime. Made on the calling thread: no worker ever
    /// changes netns for it (pod netns get sockets of their own, see
    /// `pod_side.rs`).
    ///
    /// The caller holds it (and with it the connection's turn) until it
    /// drops the returned [`HostNetlink`]: one dump at a time.
    async fn host_netlink(&self) -> Result<HostNetlink<'_>, DataplaneError> {
        let turn = self.netlink_turn.lock().await;
        let handle = self
            .netlink
            .get_or_try_init(|| async {
                netlink::host_handle().map_err(|source| DataplaneError::Socket { source })
            })
            .await?;
        Ok(HostNetlink {
            _turn: turn,
            handle,
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves the maps consistent enough:
        // every operation is idempotent and reconcile repairs the rest.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[async_trait]
impl Dataplane for AyaDataplane {
    fn mode(&self) -> DataplaneMode {
        DataplaneMode::Ebpf
    }

    /// IPv4 forwarding on (for the traffic that goes through the host stack),
    /// then the host-stack dataplane's own set-up, when there is one. The
    /// gateways need no address on the host: the programs answer ARP and
    /// neighbour solicitations for them.
    async fn setup(&self, node: &NodeNetwork) -> Result<(), DataplaneError> {
        super::write_node_sysctl(self.ledger.as_ref(), "net/ipv4/ip_forward", "1")?;
        if let Some(host) = &self.host_stack {
            host.setup(node).await?;
        }
        Ok(())
    }

    /// The pod-veth check, the host stack's attach, then the endpoint's
    /// root qdisc, entries and programs, then the pod side of an egress
    /// limit (see `shaping.rs`).
    async fn attach(&self, endpoint: &Endpoint) -> Result<(), DataplaneError> {
        // Before anything (the host stack's sysctls and routes, the root
        // qdisc, clsact) is changed on the interface.
        super::pod_veth::check_pod_veth(&*self.host_netlink().await?, endpoint).await?;
        if let Some(host) = &self.host_stack {
            host.attach(endpoint).await?;
        }
        self.shape_host_root(endpoint).await?;
        self.prepare_flow_tables(endpoint).await?;
        let before = {
            let mut state = self.lock();
            let before = state.pacing.get(endpoint.spec.host_ifindex)?;
            state.attach(endpoint, &[])?;
            before
        };
        self.shape_pod_side(endpoint, before, false).await
    }

    /// The programs, entries and pacers go; the qdiscs go with the veth
    /// (and the pod side is removed when the netns is still there).
    async fn detach(&self, endpoint: &Endpoint) -> Result<(), DataplaneError> {
        let (ours, before) = {
            let mut state = self.lock();
            let before = state.pacing.get(endpoint.spec.host_ifindex).ok().flatten();
            (state.detach(endpoint), before)
        };
        let mut unshaped = endpoint.clone();
        unshaped.spec.bandwidth = None;
        let pod = self.shape_pod_side(&unshaped, before, false).await;
        if let Some(host) = &self.host_stack {
            host.detach(endpoint).await?;
        }
        ours?;
        pod
    }

    /// The host stack's reconcile first, then the programs' (see
    /// `reconcile.rs`): stale filters and entries removed, missing ones
    /// attached, tcx links of earlier versions dropped.
    async fn reconcile(&self, endpoints: &[Endpoint]) -> Result<ReconcileReport, DataplaneError> {
        let mut report = match &self.host_stack {
            Some(host) => host.reconcile(endpoints).await?,
            None => ReconcileReport::default(),
        };
        self.reconcile_programs(endpoints, &mut report).await?;
        Ok(report)
    }
}

/// The programs' state, the per-endpoint counters and the shaping, read
/// from the kernel and the pinned maps.
#[async_trait]
impl EndpointReports for AyaDataplane {
    /// An endpoint counts as attached when both hooks of its host veth run
    /// this dataplane's programs (same name and tag as the loaded ones; on
    /// the egress hook `to_container_bw` for a pod whose incoming traffic
    /// is limited): one filter dump per hook and endpoint.
    async fn programs_status(
        &self,
        endpoints: &[Endpoint],
    ) -> Result<Option<ProgramsStatus>, DataplaneError> {
        let tags = self.lock().tags.clone();
        let handle = self.host_netlink().await?;
        let mut status = ProgramsStatus::default();
        for endpoint in endpoints {
            // A host veth gone (or renumbered) runs nothing of ours.
            let found = if attach::host_ifindex(&endpoint.spec.host_ifname)
                == Some(endpoint.spec.host_ifindex)
            {
                tc::query(&handle, endpoint.spec.host_ifindex).await?
            } else {
                Vec::new()
            };
            let complete = Direction::ALL.into_iter().all(|direction| {
                let name = attach::program_for(endpoint, direction);
                attach::runs(&found, direction, name, tags.get(name).copied())
            });
            if complete {
                status.attached += 1;
            } else {
                status.detached.push(endpoint.spec.host_ifname.clone());
            }
        }
        status.detached.sort();
        Ok(Some(status))
    }

    fn endpoint_counters(
        &self,
        endpoint: &Endpoint,
    ) -> Result<Option<EndpointCounters>, DataplaneError> {
        self.counters(endpoint.spec.host_ifindex)
    }

    async fn bandwidth_status(
        &self,
        endpoint: &Endpoint,
    ) -> Result<Option<BandwidthStatus>, DataplaneError> {
        self.shaping_status(endpoint).await
    }

    fn host_routing(&self) -> Result<Option<HostRoutingStatus>, DataplaneError> {
        let counters = self.node_counters()?;
        Ok(Some(HostRoutingStatus {
            peer_pod_cidrs: self.peer_pods()?,
            counters: counters
                .named()
                .into_iter()
                .map(|(name, value)| (name.to_owned(), value))
                .collect(),
        }))
    }
}
