//! Each endpoint's two flows tables (host-stack flows, NetworkPolicy's
//! answerable flows) go into and out of their pinned outer maps without the
//! dataplane's lock, and DEL does not wait for them to go.
//!
//! Why: putting a table into a hash of maps, or taking it out, makes the
//! kernel wait for an RCU grace period before the syscall returns
//! (`maybe_wait_bpf_programs`: `synchronize_rcu` for map-in-map updates,
//! 9–16 ms each on the benchmark machine). Done one after the other under
//! the lock, the two inserts were two thirds of an eBPF ADD and the two
//! removals nine tenths of a DEL, and concurrent ADDs queued behind each
//! other's waits.
//!
//! - [`TableKeeper::prepare`] (attach, before the lock is taken) puts both
//!   tables in from two threads and returns as soon as both are visible,
//!   leaving the threads to their grace periods (see there why it need not
//!   wait for them). `Maps::write` then finds them (it still creates a
//!   missing one itself, for the callers that do not prepare: reconcile).
//!   The tables themselves are made ahead: the worker keeps [`SPARES`]
//!   empty ones per outer map (an LRU table is preallocated, which takes
//!   the kernel a tenth of a millisecond or more), made again after each
//!   use; a burst that empties the spares makes its own.
//! - [`TableKeeper::queue_removal`] (detach, under the lock) hands the
//!   ifindex to a worker thread, which takes both tables out at once. Until
//!   then the tables stay in their outer maps, unused: the endpoint's entries
//!   and programs are gone, and a new host veth gets a new ifindex (the
//!   kernel numbers links cyclically). An attach of the same ifindex
//!   meanwhile claims the table back (its flows are that same interface's)
//!   or waits for a removal in progress, so a removal never takes out a
//!   table an attached endpoint uses.
//! - A crash with removals queued leaves tables behind, which the start-up
//!   reconcile removes (`Maps::remove_unknown`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, mpsc};
use std::time::Duration;

use aya::maps::MapData;
use sarena_common::HOST_FLOWS_MAP;
use sarena_common::layouts::{HOST_FLOWS_TABLE, MapLayout};
use sarena_common::policy::{POLICY_FLOWS_MAP, POLICY_FLOWS_TABLE};

use super::error::BpfError;
use super::flows::{FlowTables, HOST_TABLE_NAME, create_table};
use super::policy_maps::POLICY_TABLE_NAME;

/// One outer map: its name (and pin file), its tables' layout and the
/// name the kernel shows for them.
type Outer = (&'static str, MapLayout, &'static str);

/// The two outer maps whose tables the keeper manages.
const OUTERS: [Outer; 2] = [
    (HOST_FLOWS_MAP, HOST_FLOWS_TABLE, HOST_TABLE_NAME),
    (POLICY_FLOWS_MAP, POLICY_FLOWS_TABLE, POLICY_TABLE_NAME),
];

/// Empty tables kept ready per outer map.
pub(super) const SPARES: usize = 2;

/// How many times `prepare` looks whether a table being put in is visible,
/// yielding the CPU in between (the insert is a few microseconds away),
/// before it sleeps between looks.
const INSERT_SPINS: u32 = 200;
/// How long `prepare` sleeps between looks after that.
const INSERT_POLL: Duration = Duration::from_micros(50);

/// What the worker thread does.
enum Job {
    /// Take the tables of this ifindex out (unless claimed back).
    Remove(u32),
    /// Make the spare tables missing.
    Refill,
}

/// Where an ifindex's removal stands.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Removal {
    /// Waiting for the worker; an attach may still claim the tables back.
    Queued,
    /// The worker is taking the tables out.
    Running,
}

/// What the keeper and its worker share.
struct Shared {
    /// The pinned maps' directory.
    maps_dir: PathBuf,
    /// The ifindexes whose tables are to go, or going.
    removals: Mutex<BTreeMap<u32, Removal>>,
    /// Signalled whenever a removal ends.
    ended: Condvar,
    /// Empty tables made ahead, per outer map (the order of [`OUTERS`]).
    spares: [Mutex<Vec<MapData>>; 2],
    /// Long-lived handles on the outer maps, for lookups (`None` when
    /// they could not be opened at start: each call opens its own).
    watchers: [Option<FlowTables>; 2],
}

/// Puts tables in and takes them out (see the module docs).
pub(super) struct TableKeeper {
    shared: Arc<Shared>,
    /// The worker's queue; `None` when it could not be started (removals
    /// are then done by the caller, and no spares are made).
    worker: Option<mpsc::Sender<Job>>,
}

impl TableKeeper {
    /// A keeper of the outer maps pinned in `maps_dir`, with its worker
    /// thread (which ends when the keeper is dropped, after the removals
    /// queued).
    pub(super) fn start(maps_dir: &Path) -> Self {
        let watcher = |(name, layout, table_name): Outer| {
            FlowTables::open_pinned(&maps_dir.join(name), name, layout, table_name).ok()
        };
        let shared = Arc::new(Shared {
            maps_dir: maps_dir.to_owned(),
            removals: Mutex::new(BTreeMap::new()),
            ended: Condvar::new(),
            spares: [Mutex::new(Vec::new()), Mutex::new(Vec::new())],
            watchers: [watcher(OUTERS[0]), watcher(OUTERS[1])],
        });
        let (tx, rx) = mpsc::channel::<Job>();
        let theirs = Arc::clone(&shared);
        let worker = std::thread::Builder::new()
            .name("sarena-flow-tables".into())
            .spawn(move || {
                for job in rx {
                    match job {
                        Job::Remove(ifindex) => theirs.remove(ifindex),
                        Job::Refill => theirs.refill(),
                    }
                }
            });
        let worker = match worker {
            Ok(_) => {
                let _ = tx.send(Job::Refill);
                Some(tx)
            }
            Err(e) => {
                tracing::warn!(error = %e, "eBPF: no thread for flows-table removals; DEL removes them itself");
                None
            }
        };
        TableKeeper { shared, worker }
    }

    /// Gives the endpoint behind `ifindex` both tables, claiming back
    /// those whose removal is queued. Blocking (polls): call it off the
    /// async threads.
    ///
    /// Each missing table is put in by a thread of its own, and `prepare`
    /// returns once every table is visible in its outer map (or its insert
    /// failed), without waiting for the grace period the insert then waits
    /// for: that wait is for programs still using an entry's old value,
    /// and a new key has none (and this endpoint's programs are not
    /// attached yet). The threads end with their grace periods.
    pub(super) fn prepare(&self, ifindex: u32, ifname: &str) -> Result<(), BpfError> {
        self.claim(ifindex);
        let mut inserts = Vec::new();
        for (i, outer @ (name, layout, table_name)) in OUTERS.into_iter().enumerate() {
            let path = self.shared.maps_dir.join(name);
            let mut inserter = FlowTables::open_pinned(&path, name, layout, table_name)?;
            if inserter.has_table(ifindex)? {
                continue;
            }
            let table = match self.shared.take_spare(i) {
                Some(table) => {
                    self.send(Job::Refill);
                    table
                }
                None => inserter.new_table(ifname)?,
            };
            let watcher = self.shared.watcher(i, outer)?;
            let (done, result) = mpsc::channel();
            let ifname = ifname.to_owned();
            let spawned = std::thread::Builder::new()
                .name("sarena-flows-insert".into())
                .spawn(move || {
                    let _ = done.send(inserter.insert_new(ifindex, &table, &ifname));
                });
            // Without a thread, `Maps::write` puts the table in itself.
            if spawned.is_ok() {
                inserts.push((watcher, result));
            }
        }
        for (watcher, result) in inserts {
            let mut looks = 0;
            loop {
                match result.try_recv() {
                    Ok(inserted) => {
                        inserted?;
                        break;
                    }
                    // The thread died: `Maps::write` puts the table in.
                    Err(mpsc::TryRecvError::Disconnected) => break,
                    Err(mpsc::TryRecvError::Empty) => {}
                }
                if watcher.has_table(ifindex)? {
                    break;
                }
                looks += 1;
                if looks < INSERT_SPINS {
                    std::thread::yield_now();
                } else {
                    std::thread::sleep(INSERT_POLL);
                }
            }
        }
        Ok(())
    }

    /// Makes sure no removal of `ifindex`'s tables is queued or running:
    /// a queued one is cancelled, a running one waited for.
    pub(super) fn claim(&self, ifindex: u32) {
        let mut removals = self.shared.lock();
        loop {
            match removals.get(&ifindex) {
                Some(Removal::Queued) => {
                    removals.remove(&ifindex);
                    return;
                }
                Some(Removal::Running) => {
                    removals = self
                        .shared
                        .ended
                        .wait(removals)
                        .unwrap_or_else(|poisoned| poisoned.into_inner());
                }
                None => return,
            }
        }
    }

    /// Has `ifindex`'s tables taken out by the worker (or at once, without
    /// one).
    pub(super) fn queue_removal(&self, ifindex: u32) {
        self.shared.lock().insert(ifindex, Removal::Queued);
        if !self.send(Job::Remove(ifindex)) {
            self.shared.remove(ifindex);
        }
    }

    /// Hands `job` to the worker; `false` without one.
    fn send(&self, job: Job) -> bool {
        self.worker.as_ref().is_some_and(|w| w.send(job).is_ok())
    }

    /// Waits until every queued removal is done.
    pub(super) fn wait_idle(&self) {
        let mut removals = self.shared.lock();
        while !removals.is_empty() {
            removals = self
                .shared
                .ended
                .wait(removals)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
        }
    }
}

impl Shared {
    /// The `i`th outer map's long-lived handle, or a new one.
    fn watcher(
        &self,
        i: usize,
        (name, layout, table_name): Outer,
    ) -> Result<Watcher<'_>, BpfError> {
        match &self.watchers[i] {
            Some(w) => Ok(Watcher::Shared(w)),
            None => FlowTables::open_pinned(&self.maps_dir.join(name), name, layout, table_name)
                .map(Watcher::Own),
        }
    }

    /// A spare table of the `i`th outer map, if one is left.
    fn take_spare(&self, i: usize) -> Option<MapData> {
        self.spares[i]
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .pop()
    }

    /// Makes the spare tables missing (failures are logged: the next
    /// attach makes its own).
    fn refill(&self) {
        for (i, (_, layout, table_name)) in OUTERS.into_iter().enumerate() {
            let missing = || {
                let held = self.spares[i]
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .len();
                held < SPARES
            };
            while missing() {
                match create_table(layout, table_name, "a spare") {
                    Ok(table) => self.spares[i]
                        .lock()
                        .unwrap_or_else(|poisoned| poisoned.into_inner())
                        .push(table),
                    Err(e) => {
                        tracing::warn!(error = %crate::error_chain(&e), "eBPF: no spare flows table");
                        break;
                    }
                }
            }
        }
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<u32, Removal>> {
        self.removals
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Takes `ifindex`'s tables out of both outer maps at once, unless an
    /// attach claimed them back since the removal was queued.
    fn remove(&self, ifindex: u32) {
        {
            let mut removals = self.lock();
            if removals.get(&ifindex) != Some(&Removal::Queued) {
                return;
            }
            removals.insert(ifindex, Removal::Running);
        }
        let remove = |(name, layout, table_name): Outer| {
            let mut errors = Vec::new();
            match FlowTables::open_pinned(&self.maps_dir.join(name), name, layout, table_name) {
                Ok(mut outer) => outer.remove(ifindex, &ifindex.to_string(), &mut errors),
                Err(e) => errors.push(e),
            }
            errors
        };
        let errors = std::thread::scope(|s| {
            let host = s.spawn(|| remove(OUTERS[0]));
            let mut errors = remove(OUTERS[1]);
            errors.extend(host.join().unwrap_or_default());
            errors
        });
        for e in errors {
            // The start-up reconcile removes what is left.
            tracing::warn!(ifindex, error = %crate::error_chain(&e), "eBPF: a flows table could not be removed");
        }
        self.lock().remove(&ifindex);
        self.ended.notify_all();
    }
}

/// An outer map's handle for lookups: the keeper's, or one of the call's.
enum Watcher<'a> {
    Shared(&'a FlowTables),
    Own(FlowTables),
}

impl std::ops::Deref for Watcher<'_> {
    type Target = FlowTables;

    fn deref(&self) -> &FlowTables {
        match self {
            Watcher::Shared(w) => w,
            Watcher::Own(w) => w,
        }
    }
}
