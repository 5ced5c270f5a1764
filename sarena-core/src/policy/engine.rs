//! [`PolicyEngine`]: keeps the pods, namespaces, policies and Service
//! addresses it is told of ([`PolicyEvent`]) and compiles them into a
//! [`CompiledPolicy`].

use std::collections::HashMap;

use super::compiled::{CompiledPolicy, EndpointPolicy, Identity, PodKey};
use super::context::{Context, class_key};
use super::events::PolicyEvent;
use super::identities::Allocator;
use super::objects::Objects;
use super::rule_ids::RuleIds;

/// The policy engine of one node.
#[derive(Debug)]
pub struct PolicyEngine {
    node: String,
    objects: Objects,
    alloc: Allocator,
    rule_ids: RuleIds,
}

impl PolicyEngine {
    /// An engine for node `node`, allocating identities from
    /// `first_identity` (never below the reserved ones).
    pub fn new(node: impl Into<String>, first_identity: Identity) -> Self {
        PolicyEngine {
            node: node.into(),
            objects: Objects::default(),
            alloc: Allocator::new(first_identity),
            rule_ids: RuleIds::default(),
        }
    }

    /// Takes an event; returns whether the compiled output may change.
    pub fn handle(&mut self, event: PolicyEvent) -> bool {
        self.objects.apply(event)
    }

    /// Pods, Namespaces, Policies and Services each listed at least once.
    pub fn synced(&self) -> bool {
        self.objects.synced()
    }

    /// The whole output: the ipcache; the endpoints (every pod of this node
    /// not on the host network, selected or not); the rules; the identities.
    pub fn compile(&mut self) -> CompiledPolicy {
        let mut cx = Context::build(&self.objects, &mut self.alloc, &mut self.rule_ids);
        let mut by_class: HashMap<usize, EndpointPolicy> = HashMap::new();
        let mut endpoints = std::collections::BTreeMap::new();
        let local = (self.objects.pods.iter())
            .filter(|(_, p)| p.node == self.node && !p.host_network)
            .filter_map(|(k, _)| cx.pod_class.get(k).map(|c| (k, *c)))
            .collect::<Vec<_>>();
        for (key, class) in local {
            let policy = match by_class.get(&class) {
                Some(p) => p.clone(),
                None => {
                    let ck = cx.classes[class].key.clone();
                    let p = cx.class_policy(&ck);
                    by_class.insert(class, p.clone());
                    p
                }
            };
            endpoints.insert(key.clone(), policy);
        }
        CompiledPolicy {
            ipcache: std::mem::take(&mut cx.ipcache),
            endpoints,
            rules: std::mem::take(&mut cx.rules),
            identities: std::mem::take(&mut cx.identities),
        }
    }

    /// Any known pod's compiled policy (for explanations of remote pods);
    /// identities as [`PolicyEngine::compile`] numbers them.
    pub fn endpoint_policy(&mut self, pod: &PodKey) -> Option<EndpointPolicy> {
        let p = self.objects.pods.get(pod)?;
        let mut cx = Context::build(&self.objects, &mut self.alloc, &mut self.rule_ids);
        Some(cx.class_policy(&class_key(p)))
    }

    /// The next identity to allocate (the dataplane persists nothing; at
    /// restart the daemon passes max(identity in pinned ipcache)+1).
    pub fn next_identity(&self) -> Identity {
        self.alloc.next()
    }

    /// A known pod (for explanations).
    pub(crate) fn pod(&self, key: &PodKey) -> Option<&super::model::PolicyPod> {
        self.objects.pods.get(key)
    }
}
