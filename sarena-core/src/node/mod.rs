//! The node daemon's state: [`Registry`] implements [`crate::api::Daemon`] in process,
//! over the [`crate::ipam::Allocator`] (in memory) and the [`crate::store::RedbStore`]
//! (durable). `sarena-daemon` serves it over HTTP; an embedder can call it directly.
//! The `Daemon` trait is its one interface (plus [`Registry::expire_leases`], which the
//! daemon runs on a timer); [`WithDataplane`] composes it with a dataplane.
//!
//! - `ops.rs`: the operations behind the trait (synchronous, explicit `now`);
//! - `daemon.rs`: `impl Daemon for Registry` over them;
//! - `recovery.rs`: rebuilding the state from the store at [`Registry::open`];
//! - `routes.rs`: what a pod is told: its gateways and routes ([`pod_routes`]);
//! - `veth_ledger.rs`: [`VethLedger`], the veth removals the daemon owes;
//! - `with_dataplane.rs`: [`WithDataplane`]; `stats.rs`: what it adds to
//!   the status and the per-endpoint counters; `start_up.rs`: its start-up
//!   repair (stale endpoints, owed removals, unowned links, reconcile);
//! - `config.rs`, `error.rs`: [`NodeConfig`], [`NodeError`].
//!
//! ```
//! use sarena_core::api::{AllocateRequest, Attachment, Daemon};
//! use sarena_core::node::{Registry, NodeConfig};
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let node = Registry::open(dir.path(), NodeConfig::default())?;
//! let owner = Attachment { container_id: "c1".into(), ifname: "eth0".into() };
//! let req = AllocateRequest { owner, pod: Default::default(), requested: vec![], pool: None };
//! let a = node.allocate(req).await?;
//! assert_eq!(a.addresses[0].address.to_string(), "10.200.0.2/16");
//! # Ok(()) }
//! ```

mod batch;
mod config;
mod daemon;
#[cfg(test)]
mod dual_stack_tests;
mod error;
mod identity;
mod ops;
mod recovery;
mod routes;
mod stats;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod unregister_tests;
mod veth_ledger;
mod with_dataplane;

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::net::IpAddr;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

pub use config::{ConfigError, DEFAULT_CONFIG_TOML, DEFAULT_MTU, NodeConfig};

/// The network part of the status (the pods' MTU, masquerading), shared
/// between whoever learns it (start-up, Kubernetes mode's supervisor) and
/// the API that reports it.
pub type NetworkCell = std::sync::Arc<std::sync::Mutex<crate::api::NetworkStatus>>;
pub use error::NodeError;
pub use recovery::OpenReport;
pub use routes::{pod_gateway, pod_routes};
#[cfg(any(test, feature = "mocks"))]
pub use veth_ledger::MockVethLedger;
pub use veth_ledger::{OwedRemoval, VethLedger};
pub use with_dataplane::{
    AttachError, BandwidthUnsupported, HostNetns, StartUpError, StartUpReport, WithDataplane,
};

use crate::api::{Attachment, Endpoint};
use crate::ipam::Allocator;
use crate::store::{AllocationEntry, RedbStore};

/// A source of Unix time in seconds (replaceable in tests).
pub type Clock = Arc<dyn Fn() -> u64 + Send + Sync>;

/// The system clock as a [`Clock`].
pub fn system_clock() -> Clock {
    Arc::new(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0)
    })
}

/// The mutable state, behind one mutex.
#[derive(Debug)]
struct State {
    alloc: Allocator,
    allocations: BTreeMap<Attachment, AllocationEntry>,
    owners: HashMap<IpAddr, Attachment>,
    endpoints: BTreeMap<Attachment, Endpoint>,
}

struct Inner {
    config: NodeConfig,
    /// The pods' MTU `GET /daemon/config` serves: the config's at open,
    /// then whatever [`Registry::set_mtu`] sets (the uplink's, followed).
    mtu: std::sync::atomic::AtomicU32,
    store: RedbStore,
    state: Mutex<State>,
    /// Mutations waiting for, or in, a group commit (`batch.rs`).
    batches: batch::Batches,
    /// Set when a lost group commit left memory ahead of the store and
    /// reloading it failed: the next [`Inner::lock`] reloads first.
    stale: std::sync::atomic::AtomicBool,
    clock: Clock,
    report: OpenReport,
}

/// The in-process daemon: IPAM plus endpoint registry, durable in a [`RedbStore`].
///
/// Cheap to clone (shared state). Every mutation commits one redb transaction,
/// under a mutex that also guards the in-memory state, and returns once it is
/// durable; concurrent mutations share the fsync (group commit, see
/// `batch.rs`). Concurrent calls are safe, and nobody sees memory ahead of
/// the disk: the mutex is held until the shared fsync returns.
#[derive(Clone)]
pub struct Registry {
    inner: Arc<Inner>,
}

/// The registry's name before 0.2: the type is [`Registry`].
#[deprecated(
    since = "0.2.0",
    note = "renamed `Registry` (the endpoint registry and IPAM)"
)]
pub type Node = Registry;

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registry")
            .field("config", &self.inner.config)
            .field("store", &self.inner.store)
            .field("report", &self.inner.report)
            .finish_non_exhaustive()
    }
}

impl Registry {
    /// The pods' MTU new pods get (`GET /daemon/config`).
    pub fn mtu(&self) -> u32 {
        self.inner.mtu.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Sets the pods' MTU new pods get from now on (running pods keep
    /// theirs); returns the one before.
    pub fn set_mtu(&self, mtu: u32) -> u32 {
        self.inner
            .mtu
            .swap(mtu, std::sync::atomic::Ordering::Relaxed)
    }

    /// Opens the store under `state_dir` (creating it), loads every allocation and
    /// endpoint and rebuilds the free-address sets. Uses the system clock.
    pub fn open(state_dir: &Path, config: NodeConfig) -> Result<Registry, NodeError> {
        Registry::open_with_clock(state_dir, config, system_clock())
    }

    /// [`Registry::open`] with an explicit clock (tests, simulations).
    pub fn open_with_clock(
        state_dir: &Path,
        config: NodeConfig,
        clock: Clock,
    ) -> Result<Registry, NodeError> {
        config.validate()?;
        let alloc = Allocator::new(&config.ipam)?;
        let store = RedbStore::open(state_dir)?;
        let (state, report) = recovery::recover(alloc, &store)?;
        let inner = Inner {
            mtu: std::sync::atomic::AtomicU32::new(config.daemon_config().mtu),
            config,
            store,
            state: Mutex::new(state),
            batches: batch::Batches::default(),
            stale: std::sync::atomic::AtomicBool::new(false),
            clock,
            report,
        };
        Ok(Registry {
            inner: Arc::new(inner),
        })
    }

    /// The configuration the node runs with (named apart from [`crate::api::Daemon::config`]).
    pub fn node_config(&self) -> &NodeConfig {
        &self.inner.config
    }

    /// What [`Registry::open`] found.
    pub fn open_report(&self) -> &OpenReport {
        &self.inner.report
    }

    /// Now, per the node's clock.
    pub fn now(&self) -> u64 {
        self.inner.now()
    }

    /// Releases every allocation without an endpoint whose lease expired at or before
    /// `now_unix`, in one transaction; returns their owners. The daemon calls this
    /// periodically (blocking: it commits to the store).
    pub fn expire_leases(&self, now_unix: u64) -> Result<Vec<Attachment>, NodeError> {
        self.inner.expire_leases(now_unix)
    }
}

impl Inner {
    fn now(&self) -> u64 {
        (self.clock)()
    }

    /// The state, reloaded from the store first if a lost group commit left
    /// it stale.
    fn lock(&self) -> Result<MutexGuard<'_, State>, NodeError> {
        let mut st = self.state.lock().map_err(|_| NodeError::Poisoned)?;
        if self.stale.load(std::sync::atomic::Ordering::Acquire) {
            self.reload(&mut st);
            if self.stale.load(std::sync::atomic::Ordering::Acquire) {
                return Err(NodeError::NotKept {
                    reason: "the state could not be reloaded from the store after a lost commit"
                        .into(),
                });
            }
        }
        Ok(st)
    }

    /// Replaces `st` with the store's content (what a restart would load);
    /// on failure marks the state stale for the next [`Inner::lock`].
    fn reload(&self, st: &mut State) {
        let fresh = Allocator::new(&self.config.ipam)
            .map_err(NodeError::from)
            .and_then(|alloc| recovery::recover(alloc, &self.store));
        let stale = match fresh {
            Ok((state, _)) => {
                *st = state;
                false
            }
            Err(error) => {
                tracing::error!(error = %crate::error_chain(&error), "cannot reload the state from the store; every operation retries first");
                true
            }
        };
        self.stale
            .store(stale, std::sync::atomic::Ordering::Release);
    }

    /// What the store has committed since it was opened (group commit shows
    /// as fewer durable commits than transactions).
    #[cfg(test)]
    fn commit_counts(&self) -> crate::store::CommitCounts {
        self.store.commit_counts()
    }
}
