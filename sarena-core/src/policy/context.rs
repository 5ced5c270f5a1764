//! One compile's derived state: the pod classes (what policy selects on),
//! every address's identity and the ipcache, the rule numbers, and each
//! rule's peer identities (computed once per compile, whatever the number
//! of endpoints the rule applies to).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use ipnet::IpNet;
use sarena_common::policy::{IDENTITY_HOST, IPCACHE_F_POD, IPCACHE_F_TRANSLATED};

use super::compiled::{Direction, Identity, IdentityInfo, IpcacheEntry, PodKey, RuleId, RuleRef};
use super::identities::{Allocator, ClassKey, PodIdentityKey};
use super::model::{Peer, Policy, PolicyPod, Protocol};
use super::objects::Objects;
use super::prefixes::{PrefixIndex, host_net, longest_match};
use super::rule_ids::{PolicyRules, RuleIds};
use crate::api::Labels;

/// The peers of a rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PeerSet {
    /// Any peer (the rule names none).
    Any,
    /// These identities, sorted.
    Ids(Vec<Identity>),
}

/// A pod class and the identities of its pods' addresses.
#[derive(Debug)]
pub(crate) struct Class {
    /// What its pods share.
    pub(crate) key: Arc<ClassKey>,
    /// Its pods' address identities, sorted.
    pub(crate) identities: Vec<Identity>,
}

/// One compile's derived state.
#[derive(Debug)]
pub(crate) struct Context<'a> {
    pub(crate) objects: &'a Objects,
    /// The policies, in (namespace, name) order.
    pub(crate) policies: Vec<&'a Policy>,
    /// Their rule numbers, same order.
    pub(crate) policy_rules: Vec<PolicyRules>,
    /// Policy positions by namespace.
    pub(crate) policies_by_ns: HashMap<&'a str, Vec<usize>>,
    pub(crate) classes: Vec<Class>,
    class_index: HashMap<Arc<ClassKey>, usize>,
    classes_by_ns: HashMap<String, Vec<usize>>,
    /// Class of each pod (host-network pods excluded).
    pub(crate) pod_class: HashMap<&'a PodKey, usize>,
    /// Class of each pod address identity.
    pub(crate) identity_class: HashMap<Identity, usize>,
    identity_prefixes: HashMap<Identity, Arc<[IpNet]>>,
    pod_ids_by_prefix: HashMap<IpNet, Vec<Identity>>,
    /// Pod identities having each named port: (name, protocol) → (identity, port).
    pub(crate) named_index: HashMap<(String, Protocol), Vec<(Identity, u16)>>,
    prefix_ids: BTreeMap<IpNet, Identity>,
    pub(crate) ipcache: BTreeMap<IpNet, IpcacheEntry>,
    pub(crate) identities: BTreeMap<Identity, IdentityInfo>,
    pub(crate) rules: BTreeMap<RuleId, RuleRef>,
    peer_cache: HashMap<(usize, Direction, usize), Arc<PeerSet>>,
}

/// The class key of a pod.
pub(crate) fn class_key(pod: &PolicyPod) -> ClassKey {
    let mut named_ports = pod.named_ports.clone();
    named_ports.sort();
    named_ports.dedup();
    ClassKey {
        namespace: pod.namespace.clone(),
        labels: pod.labels.clone(),
        named_ports,
    }
}

/// Every prefix the policies' `ipBlock`s name (cidrs and excepts).
fn policy_prefixes<'a>(policies: impl Iterator<Item = &'a Policy>) -> BTreeSet<IpNet> {
    let mut out = BTreeSet::new();
    for p in policies {
        for rule in p.ingress.iter().chain(&p.egress) {
            for peer in &rule.peers {
                if let Peer::IpBlock { cidr, except } = peer {
                    out.insert(cidr.trunc());
                    out.extend(except.iter().map(IpNet::trunc));
                }
            }
        }
    }
    out
}

static NO_LABELS: Labels = Labels::new();

impl<'a> Context<'a> {
    /// Derives one compile's state from `objects`, allocating identities
    /// and rule numbers (and forgetting the ones no longer used).
    pub(crate) fn build(
        objects: &'a Objects,
        alloc: &mut Allocator,
        rule_ids: &mut RuleIds,
    ) -> Self {
        let policies: Vec<&Policy> = objects.policies.values().collect();
        let (policy_rules, rules) = rule_ids.assign(policies.iter().copied());
        let mut policies_by_ns: HashMap<&str, Vec<usize>> = HashMap::new();
        for (i, p) in policies.iter().enumerate() {
            policies_by_ns
                .entry(p.namespace.as_str())
                .or_default()
                .push(i);
        }
        let mut cx = Context {
            objects,
            policies,
            policy_rules,
            policies_by_ns,
            classes: Vec::new(),
            class_index: HashMap::new(),
            classes_by_ns: HashMap::new(),
            pod_class: HashMap::new(),
            identity_class: HashMap::new(),
            identity_prefixes: HashMap::new(),
            pod_ids_by_prefix: HashMap::new(),
            named_index: HashMap::new(),
            prefix_ids: BTreeMap::new(),
            ipcache: BTreeMap::new(),
            identities: BTreeMap::new(),
            rules,
            peer_cache: HashMap::new(),
        };
        let mut used = HashSet::new();
        cx.add_prefixes(alloc, &mut used);
        cx.add_pods(alloc, &mut used);
        cx.add_services_and_node();
        alloc.retain(&used);
        cx
    }

    /// Policy prefixes and the two default routes: ipcache entries of
    /// their own identities.
    fn add_prefixes(&mut self, alloc: &mut Allocator, used: &mut HashSet<Identity>) {
        let mut nets = policy_prefixes(self.policies.iter().copied());
        for all in ["0.0.0.0/0", "::/0"] {
            if let Ok(net) = all.parse::<IpNet>() {
                nets.insert(net);
            }
        }
        for net in nets {
            let id = alloc.prefix(net);
            used.insert(id);
            self.prefix_ids.insert(net, id);
            self.ipcache.insert(
                net,
                IpcacheEntry {
                    identity: id,
                    flags: 0,
                },
            );
            self.identities.insert(id, IdentityInfo::Prefix(net));
        }
    }

    /// Every pod's class, and an identity for each address it holds.
    fn add_pods(&mut self, alloc: &mut Allocator, used: &mut HashSet<Identity>) {
        let objects = self.objects;
        let mut index = PrefixIndex::default();
        for p in policy_prefixes(self.policies.iter().copied()) {
            index.insert(p);
        }
        for (key, pod) in objects.pods.iter().filter(|(_, p)| !p.host_network) {
            let class = self.intern(pod);
            self.pod_class.insert(key, class);
            for ip in &pod.ips {
                if objects.owner(ip) != Some(key) {
                    continue;
                }
                let prefixes: Arc<[IpNet]> = Arc::from(index.containing(*ip));
                let ikey = PodIdentityKey {
                    class: self.classes[class].key.clone(),
                    prefixes: prefixes.clone(),
                };
                let id = alloc.pod(&ikey);
                self.ipcache.insert(
                    host_net(*ip),
                    IpcacheEntry {
                        identity: id,
                        flags: IPCACHE_F_POD,
                    },
                );
                if !used.insert(id) {
                    continue;
                }
                self.classes[class].identities.push(id);
                self.identity_class.insert(id, class);
                for p in prefixes.iter() {
                    self.pod_ids_by_prefix.entry(*p).or_default().push(id);
                }
                self.identity_prefixes.insert(id, prefixes);
                for np in &self.classes[class].key.named_ports {
                    let k = (np.name.clone(), np.protocol);
                    self.named_index.entry(k).or_default().push((id, np.port));
                }
                self.identities.insert(
                    id,
                    IdentityInfo::Pods {
                        namespace: pod.namespace.clone(),
                        labels: pod.labels.clone(),
                    },
                );
            }
        }
        for class in &mut self.classes {
            class.identities.sort_unstable();
        }
    }

    /// Service addresses (what they would otherwise be, translated) and
    /// this node's addresses (the host, translated).
    fn add_services_and_node(&mut self) {
        for addr in self.objects.services.values().flatten() {
            let net = host_net(*addr);
            if let Some(e) = self.ipcache.get_mut(&net) {
                e.flags |= IPCACHE_F_TRANSLATED;
                continue;
            }
            if let Some(e) = longest_match(&self.ipcache, *addr).copied() {
                let entry = IpcacheEntry {
                    identity: e.identity,
                    flags: IPCACHE_F_TRANSLATED,
                };
                self.ipcache.insert(net, entry);
            }
        }
        for addr in &self.objects.node_addresses {
            let entry = IpcacheEntry {
                identity: IDENTITY_HOST,
                flags: IPCACHE_F_TRANSLATED,
            };
            self.ipcache.insert(host_net(*addr), entry);
        }
    }

    /// The class of `pod`, created when new.
    fn intern(&mut self, pod: &PolicyPod) -> usize {
        let key = class_key(pod);
        if let Some(i) = self.class_index.get(&key) {
            return *i;
        }
        let key = Arc::new(key);
        let i = self.classes.len();
        self.classes.push(Class {
            key: key.clone(),
            identities: Vec::new(),
        });
        self.classes_by_ns
            .entry(key.namespace.clone())
            .or_default()
            .push(i);
        self.class_index.insert(key, i);
        i
    }

    /// The labels of namespace `name` (none when not seen).
    fn namespace_labels(&self, name: &str) -> &Labels {
        self.objects.namespaces.get(name).unwrap_or(&NO_LABELS)
    }

    /// The peers of rule `index` of `direction` of policy `policy`.
    pub(crate) fn peer_set(
        &mut self,
        policy: usize,
        direction: Direction,
        index: usize,
    ) -> Arc<PeerSet> {
        if let Some(set) = self.peer_cache.get(&(policy, direction, index)) {
            return set.clone();
        }
        let p = self.policies[policy];
        let rules = match direction {
            Direction::Ingress => &p.ingress,
            Direction::Egress => &p.egress,
        };
        let set = match rules.get(index) {
            Some(rule) if rule.peers.is_empty() => PeerSet::Any,
            Some(rule) => {
                let mut ids = BTreeSet::new();
                for peer in &rule.peers {
                    self.peer_ids(p, peer, &mut ids);
                }
                PeerSet::Ids(ids.into_iter().collect())
            }
            None => PeerSet::Ids(Vec::new()),
        };
        let set = Arc::new(set);
        self.peer_cache
            .insert((policy, direction, index), set.clone());
        set
    }

    /// Adds the identities `peer` (of policy `p`) selects to `out`.
    fn peer_ids(&self, p: &Policy, peer: &Peer, out: &mut BTreeSet<Identity>) {
        match peer {
            Peer::Pods { pods, namespaces } => {
                let mut add = |classes: &[usize]| {
                    for c in classes.iter().map(|i| &self.classes[*i]) {
                        if pods.as_ref().is_none_or(|s| s.matches(&c.key.labels)) {
                            out.extend(c.identities.iter().copied());
                        }
                    }
                };
                match namespaces {
                    None => {
                        if let Some(classes) = self.classes_by_ns.get(&p.namespace) {
                            add(classes);
                        }
                    }
                    Some(sel) => {
                        for (ns, classes) in &self.classes_by_ns {
                            if sel.matches(self.namespace_labels(ns)) {
                                add(classes);
                            }
                        }
                    }
                }
            }
            Peer::IpBlock { cidr, except } => {
                let cidr = cidr.trunc();
                let except: Vec<IpNet> = except.iter().map(IpNet::trunc).collect();
                // An address's longest policy prefix P is in the block when
                // the cidr contains P and no except does.
                for (net, id) in &self.prefix_ids {
                    if cidr.contains(net) && !except.iter().any(|e| e.contains(net)) {
                        out.insert(*id);
                    }
                }
                // A pod address is in it when its prefixes name the cidr
                // and no except.
                for id in self.pod_ids_by_prefix.get(&cidr).into_iter().flatten() {
                    let prefixes = self
                        .identity_prefixes
                        .get(id)
                        .map(|p| &p[..])
                        .unwrap_or(&[]);
                    if !except.iter().any(|e| prefixes.contains(e)) {
                        out.insert(*id);
                    }
                }
            }
        }
    }
}
