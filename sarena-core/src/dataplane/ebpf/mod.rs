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
pub mod tc;

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use aya::maps::{HashMap as BpfHashMap, MapData, PerCpuHashMap, PerCpuValues};
use aya::programs::tc::SchedClassifier;
use aya::{Ebpf, EbpfLoader};
pub use pins::{Direction, PinnedAttachment};
use sarena_common::{COUNTERS_MAP, ENDPOINTS_MAP};
pub use sarena_common::{DropReason, EndpointCounters, EndpointInfo, EndpointKey};
pub use tc::TcAttachment;

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
    /// Owns the loaded programs (their filters belong to the devices).
    ebpf: Ebpf,
    /// The tags of the loaded programs, by [`Direction::ALL`] order.
    tags: [u64; 2],
    /// The ids of the maps the loaded programs use (the pinned ones): a
    /// program using one of them belongs to this dataplane.
    map_ids: BTreeSet<u32>,
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
        let mut tags = [0; 2];
        let mut map_ids = BTreeSet::new();
        for (direction, tag) in Direction::ALL.into_iter().zip(&mut tags) {
            let name = direction.program();
            let prog = program(&mut ebpf, name)?;
            prog.load()
                .map_err(|e| ebpf_err("load program", name, error_chain(&e)))?;
            let info = prog
                .info()
                .map_err(|e| ebpf_err("program info", name, error_chain(&e)))?;
            *tag = info.tag();
            let ids = info
                .map_ids()
                .map_err(|e| ebpf_err("program maps", name, error_chain(&e)))?;
            map_ids.extend(ids.unwrap_or_default());
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
                tags,
                map_ids,
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

    /// Sarena's filters on the device `ifindex`, as the kernel reports them
    /// (at most one per hook). Must run inside a tokio runtime.
    pub async fn attachments(&self, ifindex: u32) -> Result<Vec<TcAttachment>, DataplaneError> {
        tc::query(&netlink()?, ifindex)
            .await
            .map_err(|e| ebpf_err("query filters", ifindex.to_string(), e))
    }

    /// Every tcx link pinned by an earlier version of Sarena (which attached
    /// with tcx), sorted; [`Dataplane::reconcile`] replaces them with filters.
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

    /// Makes `endpoint` forwardable; `true` when something was missing.
    /// `current` are the filters already on its device (see
    /// [`tc::query`]): a hook whose filter runs this daemon's program is
    /// left alone, any other is (re)attached.
    fn attach_locked(
        &self,
        state: &mut State,
        endpoint: &Endpoint,
        current: &[TcAttachment],
    ) -> Result<bool, DataplaneError> {
        let ifname = &endpoint.host_ifname;
        let present = if_nametoindex(ifname);
        if present != Some(endpoint.host_ifindex) {
            return Err(ebpf_err(
                "attach",
                ifname.clone(),
                format!(
                    "the registry says ifindex {}, the host has {}",
                    endpoint.host_ifindex,
                    present.map_or("no such interface".into(), |i| i.to_string())
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

        for (direction, tag) in Direction::ALL.into_iter().zip(state.tags) {
            let name = direction.program();
            let up_to_date = current
                .iter()
                .any(|a| a.direction == direction && a.program == name && a.tag == tag);
            if up_to_date {
                continue;
            }
            let prog = program(&mut state.ebpf, name)?;
            tc::attach(prog, ifname, direction)
                .map_err(|e| ebpf_err("tc attach", format!("{name} on {ifname}"), e))?;
            changed = true;
        }
        Ok(changed)
    }

    /// Removes `endpoint`'s filters, map entries and counters.
    fn detach_locked(&self, state: &mut State, endpoint: &Endpoint) -> Result<(), DataplaneError> {
        let mut errors = Vec::new();
        // Only from our own device: a newer one may have taken the name.
        // (tcx links of earlier versions are gone since the start-up reconcile.)
        if if_nametoindex(&endpoint.host_ifname) == Some(endpoint.host_ifindex) {
            for direction in Direction::ALL {
                if let Err(e) = tc::detach(&endpoint.host_ifname, direction) {
                    errors.push(e);
                }
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
        let path = pins::links_dir(&self.pin_dir).join(link.file_name());
        pins::detach_and_unpin(&path).map_err(|e| io_err("detach link", &path, e))
    }

    /// Removes whatever the registry does not know: filters on other
    /// devices, map entries and counters; returns what was removed.
    fn remove_stale(
        &self,
        state: &mut State,
        endpoints: &[Endpoint],
        foreign: &[(String, Vec<TcAttachment>)],
    ) -> Result<Vec<String>, DataplaneError> {
        let mut wanted_entries = BTreeMap::new();
        for endpoint in endpoints {
            for (key, info) in entries::endpoint_entries(endpoint)? {
                wanted_entries.insert(key.addr, info);
            }
        }
        let wanted_ifindexes: BTreeSet<u32> = endpoints.iter().map(|e| e.host_ifindex).collect();

        let mut removed = BTreeSet::new();
        for (ifname, attachments) in foreign {
            for attachment in attachments {
                tc::detach(ifname, attachment.direction)
                    .map_err(|e| ebpf_err("remove stale filter", ifname.clone(), e))?;
                removed.insert(ifname.clone());
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

    /// Detaches and unpins every tcx link an earlier version pinned (called
    /// once the filters that replace them are in place).
    fn remove_legacy_links(&self) -> Result<Vec<String>, DataplaneError> {
        let mut removed = Vec::new();
        for link in self.pinned_links()? {
            self.unpin(&link)?;
            removed.push(link.ifname);
        }
        Ok(removed)
    }
}

/// A netlink handle for filter queries (must run inside a tokio runtime).
fn netlink() -> Result<rtnetlink::Handle, DataplaneError> {
    crate::links::netns::host_handle().map_err(|e| DataplaneError::Netlink {
        call: "netlink socket",
        object: "host".into(),
        message: e.to_string(),
    })
}

/// The ids of the loaded programs that use one of `maps`.
fn programs_using(maps: &BTreeSet<u32>) -> BTreeSet<u32> {
    aya::programs::loaded_programs()
        .filter_map(Result::ok)
        .filter(|info| {
            let used = info.map_ids().ok().flatten().unwrap_or_default();
            used.iter().any(|id| maps.contains(id))
        })
        .map(|info| info.id())
        .collect()
}

/// Every interface of this network namespace, by ifindex.
fn interfaces() -> Vec<(u32, String)> {
    let mut out = Vec::new();
    // SAFETY: if_nameindex returns a heap array terminated by a zeroed entry
    // (or NULL on failure), which we only read and then free once.
    unsafe {
        let list = libc::if_nameindex();
        if list.is_null() {
            return out;
        }
        let mut entry = list;
        while (*entry).if_index != 0 && !(*entry).if_name.is_null() {
            let name = std::ffi::CStr::from_ptr((*entry).if_name);
            out.push(((*entry).if_index, name.to_string_lossy().into_owned()));
            entry = entry.add(1);
        }
        libc::if_freenameindex(list);
    }
    out
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
        self.attach_locked(&mut state, endpoint, &[]).map(|_| ())
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

    /// Removes filters and entries the registry does not know (or knows with
    /// another ifindex), attaches what is missing or runs other code, then
    /// drops the tcx links of an earlier version. Endpoints whose host veth
    /// no longer exists are skipped (the registry's GC removes them).
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
        let live_ifindexes: BTreeSet<u32> = live.iter().map(|e| e.host_ifindex).collect();

        // What the kernel has, queried before taking the lock. Filters of
        // another dataplane (another pin dir: other maps) are not ours.
        let our_maps = self.lock().map_ids.clone();
        let ours_by_id = programs_using(&our_maps);
        let handle = netlink()?;
        let mut current = BTreeMap::new();
        let mut foreign = Vec::new();
        for (ifindex, ifname) in interfaces() {
            let found = tc::query(&handle, ifindex)
                .await
                .map_err(|e| ebpf_err("query filters", ifname.clone(), e))?;
            let ours: Vec<TcAttachment> = found
                .into_iter()
                .filter(|a| ours_by_id.contains(&a.program_id))
                .collect();
            if live_ifindexes.contains(&ifindex) {
                current.insert(ifindex, ours);
            } else if !ours.is_empty() {
                foreign.push((ifname, ours));
            }
        }

        let mut state = self.lock();
        report
            .removed
            .extend(self.remove_stale(&mut state, &live, &foreign)?);
        let mut errors = Vec::new();
        for endpoint in &live {
            let filters = current
                .get(&endpoint.host_ifindex)
                .map_or(&[][..], Vec::as_slice);
            match self.attach_locked(&mut state, endpoint, filters) {
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
        for ifname in self.remove_legacy_links()? {
            tracing::info!(%ifname, "reconcile: replaced a tcx link of an earlier version");
        }
        Ok(report)
    }
}
