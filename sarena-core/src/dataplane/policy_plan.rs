//! How a dataplane goes from the policy state it holds to a new one
//! without ever allowing what neither state allows: the order of the
//! writes, decided here once for every backend.
//!
//! A dataplane holds an [`PolicyTables`] state: per endpoint (host ifindex)
//! its isolation bits and allow entries, and the address → identity table.
//! [`plan`] turns the difference between what is held and what is wanted
//! into [`PolicyOp`]s, in this order:
//!
//! 1. allow entries that are new or name another rule;
//! 2. isolation bits that change (an endpoint becoming isolated finds its
//!    entries in place; one ceasing to be isolated is no longer checked
//!    before its entries go);
//! 3. address → identity entries that are new or changed: an address moves
//!    to its new identity only once the entries allowing that identity are
//!    in place (identities are renumbered at each daemon start, so after a
//!    restart every address moves);
//! 4. allow entries no longer wanted;
//! 5. address entries no longer wanted.
//!
//! So during an update a packet meets either the old decision or the new
//! one for each piece, and the only transient states deny (a newly
//! isolated endpoint before its peers' addresses move), never allow.

use std::collections::BTreeMap;

use ipnet::IpNet;

use crate::policy::{EntryKey, IpcacheEntry, RuleId};

/// One endpoint's policy as a dataplane holds it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EndpointTables {
    /// `sarena_common::policy::ENDPOINT_F_*_ISOLATED` bits.
    pub isolation: u32,
    /// Allow entries and the rule each comes from.
    pub entries: BTreeMap<EntryKey, RuleId>,
}

/// A node's policy state as a dataplane holds it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PolicyTables {
    /// Address prefix → identity.
    pub ipcache: BTreeMap<IpNet, IpcacheEntry>,
    /// Host ifindex → the endpoint's isolation and entries.
    pub endpoints: BTreeMap<u32, EndpointTables>,
}

/// One write of a policy update.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PolicyOp {
    /// Writes (or rewrites) an allow entry.
    SetEntry {
        /// The endpoint's host ifindex.
        ifindex: u32,
        /// The entry.
        key: EntryKey,
        /// Its rule.
        rule: RuleId,
    },
    /// Sets an endpoint's isolation bits.
    SetIsolation {
        /// The endpoint's host ifindex.
        ifindex: u32,
        /// The bits.
        bits: u32,
    },
    /// Writes (or rewrites) an address entry.
    SetIpcache {
        /// The prefix.
        prefix: IpNet,
        /// Its identity and flags.
        entry: IpcacheEntry,
    },
    /// Removes an allow entry.
    RemoveEntry {
        /// The endpoint's host ifindex.
        ifindex: u32,
        /// The entry.
        key: EntryKey,
    },
    /// Removes an address entry.
    RemoveIpcache {
        /// The prefix.
        prefix: IpNet,
    },
}

/// The writes that take `held` to `wanted`, in the order the [module
/// docs](self) give. Endpoints absent from `wanted` keep their state (they
/// are detached, or not yet known, by the caller), except that their entries
/// are not touched either.
pub fn plan(held: &PolicyTables, wanted: &PolicyTables) -> Vec<PolicyOp> {
    let empty = EndpointTables::default();
    let mut ops = Vec::new();
    for (&ifindex, want) in &wanted.endpoints {
        let have = held.endpoints.get(&ifindex).unwrap_or(&empty);
        for (key, rule) in &want.entries {
            if have.entries.get(key) != Some(rule) {
                ops.push(PolicyOp::SetEntry {
                    ifindex,
                    key: *key,
                    rule: *rule,
                });
            }
        }
    }
    for (&ifindex, want) in &wanted.endpoints {
        let have = held.endpoints.get(&ifindex).map(|e| e.isolation);
        if have != Some(want.isolation) {
            ops.push(PolicyOp::SetIsolation {
                ifindex,
                bits: want.isolation,
            });
        }
    }
    for (prefix, entry) in &wanted.ipcache {
        if held.ipcache.get(prefix) != Some(entry) {
            ops.push(PolicyOp::SetIpcache {
                prefix: *prefix,
                entry: *entry,
            });
        }
    }
    for (&ifindex, want) in &wanted.endpoints {
        if let Some(have) = held.endpoints.get(&ifindex) {
            for key in have.entries.keys() {
                if !want.entries.contains_key(key) {
                    ops.push(PolicyOp::RemoveEntry { ifindex, key: *key });
                }
            }
        }
    }
    for prefix in held.ipcache.keys() {
        if !wanted.ipcache.contains_key(prefix) {
            ops.push(PolicyOp::RemoveIpcache { prefix: *prefix });
        }
    }
    ops
}

impl PolicyTables {
    /// Records that `op` took effect.
    pub fn record(&mut self, op: &PolicyOp) {
        match op {
            PolicyOp::SetEntry { ifindex, key, rule } => {
                self.endpoints
                    .entry(*ifindex)
                    .or_default()
                    .entries
                    .insert(*key, *rule);
            }
            PolicyOp::SetIsolation { ifindex, bits } => {
                self.endpoints.entry(*ifindex).or_default().isolation = *bits;
            }
            PolicyOp::SetIpcache { prefix, entry } => {
                self.ipcache.insert(*prefix, *entry);
            }
            PolicyOp::RemoveEntry { ifindex, key } => {
                if let Some(e) = self.endpoints.get_mut(ifindex) {
                    e.entries.remove(key);
                }
            }
            PolicyOp::RemoveIpcache { prefix } => {
                self.ipcache.remove(prefix);
            }
        }
    }
}

#[cfg(test)]
#[path = "policy_plan_tests.rs"]
mod tests;
