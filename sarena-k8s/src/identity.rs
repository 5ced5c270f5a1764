//! [`watch_identity`]: the Pods on this node and every Namespace, watched
//! metadata-only, reduced to what pod identity needs and handed to
//! `sarena_core::identity` as [`IdentityEvent`]s. Nothing from the API
//! server is trusted: an object without a name is skipped, labels are
//! bounded ([`sarena_core::api::bound_labels`]) before they are kept.

use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::PartialObjectMeta;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use sarena_core::api::bound_labels;
use sarena_core::identity::{IdentityEvent, NamespaceMeta, PodMeta};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::forward::forward;

/// Watches the Pods scheduled to `node_name` (field selector
/// `spec.nodeName`) and the Namespaces through `client`, sending what
/// identity needs to `events`. The task runs until `events` is closed.
pub fn watch_identity(
    client: Client,
    node_name: &str,
    events: mpsc::Sender<IdentityEvent>,
) -> JoinHandle<()> {
    let pods: Api<PartialObjectMeta<Pod>> = Api::all(client.clone());
    let namespaces: Api<PartialObjectMeta<Namespace>> = Api::all(client);
    let on_node = watcher::Config::default().fields(&format!("spec.nodeName={node_name}"));
    let pods = watcher(pods, on_node).default_backoff();
    let namespaces = watcher(namespaces, watcher::Config::default()).default_backoff();
    let pod_events = events.clone();
    tokio::spawn(async move {
        let pods = forward("the Pod objects", pods, pod_event, pod_events);
        let namespaces = forward("the Namespace objects", namespaces, namespace_event, events);
        tokio::join!(pods, namespaces);
    })
}

/// A Pod watch event as identity sees it (`None`: nothing to tell).
pub fn pod_event(event: watcher::Event<PartialObjectMeta<Pod>>) -> Option<IdentityEvent> {
    match event {
        watcher::Event::Init => Some(IdentityEvent::PodsRelisted),
        watcher::Event::InitApply(p) | watcher::Event::Apply(p) => {
            pod_meta(&p.metadata).map(IdentityEvent::Pod)
        }
        watcher::Event::Delete(p) => pod_meta(&p.metadata).map(|m| IdentityEvent::PodGone {
            namespace: m.namespace,
            name: m.name,
        }),
        watcher::Event::InitDone => Some(IdentityEvent::Resync),
    }
}

/// A Namespace watch event as identity sees it (`None`: nothing to tell).
pub fn namespace_event(
    event: watcher::Event<PartialObjectMeta<Namespace>>,
) -> Option<IdentityEvent> {
    match event {
        watcher::Event::Init => Some(IdentityEvent::NamespacesRelisted),
        watcher::Event::InitApply(n) | watcher::Event::Apply(n) => {
            namespace_meta(&n.metadata).map(IdentityEvent::Namespace)
        }
        watcher::Event::Delete(n) => {
            namespace_meta(&n.metadata).map(|m| IdentityEvent::NamespaceGone { name: m.name })
        }
        watcher::Event::InitDone => Some(IdentityEvent::Resync),
    }
}

/// What identity keeps of a Pod's metadata; `None` without a namespace or a name.
pub fn pod_meta(meta: &ObjectMeta) -> Option<PodMeta> {
    Some(PodMeta {
        namespace: meta.namespace.clone().filter(|n| !n.is_empty())?,
        name: meta.name.clone().filter(|n| !n.is_empty())?,
        uid: meta.uid.clone().unwrap_or_default(),
        labels: meta.labels.as_ref().map(bound_labels).unwrap_or_default(),
    })
}

/// What identity keeps of a Namespace's metadata; `None` without a name.
pub fn namespace_meta(meta: &ObjectMeta) -> Option<NamespaceMeta> {
    Some(NamespaceMeta {
        name: meta.name.clone().filter(|n| !n.is_empty())?,
        labels: meta.labels.as_ref().map(bound_labels).unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use sarena_core::api::MAX_LABELS;

    use super::*;

    fn meta(json: serde_json::Value) -> ObjectMeta {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn a_pod_keeps_its_names_uid_and_bounded_labels() {
        let labels: serde_json::Map<String, serde_json::Value> = (0..100)
            .map(|i| (format!("k{i:03}"), serde_json::Value::from("v")))
            .collect();
        let m = meta(serde_json::json!({
            "namespace": "ns", "name": "web-1", "uid": "u1", "labels": labels,
            "annotations": {"big": "ignored"}
        }));
        let p = pod_meta(&m).unwrap();
        assert_eq!(
            (p.namespace.as_str(), p.name.as_str(), p.uid.as_str()),
            ("ns", "web-1", "u1")
        );
        assert_eq!(p.labels.len(), MAX_LABELS);
        assert!(pod_meta(&meta(serde_json::json!({"name": "no-namespace"}))).is_none());
        assert!(pod_meta(&meta(serde_json::json!({"namespace": "ns", "name": ""}))).is_none());
    }

    #[test]
    fn watch_events_map_to_identity_events() {
        let pod = |json| PartialObjectMeta::<Pod> {
            metadata: meta(json),
            ..Default::default()
        };
        assert_eq!(
            pod_event(watcher::Event::Init),
            Some(IdentityEvent::PodsRelisted)
        );
        assert_eq!(
            pod_event(watcher::Event::InitDone),
            Some(IdentityEvent::Resync)
        );
        assert_eq!(
            pod_event(watcher::Event::Delete(pod(
                serde_json::json!({"namespace": "ns", "name": "p"})
            ))),
            Some(IdentityEvent::PodGone {
                namespace: "ns".into(),
                name: "p".into()
            })
        );
        assert_eq!(
            pod_event(watcher::Event::Apply(pod(serde_json::json!({})))),
            None
        );
        let ns = PartialObjectMeta::<Namespace> {
            metadata: meta(serde_json::json!({"name": "ns", "labels": {"team": "a"}})),
            ..Default::default()
        };
        match namespace_event(watcher::Event::Apply(ns)) {
            Some(IdentityEvent::Namespace(n)) => {
                assert_eq!(n.name, "ns");
                assert_eq!(n.labels.get("team").map(String::as_str), Some("a"));
            }
            other => panic!("{other:?}"),
        }
    }
}
