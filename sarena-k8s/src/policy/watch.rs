//! [`watch_policy`]: every Pod, Namespace, NetworkPolicy and Service,
//! watched (never polled) and translated to [`PolicyEvent`]s. No store is
//! kept here (no reflector): each object is reduced as it arrives, so
//! memory is the engine's, not a copy of the cluster's objects.

use k8s_openapi::api::core::v1::{Namespace, Pod, Service};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::PartialObjectMeta;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use sarena_core::policy::{Kind, PolicyEvent};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::network_policy::network_policy;
use super::objects::{policy_namespace, policy_pod, service_addresses};
use crate::forward::forward;

/// Watches the Pods of every node, the Namespaces (metadata only), the
/// NetworkPolicies and the Services through `client`, sending what policy
/// needs to `events`. The task runs until `events` is closed.
pub fn watch_policy(client: Client, events: mpsc::Sender<PolicyEvent>) -> JoinHandle<()> {
    let config = watcher::Config::default;
    let pods = watcher(Api::<Pod>::all(client.clone()), config()).default_backoff();
    let namespaces = watcher(
        Api::<PartialObjectMeta<Namespace>>::all(client.clone()),
        config(),
    )
    .default_backoff();
    let policies = watcher(Api::<NetworkPolicy>::all(client.clone()), config()).default_backoff();
    let services = watcher(Api::<Service>::all(client), config()).default_backoff();
    tokio::spawn(async move {
        tokio::join!(
            forward(
                "the Pod objects for policy",
                pods,
                pod_event,
                events.clone()
            ),
            forward(
                "the Namespace objects for policy",
                namespaces,
                namespace_event,
                events.clone()
            ),
            forward(
                "the NetworkPolicy objects",
                policies,
                policy_event,
                events.clone()
            ),
            forward(
                "the Service objects for policy",
                services,
                service_event,
                events
            ),
        );
    })
}

/// The list markers of `event`, or the translation of its object.
fn translated<K>(
    kind: Kind,
    event: watcher::Event<K>,
    applied: impl FnOnce(K) -> Option<PolicyEvent>,
    gone: impl FnOnce(K) -> Option<PolicyEvent>,
) -> Option<PolicyEvent> {
    match event {
        watcher::Event::Init => Some(PolicyEvent::Relisting(kind)),
        watcher::Event::InitApply(o) | watcher::Event::Apply(o) => applied(o),
        watcher::Event::Delete(o) => gone(o),
        watcher::Event::InitDone => Some(PolicyEvent::Listed(kind)),
    }
}

/// A Pod watch event as policy sees it (`None`: nothing to tell).
pub fn pod_event(event: watcher::Event<Pod>) -> Option<PolicyEvent> {
    translated(
        Kind::Pods,
        event,
        |p| policy_pod(&p).map(PolicyEvent::Pod),
        |p| {
            Some(PolicyEvent::PodGone {
                namespace: p.metadata.namespace.filter(|n| !n.is_empty())?,
                name: p.metadata.name.filter(|n| !n.is_empty())?,
            })
        },
    )
}

/// A Namespace watch event as policy sees it (`None`: nothing to tell).
pub fn namespace_event(event: watcher::Event<PartialObjectMeta<Namespace>>) -> Option<PolicyEvent> {
    translated(
        Kind::Namespaces,
        event,
        |n| policy_namespace(&n.metadata).map(PolicyEvent::Namespace),
        |n| policy_namespace(&n.metadata).map(|n| PolicyEvent::NamespaceGone { name: n.name }),
    )
}

/// A NetworkPolicy watch event as policy sees it (`None`: nothing to
/// tell); what its conversion dropped is logged with the policy's name.
pub fn policy_event(event: watcher::Event<NetworkPolicy>) -> Option<PolicyEvent> {
    translated(
        Kind::Policies,
        event,
        |np| {
            let (policy, warnings) = network_policy(&np)?;
            for w in &warnings {
                tracing::warn!(
                    policy = %format!("{}/{}", policy.namespace, policy.name),
                    field = %w.field,
                    "NetworkPolicy: {}", w.problem
                );
            }
            Some(PolicyEvent::Policy(policy))
        },
        |np| {
            Some(PolicyEvent::PolicyGone {
                namespace: np.metadata.namespace.filter(|n| !n.is_empty())?,
                name: np.metadata.name.filter(|n| !n.is_empty())?,
            })
        },
    )
}

/// A Service watch event as policy sees it (`None`: nothing to tell).
pub fn service_event(event: watcher::Event<Service>) -> Option<PolicyEvent> {
    translated(
        Kind::Services,
        event,
        |s| {
            let (namespace, name, addresses) = service_addresses(&s)?;
            Some(PolicyEvent::Service {
                namespace,
                name,
                addresses,
            })
        },
        |s| {
            Some(PolicyEvent::ServiceGone {
                namespace: s.metadata.namespace.filter(|n| !n.is_empty())?,
                name: s.metadata.name.filter(|n| !n.is_empty())?,
            })
        },
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn object<K: serde::de::DeserializeOwned>(value: serde_json::Value) -> K {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn list_markers_become_relisting_and_listed_of_their_kind() {
        assert_eq!(
            pod_event(watcher::Event::Init),
            Some(PolicyEvent::Relisting(Kind::Pods))
        );
        assert_eq!(
            pod_event(watcher::Event::InitDone),
            Some(PolicyEvent::Listed(Kind::Pods))
        );
        assert_eq!(
            namespace_event(watcher::Event::Init),
            Some(PolicyEvent::Relisting(Kind::Namespaces))
        );
        assert_eq!(
            policy_event(watcher::Event::InitDone),
            Some(PolicyEvent::Listed(Kind::Policies))
        );
        assert_eq!(
            service_event(watcher::Event::Init),
            Some(PolicyEvent::Relisting(Kind::Services))
        );
    }

    #[test]
    fn objects_and_their_deletion_are_translated_and_nameless_ones_skipped() {
        let meta = json!({"metadata": {"namespace": "ns", "name": "x"}});
        assert!(matches!(
            pod_event(watcher::Event::InitApply(object(meta.clone()))),
            Some(PolicyEvent::Pod(p)) if p.name == "x"
        ));
        assert_eq!(
            pod_event(watcher::Event::Delete(object(meta.clone()))),
            Some(PolicyEvent::PodGone {
                namespace: "ns".into(),
                name: "x".into()
            })
        );
        assert!(matches!(
            policy_event(watcher::Event::Apply(object(meta.clone()))),
            Some(PolicyEvent::Policy(p)) if p.name == "x" && p.ingress_isolation
        ));
        assert_eq!(
            policy_event(watcher::Event::Delete(object(meta.clone()))),
            Some(PolicyEvent::PolicyGone {
                namespace: "ns".into(),
                name: "x".into()
            })
        );
        assert_eq!(
            service_event(watcher::Event::Delete(object(meta))),
            Some(PolicyEvent::ServiceGone {
                namespace: "ns".into(),
                name: "x".into()
            })
        );
        let ns = PartialObjectMeta::<Namespace> {
            metadata: object(json!({"name": "prod"})),
            ..Default::default()
        };
        assert_eq!(
            namespace_event(watcher::Event::Delete(ns)),
            Some(PolicyEvent::NamespaceGone {
                name: "prod".into()
            })
        );
        let nameless = json!({"metadata": {"namespace": "ns"}});
        assert_eq!(
            pod_event(watcher::Event::Apply(object(nameless.clone()))),
            None
        );
        assert_eq!(
            policy_event(watcher::Event::Delete(object(nameless.clone()))),
            None
        );
        assert_eq!(service_event(watcher::Event::Apply(object(nameless))), None);
    }
}
