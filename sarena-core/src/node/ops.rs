//! The node's operations, synchronous and with an explicit `now`: the
//! implementation behind `impl Daemon for Node` (`daemon.rs`), one method per
//! trait method and named like it.
//!
//! Each mutation runs under the state mutex, in a batch (`batch.rs`): plan in
//! memory, commit one redb transaction, then apply to memory (or undo the plan
//! if the commit failed); its answer waits for the batch to be durable.

use std::collections::BTreeSet;
use std::net::IpAddr;

use ipnet::IpNet;

use super::{Inner, NodeError, State};
use crate::api::{
    AllocateRequest, Allocation, AllocationRecord, Attachment, Endpoint, EndpointCreate, GcReport,
    IpamState,
};
use crate::ipam::IpamError;
use crate::store::{AllocationEntry, OwedRemoval};

fn check_owner(owner: &Attachment) -> Result<(), NodeError> {
    let bad = |field, reason: &str| {
        Err(NodeError::InvalidRequest {
            field,
            reason: reason.to_owned(),
        })
    };
    if owner.container_id.trim().is_empty() {
        return bad("owner.container_id", "must not be empty");
    }
    if owner.ifname.trim().is_empty() {
        return bad("owner.ifname", "must not be empty");
    }
    Ok(())
}

/// When an allocation made (or re-requested) at `now` expires without an endpoint.
fn renewed_lease(lease_seconds: u64, now: u64) -> Option<u64> {
    (lease_seconds > 0).then(|| now.saturating_add(lease_seconds))
}

/// The answer for `entry`: its addresses with the gateways the pod routes
/// through (see [`super::routes`]), and the routes through them.
fn allocation_of(entry: &AllocationEntry) -> Allocation {
    let addresses = super::routes::as_pod_sees(&entry.addresses);
    Allocation {
        owner: entry.owner.clone(),
        routes: super::routes::pod_routes(&addresses),
        addresses,
        lease_expires_at: entry.lease_expires_at,
    }
}

impl State {
    /// Forgets `owner` in memory (after the store removed it) and frees its addresses.
    fn forget(&mut self, owner: &Attachment) {
        self.endpoints.remove(owner);
        if let Some(entry) = self.allocations.remove(owner) {
            for a in &entry.addresses {
                let addr = a.address.addr();
                if self.owners.get(&addr) == Some(owner) {
                    self.owners.remove(&addr);
                    self.alloc.release(addr);
                }
            }
        }
    }
}

impl Inner {
    /// `POST /ipam/allocate` at time `now`. Idempotent per owner (same addresses; a
    /// pending lease is renewed from `now`); the answer is given only after the
    /// allocation is durably committed.
    pub(super) fn allocate(&self, req: AllocateRequest, now: u64) -> Result<Allocation, NodeError> {
        check_owner(&req.owner)?;
        self.mutate(move |inner, st| inner.allocate_in(st, req, now))
    }

    fn allocate_in(
        &self,
        st: &mut State,
        req: AllocateRequest,
        now: u64,
    ) -> Result<Allocation, NodeError> {
        if let Some(entry) = st.allocations.get(&req.owner) {
            let held: Vec<IpAddr> = entry.addresses.iter().map(|a| a.address.addr()).collect();
            let pool_ok = req.pool.as_ref().is_none_or(|p| *p == entry.pool);
            if !pool_ok || !req.requested.iter().all(|r| held.contains(r)) {
                let (owner, pool) = (req.owner.clone(), entry.pool.clone());
                return Err(NodeError::AllocationMismatch { owner, held, pool });
            }
            if entry.lease_expires_at.is_none() {
                return Ok(allocation_of(entry));
            }
            // A retried ADD: the lease runs from the latest attempt.
            let lease = renewed_lease(self.config.lease_seconds, now);
            let entry = AllocationEntry {
                lease_expires_at: lease,
                ..entry.clone()
            };
            self.store.put_allocation(&entry)?;
            let out = allocation_of(&entry);
            st.allocations.insert(entry.owner.clone(), entry);
            return Ok(out);
        }
        let pool = st.alloc.select_pool(
            req.pool.as_deref(),
            req.pod.namespace.as_deref(),
            &req.requested,
        )?;
        let pool = pool.to_owned();
        let addresses = match st.alloc.allocate(&pool, &req.requested) {
            Err(IpamError::InUse { address }) => {
                return Err(match st.owners.get(&address) {
                    Some(owner) => NodeError::AddressOwned {
                        address,
                        owner: owner.clone(),
                    },
                    None => IpamError::InUse { address }.into(),
                });
            }
            r => r?,
        };
        let lease = self.config.lease_seconds;
        let entry = AllocationEntry {
            owner: req.owner,
            pod: req.pod,
            pool,
            addresses,
            allocated_at: now,
            lease_expires_at: renewed_lease(lease, now),
        };
        if let Err(e) = self.store.put_allocation(&entry) {
            for a in &entry.addresses {
                st.alloc.release(a.address.addr());
            }
            return Err(e.into());
        }
        for a in &entry.addresses {
            st.owners.insert(a.address.addr(), entry.owner.clone());
        }
        let out = allocation_of(&entry);
        tracing::debug!(owner = ?entry.owner, addresses = ?entry.addresses, "allocated");
        st.allocations.insert(entry.owner.clone(), entry);
        Ok(out)
    }

    /// `DELETE /ipam/allocations/...`: releases a bare allocation. `Ok(false)` when the
    /// owner holds none; an error when an endpoint still uses it.
    pub(super) fn release(&self, owner: &Attachment) -> Result<bool, NodeError> {
        let owner = owner.clone();
        self.mutate(move |inner, st| inner.release_in(st, &owner))
    }

    fn release_in(&self, st: &mut State, owner: &Attachment) -> Result<bool, NodeError> {
        if st.endpoints.contains_key(owner) {
            return Err(NodeError::EndpointHoldsAllocation {
                owner: owner.clone(),
            });
        }
        if !st.allocations.contains_key(owner) {
            return Ok(false);
        }
        self.store.remove_owners(std::slice::from_ref(owner))?;
        st.forget(owner);
        tracing::debug!(?owner, "released");
        Ok(true)
    }

    /// `POST /endpoint/create` at time `now`: records the endpoint and clears the
    /// allocation's lease in one transaction. Idempotent for the same body.
    pub(super) fn create_endpoint(
        &self,
        req: EndpointCreate,
        now: u64,
    ) -> Result<Endpoint, NodeError> {
        check_owner(&req.spec.owner)?;
        if req.spec.host_ifname.trim().is_empty() {
            let reason = "must not be empty".to_owned();
            return Err(NodeError::InvalidRequest {
                field: "host_ifname",
                reason,
            });
        }
        self.mutate(move |inner, st| inner.create_endpoint_in(st, req, now))
    }

    fn create_endpoint_in(
        &self,
        st: &mut State,
        req: EndpointCreate,
        now: u64,
    ) -> Result<Endpoint, NodeError> {
        if let Some(ep) = st.endpoints.get(&req.spec.owner) {
            let same = ep.spec.pod == req.spec.pod
                && ep.spec.host_ifname == req.spec.host_ifname
                && ep.spec.host_ifindex == req.spec.host_ifindex
                && ep.spec.host_mac == req.spec.host_mac
                && ep.spec.pod_mac == req.spec.pod_mac
                && ep.spec.netns == req.spec.netns
                && ep.spec.bandwidth == req.spec.bandwidth
                && ep.spec.addresses.iter().collect::<BTreeSet<_>>()
                    == req.spec.addresses.iter().collect();
            if same {
                return Ok(ep.clone());
            }
            let host_ifname = ep.spec.host_ifname.clone();
            return Err(NodeError::EndpointExists {
                owner: req.spec.owner,
                host_ifname,
            });
        }
        let Some(entry) = st.allocations.get(&req.spec.owner) else {
            return Err(NodeError::NoAllocation {
                owner: req.spec.owner,
            });
        };
        let held: BTreeSet<IpAddr> = entry.addresses.iter().map(|a| a.address.addr()).collect();
        let given: BTreeSet<IpAddr> = req.spec.addresses.iter().map(IpNet::addr).collect();
        if held != given || given.len() != req.spec.addresses.len() {
            return Err(NodeError::AddressMismatch {
                owner: req.spec.owner,
                allocated: entry.addresses.iter().map(|a| a.address).collect(),
                given: req.spec.addresses,
            });
        }
        let endpoint = req.into_endpoint(now);
        let entry = AllocationEntry {
            lease_expires_at: None,
            ..entry.clone()
        };
        self.store.put_endpoint(&endpoint, &entry)?;
        st.allocations.insert(entry.owner.clone(), entry);
        st.endpoints
            .insert(endpoint.spec.owner.clone(), endpoint.clone());
        tracing::debug!(owner = ?endpoint.spec.owner, host_ifname = %endpoint.spec.host_ifname, "endpoint created");
        Ok(endpoint)
    }

    /// `DELETE /endpoints/...`: removes the endpoint and its allocation (or a bare
    /// allocation) in one transaction. `Ok(false)` when there was neither.
    pub(super) fn delete_endpoint(&self, owner: &Attachment) -> Result<bool, NodeError> {
        let owner = owner.clone();
        self.mutate(move |inner, st| inner.delete_endpoint_in(st, &owner))
    }

    fn delete_endpoint_in(&self, st: &mut State, owner: &Attachment) -> Result<bool, NodeError> {
        if !st.endpoints.contains_key(owner) && !st.allocations.contains_key(owner) {
            return Ok(false);
        }
        self.store.remove_owners(std::slice::from_ref(owner))?;
        st.forget(owner);
        tracing::debug!(?owner, "endpoint deleted");
        Ok(true)
    }

    /// [`Inner::delete_endpoint`], recording in the same transaction that the
    /// endpoint's veth pair is to be removed; returns whether anything existed
    /// and the endpoint that did.
    pub(super) fn delete_endpoint_owing(
        &self,
        owner: &Attachment,
    ) -> Result<(bool, Option<Endpoint>), NodeError> {
        let owner = owner.clone();
        self.mutate(move |inner, st| inner.delete_endpoint_owing_in(st, &owner))
    }

    fn delete_endpoint_owing_in(
        &self,
        st: &mut State,
        owner: &Attachment,
    ) -> Result<(bool, Option<Endpoint>), NodeError> {
        let endpoint = st.endpoints.get(owner).cloned();
        if endpoint.is_none() && !st.allocations.contains_key(owner) {
            return Ok((false, None));
        }
        let owed: Vec<OwedRemoval> = endpoint
            .iter()
            .map(|e| OwedRemoval {
                host_ifname: e.spec.host_ifname.clone(),
                host_ifindex: e.spec.host_ifindex,
            })
            .collect();
        self.store
            .remove_owners_owing(std::slice::from_ref(owner), &owed)?;
        st.forget(owner);
        tracing::debug!(?owner, "endpoint deleted; veth removal owed");
        Ok((true, endpoint))
    }

    /// `DELETE /endpoints/...?allocation=keep` at time `now`: removes the endpoint
    /// but keeps its allocation, under a lease from `now` as before it was
    /// registered, in one transaction; returns the endpoint removed.
    pub(super) fn unregister_endpoint(
        &self,
        owner: &Attachment,
        now: u64,
    ) -> Result<Option<Endpoint>, NodeError> {
        let owner = owner.clone();
        self.mutate(move |inner, st| inner.unregister_endpoint_in(st, &owner, now))
    }

    fn unregister_endpoint_in(
        &self,
        st: &mut State,
        owner: &Attachment,
        now: u64,
    ) -> Result<Option<Endpoint>, NodeError> {
        let Some(endpoint) = st.endpoints.get(owner).cloned() else {
            return Ok(None);
        };
        let Some(entry) = st.allocations.get(owner) else {
            // An endpoint without an allocation (kept at start-up): nothing to
            // keep, so it goes like a deletion.
            self.store.remove_owners(std::slice::from_ref(owner))?;
            st.forget(owner);
            return Ok(Some(endpoint));
        };
        let entry = AllocationEntry {
            lease_expires_at: renewed_lease(self.config.lease_seconds, now),
            ..entry.clone()
        };
        self.store.unregister_endpoint(&entry)?;
        st.endpoints.remove(owner);
        st.allocations.insert(owner.clone(), entry);
        tracing::debug!(?owner, "endpoint unregistered; allocation kept");
        Ok(Some(endpoint))
    }

    /// The endpoint of `owner`.
    pub(super) fn endpoint(&self, owner: &Attachment) -> Result<Option<Endpoint>, NodeError> {
        Ok(self.lock()?.endpoints.get(owner).cloned())
    }

    /// Every endpoint, ordered by owner.
    pub(super) fn endpoints(&self) -> Result<Vec<Endpoint>, NodeError> {
        Ok(self.lock()?.endpoints.values().cloned().collect())
    }

    /// Pools and allocations (one record per address), ordered by owner.
    pub(super) fn ipam_state(&self) -> Result<IpamState, NodeError> {
        let st = self.lock()?;
        let allocations = st
            .allocations
            .values()
            .flat_map(|e| {
                e.addresses.iter().map(|a| AllocationRecord {
                    owner: e.owner.clone(),
                    address: a.address.addr(),
                    pool: e.pool.clone(),
                    allocated_at: e.allocated_at,
                    lease_expires_at: e.lease_expires_at,
                })
            })
            .collect();
        Ok(IpamState {
            pools: st.alloc.pool_states(),
            allocations,
        })
    }

    /// Removes every endpoint and allocation whose owner is not in `valid`, in one transaction.
    pub(super) fn gc(&self, valid: &[Attachment]) -> Result<GcReport, NodeError> {
        let valid = valid.to_vec();
        self.mutate(move |inner, st| inner.gc_in(st, &valid))
    }

    fn gc_in(&self, st: &mut State, valid: &[Attachment]) -> Result<GcReport, NodeError> {
        let valid: BTreeSet<&Attachment> = valid.iter().collect();
        let mut report = GcReport::default();
        for owner in st.endpoints.keys().filter(|o| !valid.contains(o)) {
            report.endpoints_removed.push(owner.clone());
        }
        for owner in st.allocations.keys() {
            if !valid.contains(owner) && !st.endpoints.contains_key(owner) {
                report.allocations_released.push(owner.clone());
            }
        }
        let victims: Vec<Attachment> = report
            .endpoints_removed
            .iter()
            .chain(&report.allocations_released)
            .cloned()
            .collect();
        self.store.remove_owners(&victims)?;
        for owner in &victims {
            st.forget(owner);
        }
        if !victims.is_empty() {
            tracing::info!(removed = victims.len(), "gc");
        }
        Ok(report)
    }

    /// [`Node::expire_leases`](super::Node::expire_leases).
    pub(super) fn expire_leases(&self, now_unix: u64) -> Result<Vec<Attachment>, NodeError> {
        self.mutate(move |inner, st| inner.expire_leases_in(st, now_unix))
    }

    fn expire_leases_in(
        &self,
        st: &mut State,
        now_unix: u64,
    ) -> Result<Vec<Attachment>, NodeError> {
        let expired: Vec<Attachment> = st
            .allocations
            .values()
            .filter(|e| e.lease_expires_at.is_some_and(|t| t <= now_unix))
            .filter(|e| !st.endpoints.contains_key(&e.owner))
            .map(|e| e.owner.clone())
            .collect();
        self.store.remove_owners(&expired)?;
        for owner in &expired {
            st.forget(owner);
        }
        if !expired.is_empty() {
            tracing::info!(owners = ?expired, "leases expired");
        }
        Ok(expired)
    }
}
