//! Rebuilding the node's in-memory state from the store at start-up, and
//! repairing what a crash or an older version can leave behind: one function
//! per step, in the order [`recover`] runs them.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;

use super::{NodeError, State};
use crate::api::{Attachment, Endpoint};
use crate::ipam::{Allocator, IpamError};
use crate::store::{AllocationEntry, RedbStore};

/// What [`Node::open`](super::Node::open) found in the store besides the normal state.
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

/// Allocations by owner, and the owner of every address they hold.
type Claimed = (
    BTreeMap<Attachment, AllocationEntry>,
    HashMap<IpAddr, Attachment>,
);

/// Loads everything in `store` into `alloc` (freshly built from the current
/// pools) and repairs the store: the state to serve, and what was found.
pub(super) fn recover(
    mut alloc: Allocator,
    store: &RedbStore,
) -> Result<(State, OpenReport), NodeError> {
    let snap = store.load()?;
    let mut report = OpenReport {
        allocations: snap.allocations.len(),
        endpoints: snap.endpoints.len(),
        ..OpenReport::default()
    };
    let (allocations, owners) = claim_addresses(&mut alloc, snap.allocations, &mut report)?;
    resume_after_newest(&mut alloc, &allocations);
    let rows: HashMap<IpAddr, Attachment> = snap.addresses.into_iter().collect();
    remove_orphan_rows(store, &rows, &owners, &mut report)?;
    repair_missing_rows(store, &allocations, &rows, &mut report)?;
    let endpoints = load_endpoints(snap.endpoints, &allocations, &mut report);
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
    Ok((state, report))
}

/// Marks every stored allocation's addresses as taken. An address with two
/// owners is refused; one the current pools would not hand out is kept and
/// reported.
fn claim_addresses(
    alloc: &mut Allocator,
    entries: Vec<AllocationEntry>,
    report: &mut OpenReport,
) -> Result<Claimed, NodeError> {
    let mut owners: HashMap<IpAddr, Attachment> = HashMap::new();
    let mut allocations = BTreeMap::new();
    for entry in entries {
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
                    tracing::warn!(owner = ?entry.owner, %addr, "allocation kept outside current pools: {}", crate::error_chain(&e));
                    report
                        .outside_pools
                        .push((entry.owner.clone(), addr, crate::error_chain(&e)));
                }
            }
        }
        allocations.insert(entry.owner.clone(), entry);
    }
    Ok((allocations, owners))
}

/// Lets the allocator continue after the newest allocation, as it would have
/// had the daemon not restarted (addresses are not reused sooner than needed).
fn resume_after_newest(alloc: &mut Allocator, allocations: &BTreeMap<Attachment, AllocationEntry>) {
    let mut by_age: Vec<&AllocationEntry> = allocations.values().collect();
    by_age.sort_by_key(|e| e.allocated_at);
    for a in by_age.iter().flat_map(|e| &e.addresses) {
        alloc.resume_after(a.address.addr());
    }
}

/// Removes address rows that no allocation holds.
fn remove_orphan_rows(
    store: &RedbStore,
    rows: &HashMap<IpAddr, Attachment>,
    owners: &HashMap<IpAddr, Attachment>,
    report: &mut OpenReport,
) -> Result<(), NodeError> {
    for (addr, owner) in rows {
        if owners.get(addr) != Some(owner) {
            report.orphan_addresses_removed.push(*addr);
        }
    }
    if !report.orphan_addresses_removed.is_empty() {
        tracing::warn!(addresses = ?report.orphan_addresses_removed, "removing orphan address rows");
        store.remove_addresses(&report.orphan_addresses_removed)?;
    }
    Ok(())
}

/// Rewrites the allocations whose address rows are missing.
fn repair_missing_rows(
    store: &RedbStore,
    allocations: &BTreeMap<Attachment, AllocationEntry>,
    rows: &HashMap<IpAddr, Attachment>,
    report: &mut OpenReport,
) -> Result<(), NodeError> {
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
    Ok(())
}

/// Keys the endpoints by owner; one without an allocation is kept and reported.
fn load_endpoints(
    endpoints: Vec<Endpoint>,
    allocations: &BTreeMap<Attachment, AllocationEntry>,
    report: &mut OpenReport,
) -> BTreeMap<Attachment, Endpoint> {
    let mut out = BTreeMap::new();
    for ep in endpoints {
        if !allocations.contains_key(&ep.spec.owner) {
            tracing::warn!(owner = ?ep.spec.owner, "endpoint without allocation");
            report
                .endpoints_without_allocation
                .push(ep.spec.owner.clone());
        }
        out.insert(ep.spec.owner.clone(), ep);
    }
    out
}
