//! [`KubeClusterApi`]: what Sarena tells the API server — the Node's
//! `NetworkUnavailable` condition and Warning Events on the Node.

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Event, EventSource, Node, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use sarena_core::cluster::{ClusterApi, ClusterError, ClusterNode};

/// The condition's reason.
pub const CONDITION_REASON: &str = "SarenaIsUp";

/// The namespace of Node events (where kubelet puts its own).
const EVENT_NAMESPACE: &str = "default";

/// The component named in Events.
const COMPONENT: &str = "sarena-daemon";

/// The strategic-merge patch of `nodes/status` that sets
/// `NetworkUnavailable=False` (conditions merge by `type`, so the others
/// stay as they are).
pub fn network_available_patch(now: Timestamp) -> serde_json::Value {
    let now = Time(now);
    serde_json::json!({
        "status": {
            "conditions": [{
                "type": "NetworkUnavailable",
                "status": "False",
                "reason": CONDITION_REASON,
                "message": "Sarena is running on this node: pod gateway and routes to the other nodes in place",
                "lastTransitionTime": now,
                "lastHeartbeatTime": now,
            }]
        }
    })
}

/// The strategic-merge patch of `nodes/status` that deletes the
/// `NetworkUnavailable` condition (conditions merge by `type`; `$patch:
/// delete` removes the entry whose `type` matches, the others stay).
pub fn network_condition_delete_patch(resource_version: Option<&str>) -> serde_json::Value {
    let mut patch = serde_json::json!({
        "status": {
            "conditions": [{"$patch": "delete", "type": "NetworkUnavailable"}]
        }
    });
    if let Some(version) = resource_version {
        // Conditional: the API server refuses it (409) if the Node changed
        // since it was read, so a condition someone else set in between is
        // never deleted; the uninstall then tries again.
        patch["metadata"] = serde_json::json!({ "resourceVersion": version });
    }
    patch
}

/// Whether `node`'s `NetworkUnavailable` condition is Sarena's (reason
/// [`CONDITION_REASON`]), the only one the uninstall deletes: another
/// reason belongs to a cloud route controller or the next CNI.
pub fn network_condition_is_sarenas(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|status| status.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "NetworkUnavailable" && c.reason.as_deref() == Some(CONDITION_REASON))
}

/// A Warning Event about `node`.
pub fn event_for(node: &ClusterNode, reason: &str, message: &str, now: Timestamp) -> Event {
    let now = Time(now);
    Event {
        metadata: ObjectMeta {
            generate_name: Some(format!("{}.sarena-", node.name)),
            namespace: Some(EVENT_NAMESPACE.to_owned()),
            ..ObjectMeta::default()
        },
        involved_object: ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Node".into()),
            name: Some(node.name.clone()),
            uid: Some(node.uid.clone()).filter(|u| !u.is_empty()),
            ..ObjectReference::default()
        },
        reason: Some(reason.to_owned()),
        message: Some(message.to_owned()),
        type_: Some("Warning".into()),
        source: Some(EventSource {
            component: Some(COMPONENT.into()),
            host: Some(node.name.clone()),
        }),
        reporting_component: Some(COMPONENT.into()),
        reporting_instance: Some(node.name.clone()),
        first_timestamp: Some(now.clone()),
        last_timestamp: Some(now),
        count: Some(1),
        ..Event::default()
    }
}

/// [`ClusterApi`] over a kube client.
#[derive(Clone)]
pub struct KubeClusterApi {
    client: Client,
}

impl std::fmt::Debug for KubeClusterApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeClusterApi").finish_non_exhaustive()
    }
}

impl KubeClusterApi {
    /// Talks through `client`.
    pub fn new(client: Client) -> Self {
        KubeClusterApi { client }
    }
}

fn api_error(call: &'static str, object: &str) -> impl FnOnce(kube::Error) -> ClusterError + use<> {
    let object = object.to_owned();
    move |source| ClusterError::Api {
        call,
        object,
        source: Box::new(source),
    }
}

#[async_trait]
impl ClusterApi for KubeClusterApi {
    async fn mark_network_available(&self, node: &str) -> Result<(), ClusterError> {
        let nodes: Api<Node> = Api::all(self.client.clone());
        nodes
            .patch_status(
                node,
                &PatchParams::default(),
                &Patch::Strategic(network_available_patch(Timestamp::now())),
            )
            .await
            .map_err(api_error("patch nodes/status", node))?;
        Ok(())
    }

    async fn clear_network_condition(&self, node: &str) -> Result<bool, ClusterError> {
        let nodes: Api<Node> = Api::all(self.client.clone());
        // `list` with a field selector: the ClusterRole grants no `get`.
        let params = ListParams::default().fields(&format!("metadata.name={node}"));
        let found = nodes
            .list(&params)
            .await
            .map_err(api_error("list nodes", node))?;
        let Some(found) = found.items.first() else {
            return Err(ClusterError::NoSuchNode {
                node: node.to_owned(),
            });
        };
        if !network_condition_is_sarenas(found) {
            return Ok(false);
        }
        let version = found.metadata.resource_version.as_deref();
        nodes
            .patch_status(
                node,
                &PatchParams::default(),
                &Patch::Strategic(network_condition_delete_patch(version)),
            )
            .await
            .map_err(api_error("patch nodes/status", node))?;
        Ok(true)
    }

    async fn warn(
        &self,
        node: &ClusterNode,
        reason: &str,
        message: &str,
    ) -> Result<(), ClusterError> {
        let events: Api<Event> = Api::namespaced(self.client.clone(), EVENT_NAMESPACE);
        events
            .create(
                &PostParams::default(),
                &event_for(node, reason, message, Timestamp::now()),
            )
            .await
            .map_err(api_error("create events", &node.name))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at() -> Timestamp {
        "2026-05-01T12:00:00Z".parse().unwrap()
    }

    #[test]
    fn the_patch_sets_only_network_unavailable_false_with_sarenas_reason() {
        let patch = network_available_patch(at());
        assert_eq!(
            patch,
            serde_json::json!({"status": {"conditions": [{
                "type": "NetworkUnavailable",
                "status": "False",
                "reason": "SarenaIsUp",
                "message": "Sarena is running on this node: pod gateway and routes to the other nodes in place",
                "lastTransitionTime": "2026-05-01T12:00:00Z",
                "lastHeartbeatTime": "2026-05-01T12:00:00Z",
            }]}})
        );
    }

    #[test]
    fn the_delete_patch_names_only_network_unavailable() {
        assert_eq!(
            network_condition_delete_patch(None),
            serde_json::json!({"status": {"conditions": [
                {"$patch": "delete", "type": "NetworkUnavailable"}
            ]}})
        );
    }

    #[test]
    fn the_delete_patch_is_conditional_on_the_version_read() {
        assert_eq!(
            network_condition_delete_patch(Some("4711")),
            serde_json::json!({
                "metadata": {"resourceVersion": "4711"},
                "status": {"conditions": [
                    {"$patch": "delete", "type": "NetworkUnavailable"}
                ]}
            })
        );
    }

    fn node_with(conditions: Option<Vec<(&str, &str)>>) -> Node {
        use k8s_openapi::api::core::v1::{NodeCondition, NodeStatus};
        Node {
            status: Some(NodeStatus {
                conditions: conditions.map(|cs| {
                    cs.into_iter()
                        .map(|(type_, reason)| NodeCondition {
                            type_: type_.into(),
                            status: "False".into(),
                            reason: Some(reason.into()),
                            ..NodeCondition::default()
                        })
                        .collect()
                }),
                ..NodeStatus::default()
            }),
            ..Node::default()
        }
    }

    #[test]
    fn only_sarenas_network_condition_is_to_be_deleted() {
        let ours = node_with(Some(vec![
            ("Ready", "KubeletReady"),
            ("NetworkUnavailable", "SarenaIsUp"),
        ]));
        assert!(network_condition_is_sarenas(&ours));
        let theirs = node_with(Some(vec![("NetworkUnavailable", "RouteCreated")]));
        assert!(!network_condition_is_sarenas(&theirs));
        let other_type = node_with(Some(vec![("Ready", "SarenaIsUp")]));
        assert!(!network_condition_is_sarenas(&other_type));
        assert!(!network_condition_is_sarenas(&node_with(None)));
        assert!(!network_condition_is_sarenas(&Node::default()));
    }

    #[test]
    fn the_event_is_a_warning_on_the_node_in_the_default_namespace() {
        let node = ClusterNode {
            name: "node1".into(),
            uid: "u-1".into(),
            internal_ips: vec![],
            pod_cidrs: vec![],
        };
        let event = event_for(&node, "PodCIDRChangeRefused", "refusing", at());
        let json = serde_json::to_value(&event).unwrap();
        assert_eq!(json["metadata"]["generateName"], "node1.sarena-");
        assert_eq!(json["metadata"]["namespace"], "default");
        assert_eq!(
            json["involvedObject"],
            serde_json::json!({"apiVersion": "v1", "kind": "Node", "name": "node1", "uid": "u-1"})
        );
        assert_eq!(json["type"], "Warning");
        assert_eq!(json["reason"], "PodCIDRChangeRefused");
        assert_eq!(json["message"], "refusing");
        assert_eq!(json["source"]["component"], "sarena-daemon");
        assert_eq!(json["lastTimestamp"], "2026-05-01T12:00:00Z");
    }
}
