//! The engine's objects: the last state of every pod, namespace, policy and
//! Service it was told of, with relist bookkeeping (see [`PolicyEvent`])
//! and address claims (two pods naming one address: the latest claim wins;
//! when it goes, the previous claimant's is back in force).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::IpAddr;

use super::compiled::PodKey;
use super::events::{Kind, PolicyEvent};
use super::model::{Policy, PolicyPod};
use crate::api::Labels;

/// Everything the engine was told, as of the last event.
#[derive(Debug, Default)]
pub(crate) struct Objects {
    /// Pods of every node, by key.
    pub(crate) pods: BTreeMap<PodKey, PolicyPod>,
    /// Namespace labels, by name.
    pub(crate) namespaces: HashMap<String, Labels>,
    /// Policies by (namespace, name).
    pub(crate) policies: BTreeMap<(String, String), Policy>,
    /// Service addresses by (namespace, name).
    pub(crate) services: BTreeMap<(String, String), Vec<IpAddr>>,
    /// This node's addresses.
    pub(crate) node_addresses: Vec<IpAddr>,
    /// Pods claiming each address, oldest claim first.
    claims: HashMap<IpAddr, Vec<PodKey>>,
    /// Kinds being relisted, with the objects named since.
    relisting: HashMap<Kind, HashSet<(String, String)>>,
    /// Kinds listed at least once.
    listed: HashSet<Kind>,
}

/// The addresses of `pod` that get an ipcache entry (none on the host network).
fn own_ips(pod: Option<&PolicyPod>) -> &[IpAddr] {
    match pod {
        Some(p) if !p.host_network => &p.ips,
        _ => &[],
    }
}

impl Objects {
    /// Applies `event`; whether anything the compiled output depends on changed.
    pub(crate) fn apply(&mut self, event: PolicyEvent) -> bool {
        match event {
            PolicyEvent::Pod(pod) => {
                let key = PodKey::new(pod.namespace.clone(), pod.name.clone());
                self.seen(Kind::Pods, &key.namespace, &key.name);
                self.put_pod(key, Some(pod))
            }
            PolicyEvent::PodGone { namespace, name } => {
                self.put_pod(PodKey::new(namespace, name), None)
            }
            PolicyEvent::Namespace(ns) => {
                self.seen(Kind::Namespaces, &ns.name, "");
                self.namespaces.insert(ns.name, ns.labels.clone()) != Some(ns.labels)
            }
            PolicyEvent::NamespaceGone { name } => self.namespaces.remove(&name).is_some(),
            PolicyEvent::Policy(p) => {
                self.seen(Kind::Policies, &p.namespace, &p.name);
                let key = (p.namespace.clone(), p.name.clone());
                self.policies.insert(key, p.clone()).as_ref() != Some(&p)
            }
            PolicyEvent::PolicyGone { namespace, name } => {
                self.policies.remove(&(namespace, name)).is_some()
            }
            PolicyEvent::Service {
                namespace,
                name,
                addresses,
            } => {
                self.seen(Kind::Services, &namespace, &name);
                self.services.insert((namespace, name), addresses.clone()) != Some(addresses)
            }
            PolicyEvent::ServiceGone { namespace, name } => {
                self.services.remove(&(namespace, name)).is_some()
            }
            PolicyEvent::NodeAddresses(addrs) => {
                let changed = self.node_addresses != addrs;
                self.node_addresses = addrs;
                changed
            }
            PolicyEvent::Relisting(kind) => {
                self.relisting.insert(kind, HashSet::new());
                false
            }
            PolicyEvent::Listed(kind) => {
                self.listed.insert(kind);
                match self.relisting.remove(&kind) {
                    Some(seen) => self.drop_unseen(kind, &seen),
                    None => false,
                }
            }
        }
    }

    /// Whether every kind was listed at least once.
    pub(crate) fn synced(&self) -> bool {
        [Kind::Pods, Kind::Namespaces, Kind::Policies, Kind::Services]
            .iter()
            .all(|k| self.listed.contains(k))
    }

    /// The pod whose claim on `addr` is in force.
    pub(crate) fn owner(&self, addr: &IpAddr) -> Option<&PodKey> {
        self.claims.get(addr).and_then(|c| c.last())
    }

    fn seen(&mut self, kind: Kind, a: &str, b: &str) {
        if let Some(seen) = self.relisting.get_mut(&kind) {
            seen.insert((a.to_string(), b.to_string()));
        }
    }

    /// Replaces (or removes) a pod, moving its address claims.
    fn put_pod(&mut self, key: PodKey, pod: Option<PolicyPod>) -> bool {
        let old = match &pod {
            Some(p) => self.pods.insert(key.clone(), p.clone()),
            None => self.pods.remove(&key),
        };
        if old == pod {
            return false;
        }
        let (old_ips, new_ips) = (own_ips(old.as_ref()), own_ips(pod.as_ref()));
        for ip in old_ips.iter().filter(|ip| !new_ips.contains(ip)) {
            if let Some(c) = self.claims.get_mut(ip) {
                c.retain(|k| *k != key);
                if c.is_empty() {
                    self.claims.remove(ip);
                }
            }
        }
        for ip in new_ips.iter().filter(|ip| !old_ips.contains(ip)) {
            let c = self.claims.entry(*ip).or_default();
            c.retain(|k| *k != key);
            c.push(key.clone());
        }
        true
    }

    /// Drops the objects of `kind` a completed relist did not name.
    fn drop_unseen(&mut self, kind: Kind, seen: &HashSet<(String, String)>) -> bool {
        let named = |a: &str, b: &str| seen.contains(&(a.to_string(), b.to_string()));
        match kind {
            Kind::Pods => {
                let gone: Vec<PodKey> = (self.pods.keys())
                    .filter(|k| !named(&k.namespace, &k.name))
                    .cloned()
                    .collect();
                let any = !gone.is_empty();
                for k in gone {
                    self.put_pod(k, None);
                }
                any
            }
            Kind::Namespaces => {
                let before = self.namespaces.len();
                self.namespaces.retain(|n, _| named(n, ""));
                before != self.namespaces.len()
            }
            Kind::Policies => {
                let before = self.policies.len();
                self.policies.retain(|(n, m), _| named(n, m));
                before != self.policies.len()
            }
            Kind::Services => {
                let before = self.services.len();
                self.services.retain(|(n, m), _| named(n, m));
                before != self.services.len()
            }
        }
    }
}
