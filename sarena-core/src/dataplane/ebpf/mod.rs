//! The eBPF dataplane: Sarena's TC programs on each pod's host-side veth,
//! loaded and managed with aya.
//!
//! [`AyaDataplane::open`] loads the object (built by sarena-daemon's build
//! script and embedded in the daemon; sarena-core itself needs no eBPF
//! toolchain) with its maps pinned under the pin directory: maps pinned by an
//! earlier run are re-opened, not recreated, so the endpoint table and the
//! counters survive a daemon restart. Links are tcx links pinned per host veth
//! (see [`pins`]); they stay attached while the daemon is down, so pod traffic
//! is never interrupted, and [`Dataplane::reconcile`] brings pins and maps in
//! line with the registry at start-up without attaching anything twice.
//!
//! # What the host must provide
//!
//! The programs forward pod → pod traffic on this node and answer the pods'
//! ARP requests. Everything else (pod → host, pod → outside, and the way back)
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

mod entries;
pub mod pins;

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use aya::maps::{HashMap as BpfHashMap, MapData, PerCpuHashMap, PerCpuValues};
use aya::programs::links::{FdLink, LinkOrder};
use aya::programs::tc::{SchedClassifier, TcAttachOptions};
use aya::{Ebpf, EbpfLoader};
pub use pins::{Direction, PinnedAttachment};
use sarena_common::{COUNTERS_MAP, ENDPOINTS_MAP};
pub use sarena_common::{DropReason, EndpointCounters, EndpointInfo, EndpointKey};

use super::{Dataplane, DataplaneError, DataplaneMode, NodeNetwork, ReconcileReport};
use crate::api::Endpoint;

/// Where the daemon pins maps and links.
pub const DEFAULT_PIN_DIR: &str = "/sys/fs/bpf/sarena";

/// The eBPF dataplane. See the [module docs](self).
pub struct AyaDataplane {
    pin_dir: PathBuf,
    state: Mutex<State>,
    host_stack: Option<Arc<dyn Dataplane>>,
}

struct State {
    /// Owns the loaded programs (links are pinned, never kept here).
    ebpf: Ebpf,
    endpoints: BpfHashMap<MapData, EndpointKey, EndpointInfo>,
    counters: PerCpuHashMap<MapData, u32, EndpointCounters>,
}

impl std::fmt::Debug for AyaDataplane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AyaDataplane")
            .field("pin_dir", &self.pin_dir)
            .field("host_stack", &self.host_stack.as_ref().map(|d| d.mode()))
            .finish_non_exhaustive()
    }
}

fn ebpf_err(
    call: &'static str,
    object: impl Into<String>,
    e: impl std::fmt::Display,
) -> DataplaneError {
    DataplaneError::Ebpf {
        call,
        object: object.into(),
        message: e.to_string(),
    }
}

fn io_err(call: &'static str, path: &Path, source: std::io::Error) -> DataplaneError {
    DataplaneError::Io {
        call,
        path: path.display().to_string(),
        source,
    }
}

impl AyaDataplane {
    /// Loads `object` (the ELF built from `sarena-ebpf-programs`), re-opening
    /// the maps pinned under `pin_dir` by an earlier run or creating and
    /// pinning them. `pin_dir` must be on a bpffs; it is created if missing.
    /// Links pinned there earlier stay as they are until
    /// [`Dataplane::reconcile`].
    pub fn open(object: &[u8], pin_dir: &Path) -> Result<Self, DataplaneError> {
        if object.is_empty() {
            return Err(ebpf_err(
                "load",
                "embedded object",
                "no eBPF object: the daemon was built without the eBPF toolchain \
                 (run scripts/setup-ebpf.sh and rebuild, or use dataplane = \"kernel\")",
            ));
        }
        for dir in [pins::maps_dir(pin_dir), pins::links_dir(pin_dir)] {
            std::fs::create_dir_all(&dir).map_err(|e| io_err("create pin dir", &dir, e))?;
        }
        let mut ebpf = EbpfLoader::new()
            .default_map_pin_directory(pins::maps_dir(pin_dir))
            .load(object)
            .map_err(|e| ebpf_err("load", pin_dir.display().to_string(), error_chain(&e)))?;
        for direction in Direction::ALL {
            let name = direction.program();
            program(&mut ebpf, name)?
                .load()
                .map_err(|e| ebpf_err("load program", name, error_chain(&e)))?;
        }
        let endpoints = take_map(&mut ebpf, ENDPOINTS_MAP).and_then(|m| {
            BpfHashMap::try_from(m).map_err(|e| ebpf_err("open map", ENDPOINTS_MAP, e))
        })?;
        let counters = take_map(&mut ebpf, COUNTERS_MAP).and_then(|m| {
            PerCpuHashMap::try_from(m).map_err(|e| ebpf_err("open map", COUNTERS_MAP, e))
        })?;
        Ok(AyaDataplane {
            pin_dir: pin_dir.to_owned(),
            state: Mutex::new(State {
                ebpf,
                endpoints,
                counters,
            }),
            host_stack: None,
        })
    }

    /// Also drives `host_stack` (the kernel dataplane: forwarding, host routes
    /// to the pods, masquerading) for the traffic that goes through the host
    /// stack; each trait call runs it first.
    pub fn with_host_stack(mut self, host_stack: Arc<dyn Dataplane>) -> Self {
        self.host_stack = Some(host_stack);
        self
    }

    /// The pin directory.
    pub fn pin_dir(&self) -> &Path {
        &self.pin_dir
    }

    /// The counters of the endpoint whose host veth is `host_ifindex`, summed
    /// over CPUs; `None` when it is not attached.
    pub fn counters(&self, host_ifindex: u32) -> Result<Option<EndpointCounters>, DataplaneError> {
        let state = self.lock();
        match state.counters.get(&host_ifindex, 0) {
            Ok(values) => {
                let mut total = EndpointCounters::default();
                for v in values.iter() {
                    total.add(v);
                }
                Ok(Some(total))
            }
            Err(e) if is_not_found(&e) => Ok(None),
            Err(e) => Err(ebpf_err("read counters", host_ifindex.to_string(), e)),
        }
    }

    /// Every entry of the endpoint map, sorted by address.
    pub fn endpoint_entries(&self) -> Result<Vec<(Ipv4Addr, EndpointInfo)>, DataplaneError> {
        let state = self.lock();
        let mut out = Vec::new();
        for item in state.endpoints.iter() {
            let (k, v) = item.map_err(|e| ebpf_err("iterate", ENDPOINTS_MAP, e))?;
            out.push((Ipv4Addr::from(k.addr), v));
        }
        out.sort_by_key(|(a, _)| *a);
        Ok(out)
    }

    /// Every pinned link, sorted.
    pub fn pinned_links(&self) -> Result<Vec<PinnedAttachment>, DataplaneError> {
        let dir = pins::links_dir(&self.pin_dir);
        pins::list_links(&self.pin_dir).map_err(|e| io_err("list pins", &dir, e))
    }

    /// Removes every pin under `pin_dir` and the directory itself: every link
    /// is detached and the maps go away once no program uses them. For
    /// uninstalling Sarena from a node and for tests.
    pub fn purge(pin_dir: &Path) -> Result<(), DataplaneError> {
        match std::fs::remove_dir_all(pin_dir) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io_err("remove pins", pin_dir, e)),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves the maps consistent enough:
        // every operation is idempotent and reconcile repairs the rest.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn link_path(&self, link: &PinnedAttachment) -> PathBuf {
        pins::links_dir(&self.pin_dir).join(link.file_name())
    }

    /// Makes `endpoint` forwardable; `true` when something was missing.
    fn attach_locked(
        &self,
        state: &mut State,
        endpoint: &Endpoint,
    ) -> Result<bool, DataplaneError> {
        let ifname = &endpoint.host_ifname;
        let current = if_nametoindex(ifname);
        if current != Some(endpoint.host_ifindex) {
            return Err(ebpf_err(
                "attach",
                ifname.clone(),
                format!(
                    "the registry says ifindex {}, the host has {}",
                    endpoint.host_ifindex,
                    current.map_or("no such interface".into(), |i| i.to_string())
                ),
            ));
        }
        let mut changed = false;

        // Counters first (kept when present), then the endpoint entries, then
        // the programs: frames only meet fully set-up maps.
        if state.counters.get(&endpoint.host_ifindex, 0).is_err() {
            let cpus = aya::util::nr_cpus().map_err(|(what, e)| ebpf_err("nr_cpus", what, e))?;
            let zero = PerCpuValues::try_from(vec![EndpointCounters::default(); cpus])
                .map_err(|e| ebpf_err("per-cpu values", ifname.clone(), e))?;
            state
                .counters
                .insert(endpoint.host_ifindex, zero, 0)
                .map_err(|e| ebpf_err("insert counters", ifname.clone(), e))?;
            changed = true;
        }
        for (key, info) in entries::endpoint_entries(endpoint)? {
            if state.endpoints.get(&key, 0).ok() != Some(info) {
                state.endpoints.insert(key, info, 0).map_err(|e| {
                    ebpf_err("insert endpoint", Ipv4Addr::from(key.addr).to_string(), e)
                })?;
                changed = true;
            }
        }

        let existing = self.pinned_links()?;
        for direction in Direction::ALL {
            let wanted = PinnedAttachment {
                ifindex: endpoint.host_ifindex,
                ifname: ifname.clone(),
                direction,
            };
            // A pin for an older interface of the same name is stale.
            for stale in existing
                .iter()
                .filter(|l| l.ifname == *ifname && l.direction == direction && **l != wanted)
            {
                self.unpin(stale)?;
            }
            if existing.contains(&wanted) {
                continue;
            }
            let name = direction.program();
            let prog = program(&mut state.ebpf, name)?;
            let id = prog
                .attach_with_options(
                    ifname,
                    direction.attach_type(),
                    TcAttachOptions::TcxOrder(LinkOrder::default()),
                )
                .map_err(|e| {
                    ebpf_err("tcx attach", format!("{name} on {ifname}"), error_chain(&e))
                })?;
            let link = prog
                .take_link(id)
                .map_err(|e| ebpf_err("take link", ifname.clone(), e))?;
            let link =
                FdLink::try_from(link).map_err(|e| ebpf_err("link fd", ifname.clone(), e))?;
            let path = self.link_path(&wanted);
            // Dropping the pinned link closes our fd; the pin keeps it attached.
            link.pin(&path)
                .map_err(|e| ebpf_err("pin link", path.display().to_string(), error_chain(&e)))?;
            changed = true;
        }
        Ok(changed)
    }

    /// Removes `endpoint`'s map entries, counters and links.
    fn detach_locked(&self, state: &mut State, endpoint: &Endpoint) -> Result<(), DataplaneError> {
        let mut errors = Vec::new();
        for link in self.pinned_links()? {
            if link.ifname == endpoint.host_ifname
                && let Err(e) = self.unpin(&link)
            {
                errors.push(e.to_string());
            }
        }
        for addr in entries::ipv4_addresses(&endpoint.addresses) {
            let key = EndpointKey::new(addr.octets());
            // Only our own entries: the address may already belong to a newer endpoint.
            if let Ok(info) = state.endpoints.get(&key, 0)
                && info.ifindex == endpoint.host_ifindex
                && let Err(e) = state.endpoints.remove(&key)
            {
                errors.push(format!("{}: {e}", Ipv4Addr::from(key.addr)));
            }
        }
        if let Err(e) = state.counters.remove(&endpoint.host_ifindex)
            && !is_not_found(&e)
        {
            errors.push(format!("counters: {e}"));
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(ebpf_err(
                "detach",
                endpoint.host_ifname.clone(),
                errors.join("; "),
            ))
        }
    }

    fn unpin(&self, link: &PinnedAttachment) -> Result<(), DataplaneError> {
        let path = self.link_path(link);
        pins::detach_and_unpin(&path).map_err(|e| io_err("detach link", &path, e))
    }

    /// Removes whatever the registry does not know; returns what was removed.
    fn remove_stale(
        &self,
        state: &mut State,
        endpoints: &[Endpoint],
    ) -> Result<Vec<String>, DataplaneError> {
        let wanted_links: BTreeMap<&str, u32> = endpoints
            .iter()
            .map(|e| (e.host_ifname.as_str(), e.host_ifindex))
            .collect();
        let mut wanted_entries = BTreeMap::new();
        for endpoint in endpoints {
            for (key, info) in entries::endpoint_entries(endpoint)? {
                wanted_entries.insert(key.addr, info);
            }
        }
        let wanted_ifindexes: BTreeSet<u32> = wanted_links.values().copied().collect();

        let mut removed = BTreeSet::new();
        for link in self.pinned_links()? {
            if wanted_links.get(link.ifname.as_str()) != Some(&link.ifindex) {
                self.unpin(&link)?;
                removed.insert(link.ifname);
            }
        }
        let keys: Vec<EndpointKey> = state.endpoints.keys().filter_map(Result::ok).collect();
        for key in keys {
            let current = state.endpoints.get(&key, 0).ok();
            if current.is_none() || wanted_entries.get(&key.addr) != current.as_ref() {
                // Wrong or unknown: removed here; attach writes the right one back.
                state.endpoints.remove(&key).map_err(|e| {
                    ebpf_err("remove endpoint", Ipv4Addr::from(key.addr).to_string(), e)
                })?;
                if !wanted_entries.contains_key(&key.addr) {
                    removed.insert(Ipv4Addr::from(key.addr).to_string());
                }
            }
        }
        let ifindexes: Vec<u32> = state.counters.keys().filter_map(Result::ok).collect();
        for ifindex in ifindexes {
            if !wanted_ifindexes.contains(&ifindex) {
                let _ = state.counters.remove(&ifindex);
            }
        }
        Ok(removed.into_iter().collect())
    }
}

fn program<'a>(ebpf: &'a mut Ebpf, name: &str) -> Result<&'a mut SchedClassifier, DataplaneError> {
    ebpf.program_mut(name)
        .ok_or_else(|| ebpf_err("find program", name, "not in the object"))?
        .try_into()
        .map_err(|e| ebpf_err("find program", name, e))
}

fn take_map(ebpf: &mut Ebpf, name: &str) -> Result<aya::maps::Map, DataplaneError> {
    ebpf.take_map(name)
        .ok_or_else(|| ebpf_err("find map", name.to_owned(), "not in the object"))
}

/// `e` with its sources (aya's verifier log is in a source).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// A lookup or delete of a missing key (reported either way by aya).
fn is_not_found(e: &aya::maps::MapError) -> bool {
    match e {
        aya::maps::MapError::KeyNotFound => true,
        aya::maps::MapError::SyscallError(s) => s.io_error.raw_os_error() == Some(libc::ENOENT),
        _ => false,
    }
}

fn if_nametoindex(ifname: &str) -> Option<u32> {
    let name = std::ffi::CString::new(ifname).ok()?;
    // SAFETY: `name` is a valid NUL-terminated string for the duration of the call.
    let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
    (index != 0).then_some(index)
}

fn write_sysctl(path: &str, value: &str) -> Result<(), DataplaneError> {
    std::fs::write(path, value).map_err(|e| io_err("write sysctl", Path::new(path), e))
}

#[async_trait]
impl Dataplane for AyaDataplane {
    fn mode(&self) -> DataplaneMode {
        DataplaneMode::Ebpf
    }

    /// IPv4 forwarding on (for the traffic that goes through the host stack),
    /// then the host-stack dataplane's own set-up, when there is one. The
    /// gateways need no address on the host: the programs answer ARP for them.
    async fn setup(&self, node: &NodeNetwork) -> Result<(), DataplaneError> {
        write_sysctl("/proc/sys/net/ipv4/ip_forward", "1")?;
        if let Some(host) = &self.host_stack {
            host.setup(node).await?;
        }
        Ok(())
    }

    async fn attach(&self, endpoint: &Endpoint) -> Result<(), DataplaneError> {
        if let Some(host) = &self.host_stack {
            host.attach(endpoint).await?;
        }
        let mut state = self.lock();
        self.attach_locked(&mut state, endpoint).map(|_| ())
    }

    async fn detach(&self, endpoint: &Endpoint) -> Result<(), DataplaneError> {
        let ours = {
            let mut state = self.lock();
            self.detach_locked(&mut state, endpoint)
        };
        if let Some(host) = &self.host_stack {
            host.detach(endpoint).await?;
        }
        ours
    }

    /// Removes pins and entries the registry does not know (or knows with
    /// another ifindex), then attaches what is missing. Endpoints whose host
    /// veth no longer exists are skipped (the registry's GC removes them).
    async fn reconcile(&self, endpoints: &[Endpoint]) -> Result<ReconcileReport, DataplaneError> {
        let mut report = match &self.host_stack {
            Some(host) => host.reconcile(endpoints).await?,
            None => ReconcileReport::default(),
        };
        let live: Vec<Endpoint> = endpoints
            .iter()
            .filter(|e| {
                let present = if_nametoindex(&e.host_ifname) == Some(e.host_ifindex);
                if !present {
                    tracing::warn!(ifname = %e.host_ifname, "reconcile: host veth gone, not attaching");
                }
                present
            })
            .cloned()
            .collect();
        let mut state = self.lock();
        report.removed.extend(self.remove_stale(&mut state, &live)?);
        let mut errors = Vec::new();
        for endpoint in &live {
            match self.attach_locked(&mut state, endpoint) {
                Ok(true) => report.attached.push(endpoint.host_ifname.clone()),
                Ok(false) => {}
                Err(e) => errors.push(e.to_string()),
            }
        }
        if !errors.is_empty() {
            return Err(ebpf_err(
                "reconcile",
                self.pin_dir.display().to_string(),
                errors.join("; "),
            ));
        }
        Ok(report)
    }
}
