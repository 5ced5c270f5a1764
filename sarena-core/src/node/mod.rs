//! The node daemon's state: [`Node`] implements [`crate::api::Daemon`] in process,
//! over the [`crate::ipam::Allocator`] (in memory) and the [`crate::store::RedbStore`]
//! (durable). `sarena-daemon` serves it over HTTP; an embedder can call it directly.
//!
//! ```
//! use sarena_core::api::{AllocateRequest, Attachment, Daemon};
//! use sarena_core::node::{Node, NodeConfig};
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let node = Node::open(dir.path(), NodeConfig::default())?;
//! let owner = Attachment { container_id: "c1".into(), ifname: "eth0".into() };
//! let req = AllocateRequest { owner, pod: Default::default(), requested: vec![], pool: None };
//! let a = node.allocate(req).await?;
//! assert_eq!(a.addresses[0].address.to_string(), "10.200.0.2/16");
//! # Ok(()) }
//! ```

mod config;
mod daemon;
mod error;
mod ops;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::net::IpAddr;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

pub use config::{ConfigError, DEFAULT_CONFIG_TOML, NodeConfig};
pub use error::NodeError;

use crate::api::{Attachment, Endpoint};
use crate::ipam::{Allocator, IpamError};
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

/// What [`Node::open`] found in the store besides the normal state.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OpenReport {
    /// Allocations loaded.
    pub allocations: usize,
    /// Endpoints loaded.
    pub endpoints: usize,
    /// Addresses of kept allocations that the current pools would not hand out
    /// (outside every pool, or now a gateway / reserved): `(owner, address, why)`.
    pub outside_pools: Vec<(Attachment, IpAddr, String)>,
    /// Address rows no allocation held; removed.
    pub orphan_addresses_removed: Vec<IpAddr>,
    /// Allocations whose address rows were missing; rewritten.
    pub allocations_repaired: Vec<Attachment>,
    /// Endpoints without an allocation (kept; their addresses are not handed out).
    pub endpoints_without_allocation: Vec<Attachment>,
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
    store: RedbStore,
    state: Mutex<State>,
    clock: Clock,
    report: OpenReport,
}

/// The in-process daemon: IPAM plus endpoint registry, durable in a [`RedbStore`].
///
/// Cheap to clone (shared state). Every mutation commits one redb transaction
/// before it returns, under a mutex that also guards the in-memory state, so
/// concurrent calls are safe and memory never runs ahead of the disk.
#[derive(Clone)]
pub struct Node {
    inner: Arc<Inner>,
}

impl fmt::Debug for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Node")
            .field("config", &self.inner.config)
            .field("store", &self.inner.store)
            .field("report", &self.inner.report)
            .finish_non_exhaustive()
    }
}

impl Node {
    /// Opens the store under `state_dir` (creating it), loads every allocation and
    /// endpoint and rebuilds the free-address sets. Uses the system clock.
    pub fn open(state_dir: &Path, config: NodeConfig) -> Result<Node, NodeError> {
        Node::open_with_clock(state_dir, config, system_clock())
    }

    /// [`Node::open`] with an explicit clock (tests, simulations).
    pub fn open_with_clock(
        state_dir: &Path,
        config: NodeConfig,
        clock: Clock,
    ) -> Result<Node, NodeError> {
        config.validate()?;
        let mut alloc = Allocator::new(&config.ipam)?;
        let store = RedbStore::open(state_dir)?;
        let snap = store.load()?;
        let mut report = OpenReport {
            allocations: snap.allocations.len(),
            endpoints: snap.endpoints.len(),
            ..OpenReport::default()
        };
        let mut owners: HashMap<IpAddr, Attachment> = HashMap::new();
        let mut allocations = BTreeMap::new();
        for entry in snap.allocations {
            for a in &entry.addresses {
                let addr = a.address.addr();
                if let Some(first) = owners.insert(addr, entry.owner.clone()) {
                    let second = entry.owner.clone();
                    return Err(NodeError::DoubleOwner {
                        address: addr,
                        first,
                        second,
                    });
                }
                match alloc.mark_allocated(addr) {
                    Ok(()) => {}
                    Err(IpamError::InUse { .. }) => {
                        // Only reachable if `owners` missed it; treat as a double owner.
                        let first = entry.owner.clone();
                        return Err(NodeError::DoubleOwner {
                            address: addr,
                            first: first.clone(),
                            second: first,
                        });
                    }
                    Err(e) => {
                        tracing::warn!(owner = ?entry.owner, %addr, "allocation kept outside current pools: {e}");
                        report
                            .outside_pools
                            .push((entry.owner.clone(), addr, e.to_string()));
                    }
                }
            }
            allocations.insert(entry.owner.clone(), entry);
        }
        let mut by_age: Vec<&AllocationEntry> = allocations.values().collect();
        by_age.sort_by_key(|e| e.allocated_at);
        for a in by_age.iter().flat_map(|e| &e.addresses) {
            alloc.resume_after(a.address.addr());
        }
        let rows: HashMap<IpAddr, Attachment> = snap.addresses.into_iter().collect();
        for (addr, owner) in &rows {
            if owners.get(addr) != Some(owner) {
                report.orphan_addresses_removed.push(*addr);
            }
        }
        if !report.orphan_addresses_removed.is_empty() {
            tracing::warn!(addresses = ?report.orphan_addresses_removed, "removing orphan address rows");
            store.remove_addresses(&report.orphan_addresses_removed)?;
        }
        for entry in allocations.values() {
            let complete = entry
                .addresses
                .iter()
                .all(|a| rows.get(&a.address.addr()) == Some(&entry.owner));
            if !complete {
                tracing::warn!(owner = ?entry.owner, "rewriting missing address rows");
                store.put_allocation(entry)?;
                report.allocations_repaired.push(entry.owner.clone());
            }
        }
        let mut endpoints = BTreeMap::new();
        for ep in snap.endpoints {
            if !allocations.contains_key(&ep.owner) {
                tracing::warn!(owner = ?ep.owner, "endpoint without allocation");
                report.endpoints_without_allocation.push(ep.owner.clone());
            }
            endpoints.insert(ep.owner.clone(), ep);
        }
        tracing::info!(
            path = %store.path().display(),
            allocations = report.allocations,
            endpoints = report.endpoints,
            "node state loaded"
        );
        let state = State {
            alloc,
            allocations,
            owners,
            endpoints,
        };
        let inner = Inner {
            config,
            store,
            state: Mutex::new(state),
            clock,
            report,
        };
        Ok(Node {
            inner: Arc::new(inner),
        })
    }

    /// The configuration the node runs with (named apart from [`crate::api::Daemon::config`]).
    pub fn node_config(&self) -> &NodeConfig {
        &self.inner.config
    }

    /// What [`Node::open`] found.
    pub fn open_report(&self) -> &OpenReport {
        &self.inner.report
    }

    /// Now, per the node's clock.
    pub fn now(&self) -> u64 {
        (self.inner.clock)()
    }

    fn lock(&self) -> Result<MutexGuard<'_, State>, NodeError> {
        self.inner.state.lock().map_err(|_| NodeError::Poisoned)
    }
}
