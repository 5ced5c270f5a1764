//! NetworkPolicy into the maps: the engine's [`CompiledPolicy`] becomes
//! the address → identity entries, each attached endpoint's allow entries
//! and its isolation bits, written in the order of
//! [`crate::dataplane::policy_plan`] so no update ever opens what neither
//! the old nor the new state allows.
//!
//! Identities are translated: the engine numbers them from 256 at each
//! start, the maps may still hold the numbers of the daemon that ran
//! before. The loader gives each engine identity a number of its own,
//! above every number the pinned maps hold when it opens them, so a
//! restart moves every address to a fresh identity whose entries are
//! already in place (step 3 of the plan) instead of reusing a number that
//! still means something else in the maps.
//!
//! A local endpoint whose pod the engine has not seen (the API server's
//! event not there yet) gets no allow entry and the isolation its
//! namespace's policies would give it ([`CompiledPolicy::namespace_isolation`]);
//! before the engine's first state after a restart, the isolation the
//! pinned entries say, and for a new endpoint both directions when the
//! last daemon enforced any policy: fail closed, until the engine knows.

use std::collections::BTreeMap;
use std::sync::Arc;

use sarena_common::policy::{
    ENDPOINT_F_EGRESS_ISOLATED, ENDPOINT_F_INGRESS_ISOLATED, IDENTITY_FIRST_ALLOCATED,
};

use super::State;
use super::error::BpfError;
use crate::api::Endpoint;
use crate::dataplane::policy_plan::{self, EndpointTables, PolicyOp, PolicyTables};
use crate::policy::{CompiledPolicy, EndpointPolicy, EntryKey, Identity, IpcacheEntry, PodKey};

/// What the pinned maps hold: address entries, allow entries, and each
/// veth entry's isolation bits.
pub(super) fn held_tables(maps: &super::maps::Maps) -> Result<PolicyTables, BpfError> {
    let mut held = PolicyTables {
        ipcache: maps.policy.ipcache()?.into_iter().collect(),
        ..Default::default()
    };
    for (ifindex, key, rule) in maps.policy.entries()? {
        held.endpoints
            .entry(ifindex)
            .or_default()
            .entries
            .insert(key, rule);
    }
    for (ifindex, bits) in maps.pinned_isolation() {
        held.endpoints.entry(ifindex).or_default().isolation = bits;
    }
    Ok(held)
}

/// Both isolation bits.
pub(super) const POLICY_BITS: u32 = ENDPOINT_F_INGRESS_ISOLATED | ENDPOINT_F_EGRESS_ISOLATED;

/// What the loader knows and holds. Lives in the dataplane's [`State`].
#[derive(Debug, Default)]
pub(super) struct PolicyLoader {
    /// What the maps hold (dataplane identities).
    held: PolicyTables,
    /// The engine's last state, if it sent one.
    compiled: Option<Arc<CompiledPolicy>>,
    /// Engine identity → dataplane identity.
    identities: BTreeMap<Identity, Identity>,
    /// The next dataplane identity to give.
    next_identity: Identity,
    /// The attached endpoints, by host ifindex.
    attached: BTreeMap<u32, Endpoint>,
    /// The pinned maps held isolated endpoints or entries when opened.
    enforced_before: bool,
    /// Writes that failed since the start (a full map, most likely).
    pub(super) failed_writes: u64,
}

/// What one update did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PolicyApplied {
    /// Writes made.
    pub writes: usize,
    /// Writes that failed (their entries are missing: the traffic they
    /// would allow is denied).
    pub failed: usize,
    /// The maps that refused a write because they were full, by name
    /// (`SARENA_POLICY`, `SARENA_IPCACHE`, `SARENA_ENDPOINTS`), sorted.
    pub full_maps: Vec<&'static str>,
}

impl PolicyLoader {
    /// Starts from what the pinned maps hold.
    pub(super) fn open(held: PolicyTables) -> Self {
        let highest = held
            .ipcache
            .values()
            .map(|e| e.identity)
            .chain(
                held.endpoints
                    .values()
                    .flat_map(|e| e.entries.keys().map(|k| k.peer)),
            )
            .max()
            .unwrap_or(0);
        let enforced_before = held
            .endpoints
            .values()
            .any(|e| e.isolation != 0 || !e.entries.is_empty());
        PolicyLoader {
            next_identity: highest.saturating_add(1).max(IDENTITY_FIRST_ALLOCATED),
            enforced_before,
            held,
            ..Default::default()
        }
    }

    /// The dataplane identity of the engine's `id` (reserved ones as they are).
    fn identity(&mut self, id: Identity) -> Identity {
        if id < IDENTITY_FIRST_ALLOCATED {
            return id;
        }
        if let Some(&mapped) = self.identities.get(&id) {
            return mapped;
        }
        let mapped = self.next_identity;
        self.next_identity = self.next_identity.saturating_add(1);
        self.identities.insert(id, mapped);
        mapped
    }

    /// What `endpoint` should hold.
    fn wanted_for(&mut self, endpoint: &Endpoint) -> EndpointTables {
        let ifindex = endpoint.spec.host_ifindex;
        let Some(compiled) = self.compiled.clone() else {
            // No engine state yet: what the pins say, or fail closed.
            return match self.held.endpoints.get(&ifindex) {
                Some(held) => held.clone(),
                None if self.enforced_before => EndpointTables {
                    isolation: POLICY_BITS,
                    entries: BTreeMap::new(),
                },
                None => EndpointTables::default(),
            };
        };
        let (Some(namespace), Some(name)) = (&endpoint.spec.pod.namespace, &endpoint.spec.pod.name)
        else {
            // Not a Kubernetes pod: no policy can select it.
            return EndpointTables::default();
        };
        match compiled.endpoints.get(&PodKey::new(namespace, name)) {
            Some(policy) => self.tables_of(policy),
            None => {
                let (ingress, egress) = compiled
                    .namespace_isolation
                    .get(namespace)
                    .copied()
                    .unwrap_or((false, false));
                EndpointTables {
                    isolation: bits(ingress, egress),
                    entries: BTreeMap::new(),
                }
            }
        }
    }

    /// An engine endpoint policy in dataplane identities.
    fn tables_of(&mut self, policy: &EndpointPolicy) -> EndpointTables {
        let mut entries = BTreeMap::new();
        for (key, rule) in &policy.entries {
            let key = EntryKey {
                peer: self.identity(key.peer),
                ..*key
            };
            entries.insert(key, *rule);
        }
        EndpointTables {
            isolation: bits(policy.ingress_isolated, policy.egress_isolated),
            entries,
        }
    }

    /// Everything the maps should hold now.
    fn wanted(&mut self) -> PolicyTables {
        let mut wanted = PolicyTables::default();
        if let Some(compiled) = self.compiled.clone() {
            for (prefix, entry) in &compiled.ipcache {
                let entry = IpcacheEntry {
                    identity: self.identity(entry.identity),
                    flags: entry.flags,
                };
                wanted.ipcache.insert(*prefix, entry);
            }
        } else {
            wanted.ipcache = self.held.ipcache.clone();
        }
        let endpoints: Vec<Endpoint> = self.attached.values().cloned().collect();
        for endpoint in &endpoints {
            let tables = self.wanted_for(endpoint);
            wanted.endpoints.insert(endpoint.spec.host_ifindex, tables);
        }
        wanted
    }
}

/// Isolation bits of the two directions.
fn bits(ingress: bool, egress: bool) -> u32 {
    let mut bits = 0;
    if ingress {
        bits |= ENDPOINT_F_INGRESS_ISOLATED;
    }
    if egress {
        bits |= ENDPOINT_F_EGRESS_ISOLATED;
    }
    bits
}

impl super::AyaDataplane {
    /// Takes the engine's new state: identities translated, entries,
    /// isolation bits and addresses written in the order of
    /// [`crate::dataplane::policy_plan`].
    pub fn apply_policy(&self, compiled: Arc<CompiledPolicy>) -> PolicyApplied {
        self.lock().apply_policy(compiled)
    }

    /// Policy writes that failed since the dataplane opened (full maps).
    pub fn policy_failed_writes(&self) -> u64 {
        self.lock().policy.failed_writes
    }
}

impl State {
    /// Takes the engine's new state: every write of the plan, in order; a
    /// failed write is counted and the rest goes on (what it would have
    /// allowed stays denied).
    pub(super) fn apply_policy(&mut self, compiled: Arc<CompiledPolicy>) -> PolicyApplied {
        self.policy.compiled = Some(compiled);
        let wanted = self.policy.wanted();
        self.run_plan(&wanted)
    }

    /// Writes `wanted` (the whole node's, or one endpoint's) in plan order.
    fn run_plan(&mut self, wanted: &PolicyTables) -> PolicyApplied {
        let ops = policy_plan::plan(&self.policy.held, wanted);
        let mut report = PolicyApplied::default();
        for op in &ops {
            match self.write_policy_op(op) {
                Ok(()) => {
                    self.policy.held.record(op);
                    report.writes += 1;
                }
                Err(error) => {
                    report.failed += 1;
                    self.policy.failed_writes += 1;
                    if let BpfError::MapFull { map, .. } = &error
                        && !report.full_maps.contains(map)
                    {
                        report.full_maps.push(map);
                        report.full_maps.sort_unstable();
                    }
                    tracing::warn!(error = %crate::error_chain(&error), "policy entry not written");
                }
            }
        }
        report
    }

    /// One write.
    fn write_policy_op(&mut self, op: &PolicyOp) -> Result<(), BpfError> {
        match op {
            PolicyOp::SetEntry { ifindex, key, rule } => {
                self.maps.policy.set_entry(*ifindex, key, *rule)
            }
            PolicyOp::RemoveEntry { ifindex, key } => self.maps.policy.remove_entry(*ifindex, key),
            PolicyOp::SetIpcache { prefix, entry } => self.maps.policy.set_ipcache(*prefix, *entry),
            PolicyOp::RemoveIpcache { prefix } => self.maps.policy.remove_ipcache(*prefix),
            PolicyOp::SetIsolation { ifindex, bits } => {
                self.maps.isolation.insert(*ifindex, *bits);
                match self.policy.attached.get(ifindex).cloned() {
                    Some(endpoint) => self.maps.write(&endpoint).map(|_| ()),
                    None => Ok(()),
                }
            }
        }
    }

    /// Before `endpoint`'s entries are written: its policy entries and
    /// isolation bits, so its first frame already meets them.
    pub(super) fn attach_policy(&mut self, endpoint: &Endpoint) -> Result<(), BpfError> {
        let ifindex = endpoint.spec.host_ifindex;
        self.policy.attached.insert(ifindex, endpoint.clone());
        let tables = self.policy.wanted_for(endpoint);
        let mut wanted = PolicyTables {
            ipcache: self.policy.held.ipcache.clone(),
            ..Default::default()
        };
        wanted.endpoints.insert(ifindex, tables.clone());
        let report = self.run_plan(&wanted);
        // The entries (`maps.write`, next) carry the bits even when the
        // endpoint was not attached yet (its write above only recorded them).
        self.maps.isolation.insert(ifindex, tables.isolation);
        if report.failed > 0 {
            return Err(BpfError::PolicyEntries {
                ifname: endpoint.spec.host_ifname.clone(),
                failed: report.failed,
            });
        }
        Ok(())
    }

    /// `endpoint` is going: its allow entries go too.
    pub(super) fn detach_policy(&mut self, endpoint: &Endpoint, errors: &mut Vec<BpfError>) {
        let ifindex = endpoint.spec.host_ifindex;
        self.policy.attached.remove(&ifindex);
        self.forget_policy(ifindex, errors);
    }

    /// Removes the allow entries of `ifindex` from the map and the held state.
    fn forget_policy(&mut self, ifindex: u32, errors: &mut Vec<BpfError>) {
        let Some(held) = self.policy.held.endpoints.remove(&ifindex) else {
            return;
        };
        for key in held.entries.keys() {
            if let Err(e) = self.maps.policy.remove_entry(ifindex, key) {
                errors.push(e);
            }
        }
    }

    /// Reconcile: the live endpoints are the attached ones; entries of any
    /// other ifindex go.
    pub(super) fn reconcile_policy(&mut self, live: &[Endpoint], errors: &mut Vec<BpfError>) {
        self.policy.attached = live
            .iter()
            .map(|e| (e.spec.host_ifindex, e.clone()))
            .collect();
        let stale: Vec<u32> = self
            .policy
            .held
            .endpoints
            .keys()
            .filter(|i| !self.policy.attached.contains_key(i))
            .copied()
            .collect();
        for ifindex in stale {
            self.forget_policy(ifindex, errors);
        }
    }
}

#[cfg(test)]
#[path = "policy_tests.rs"]
mod tests;
