//! Identity allocation: numeric, node-local, monotonic from a base. A pod
//! address's identity stands for its key ([`PodIdentityKey`]: namespace,
//! labels, named ports, the policy prefixes containing the address); a
//! policy prefix's for the prefix. An identity stays while its key is in
//! use; a key that comes back after a compile without it gets a new one.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use ipnet::IpNet;
use sarena_common::policy::IDENTITY_FIRST_ALLOCATED;

use super::compiled::Identity;
use super::model::NamedPort;
use crate::api::Labels;

/// What every pod of a class shares, and all that policy selects on: its
/// namespace, labels and named ports.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct ClassKey {
    /// The pod's namespace.
    pub(crate) namespace: String,
    /// The pod's labels.
    pub(crate) labels: Labels,
    /// Its named ports, sorted and deduplicated.
    pub(crate) named_ports: Vec<NamedPort>,
}

/// The key of a pod address's identity.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct PodIdentityKey {
    /// The pod's class.
    pub(crate) class: Arc<ClassKey>,
    /// The policy prefixes containing the address, shortest first.
    pub(crate) prefixes: Arc<[IpNet]>,
}

/// The identities in use, by key, and the next one to allocate.
#[derive(Debug)]
pub(crate) struct Allocator {
    next: Identity,
    pods: HashMap<PodIdentityKey, Identity>,
    prefixes: HashMap<IpNet, Identity>,
}

impl Allocator {
    /// Allocates from `first` (never below the reserved identities).
    pub(crate) fn new(first: Identity) -> Self {
        Allocator {
            next: first.max(IDENTITY_FIRST_ALLOCATED),
            pods: HashMap::new(),
            prefixes: HashMap::new(),
        }
    }

    /// The next identity to allocate.
    pub(crate) fn next(&self) -> Identity {
        self.next
    }

    fn take(&mut self) -> Identity {
        let id = self.next;
        // 4 billion allocations on one node: saturating is the least harm.
        self.next = self.next.saturating_add(1);
        id
    }

    /// The identity of a pod address key (allocated when new).
    pub(crate) fn pod(&mut self, key: &PodIdentityKey) -> Identity {
        if let Some(id) = self.pods.get(key) {
            return *id;
        }
        let id = self.take();
        self.pods.insert(key.clone(), id);
        id
    }

    /// The identity of a policy prefix (allocated when new).
    pub(crate) fn prefix(&mut self, net: IpNet) -> Identity {
        if let Some(id) = self.prefixes.get(&net) {
            return *id;
        }
        let id = self.take();
        self.prefixes.insert(net, id);
        id
    }

    /// Forgets every key whose identity is not in `used`.
    pub(crate) fn retain(&mut self, used: &HashSet<Identity>) {
        self.pods.retain(|_, id| used.contains(id));
        self.prefixes.retain(|_, id| used.contains(id));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(ns: &str, app: &str) -> PodIdentityKey {
        PodIdentityKey {
            class: Arc::new(ClassKey {
                namespace: ns.into(),
                labels: [("app".to_string(), app.to_string())].into(),
                named_ports: vec![],
            }),
            prefixes: Arc::from(Vec::new()),
        }
    }

    #[test]
    fn identities_are_stable_while_used_and_never_reused() {
        let mut a = Allocator::new(1000);
        let x = a.pod(&key("a", "x"));
        let y = a.pod(&key("a", "y"));
        let p = a.prefix("10.0.0.0/8".parse().unwrap());
        assert_eq!((x, y, p), (1000, 1001, 1002));
        assert_eq!(a.pod(&key("a", "x")), x);
        assert_eq!(a.pod(&key("b", "x")), 1003);
        a.retain(&[y, p].into());
        assert_eq!(a.pod(&key("a", "y")), y);
        assert_eq!(
            a.pod(&key("a", "x")),
            1004,
            "a freed key gets a new identity"
        );
        assert_eq!(a.next(), 1005);
    }

    #[test]
    fn the_base_never_goes_below_the_reserved_identities() {
        assert_eq!(Allocator::new(3).next(), IDENTITY_FIRST_ALLOCATED);
    }
}
