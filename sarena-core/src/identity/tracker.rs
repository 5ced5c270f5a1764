//! [`IdentityTracker`]: pods and namespaces seen → endpoint identities.

use std::collections::HashMap;

use super::{IdentityError, IdentityEvent, IdentityRegistry, MAX_NAME_LEN, NamespaceMeta, PodMeta};
use crate::api::{Attachment, Endpoint, Labels, PodIdentity, bound_labels};
use crate::dataplane::{NodeUpdate, NodeUpdates};

/// A pod as kept: its uid and bounded labels.
#[derive(Debug, Clone)]
struct KnownPod {
    uid: String,
    labels: Labels,
}

/// The pods on this node and the namespaces, as far as identity needs them
/// (bounded: at most [`crate::api::MAX_LABELS`] labels each, names of at
/// most [`MAX_NAME_LEN`] bytes), and the logic that turns their changes
/// into registry updates. Driven by one task; see the [module docs](super).
#[derive(Debug, Default)]
pub struct IdentityTracker {
    pods: HashMap<(String, String), KnownPod>,
    namespaces: HashMap<String, Labels>,
}

fn name_ok(name: &str) -> bool {
    !name.is_empty() && name.len() <= MAX_NAME_LEN
}

impl IdentityTracker {
    /// Knows nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes `event` into account: records each endpoint whose identity
    /// changes in `registry`, then pushes it to `dataplane` (a dataplane
    /// error is logged: the registry holds the truth, and the next change
    /// or start-up brings the dataplane up to date). Returns the owners
    /// whose identity changed.
    pub async fn handle(
        &mut self,
        event: IdentityEvent,
        registry: &dyn IdentityRegistry,
        dataplane: &dyn NodeUpdates,
    ) -> Result<Vec<Attachment>, IdentityError> {
        let affected: Vec<Endpoint> = match event {
            IdentityEvent::Pod(pod) => {
                if !self.learn_pod(&pod) {
                    return Ok(Vec::new());
                }
                registry
                    .endpoints()?
                    .into_iter()
                    .filter(|ep| matches_pod(ep, &pod.namespace, &pod.name))
                    .collect()
            }
            IdentityEvent::PodGone { namespace, name } => {
                self.pods.remove(&(namespace, name));
                return Ok(Vec::new());
            }
            IdentityEvent::PodsRelisted => {
                self.pods.clear();
                return Ok(Vec::new());
            }
            IdentityEvent::Namespace(ns) => {
                if !name_ok(&ns.name) {
                    return Ok(Vec::new());
                }
                let labels = bound_labels(&ns.labels);
                if self.namespaces.get(&ns.name) == Some(&labels) {
                    return Ok(Vec::new());
                }
                let NamespaceMeta { name, .. } = ns;
                self.namespaces.insert(name.clone(), labels);
                registry
                    .endpoints()?
                    .into_iter()
                    .filter(|ep| ep.spec.pod.namespace.as_deref() == Some(name.as_str()))
                    .collect()
            }
            IdentityEvent::NamespaceGone { name } => {
                self.namespaces.remove(&name);
                return Ok(Vec::new());
            }
            IdentityEvent::NamespacesRelisted => {
                self.namespaces.clear();
                return Ok(Vec::new());
            }
            IdentityEvent::Registered(owner) => registry.endpoint(&owner)?.into_iter().collect(),
            IdentityEvent::Resync => registry.endpoints()?,
        };
        let mut changed = Vec::new();
        for ep in affected {
            let Some(identity) = self.identity_of(&ep) else {
                continue;
            };
            if identity == ep.spec.identity {
                continue;
            }
            let Some(updated) = registry.set_identity(&ep.spec.owner, &identity)? else {
                continue;
            };
            let update = NodeUpdate::Identity {
                owner: updated.spec.owner.clone(),
                addresses: updated.spec.addresses.clone(),
                identity,
            };
            if let Err(e) = dataplane.apply(&update).await {
                tracing::warn!(owner = ?updated.spec.owner, error = %crate::error_chain(&e), "dataplane identity update failed");
            }
            changed.push(updated.spec.owner);
        }
        Ok(changed)
    }

    /// Records `pod`; false when it is unusable (bad names) or unchanged.
    fn learn_pod(&mut self, pod: &PodMeta) -> bool {
        if !name_ok(&pod.namespace) || !name_ok(&pod.name) || pod.uid.len() > MAX_NAME_LEN {
            return false;
        }
        let known = KnownPod {
            uid: pod.uid.clone(),
            labels: bound_labels(&pod.labels),
        };
        let key = (pod.namespace.clone(), pod.name.clone());
        if let Some(old) = self.pods.get(&key)
            && old.uid == known.uid
            && old.labels == known.labels
        {
            return false;
        }
        self.pods.insert(key, known);
        true
    }

    /// What `ep` should carry: `None` while its pod is unknown (or is
    /// another pod of the same name: the uids differ).
    fn identity_of(&self, ep: &Endpoint) -> Option<PodIdentity> {
        let namespace = ep.spec.pod.namespace.as_ref()?;
        let name = ep.spec.pod.name.as_ref()?;
        let pod = self.pods.get(&(namespace.clone(), name.clone()))?;
        if let Some(uid) = ep.spec.pod.uid.as_deref()
            && !uid.is_empty()
            && !pod.uid.is_empty()
            && uid != pod.uid
        {
            return None;
        }
        Some(PodIdentity {
            labels: pod.labels.clone(),
            namespace_labels: self.namespaces.get(namespace).cloned().unwrap_or_default(),
        })
    }
}

fn matches_pod(ep: &Endpoint, namespace: &str, name: &str) -> bool {
    ep.spec.pod.namespace.as_deref() == Some(namespace) && ep.spec.pod.name.as_deref() == Some(name)
}
