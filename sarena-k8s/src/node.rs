//! [`PeerNode`]: a Node object as the node watch decodes it — only the
//! fields peer routing reads (name, uid, resourceVersion,
//! deletionTimestamp, podCIDRs, addresses). A kubelet's Node carries its
//! images, conditions, capacity, node info and managed fields, 5 to 30 KiB
//! of JSON that every status heartbeat sends again; decoding into this type
//! skips them without allocating, and nothing of them is kept.

use std::borrow::Cow;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::Resource;
use serde::{Deserialize, Deserializer};

/// A Node object, reduced at decoding (see the module's docs).
#[derive(Clone, Debug, Default, Deserialize)]
pub struct PeerNode {
    /// Name, uid, resourceVersion and deletionTimestamp; nothing else.
    #[serde(default, deserialize_with = "slim_meta")]
    pub metadata: ObjectMeta,
    /// `spec`: the podCIDRs.
    #[serde(default)]
    pub spec: Option<PeerNodeSpec>,
    /// `status`: the addresses.
    #[serde(default)]
    pub status: Option<PeerNodeStatus>,
}

/// The podCIDR fields of a Node's `spec`.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct PeerNodeSpec {
    /// `podCIDR`, the single field of servers before dual stack.
    #[serde(default, rename = "podCIDR")]
    pub pod_cidr: Option<String>,
    /// `podCIDRs`, one per family.
    #[serde(default, rename = "podCIDRs")]
    pub pod_cidrs: Option<Vec<String>>,
}

/// The addresses of a Node's `status`.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct PeerNodeStatus {
    /// `addresses`: `InternalIP`, `Hostname`, …
    #[serde(default)]
    pub addresses: Option<Vec<PeerNodeAddress>>,
}

/// One entry of a Node's `status.addresses`.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct PeerNodeAddress {
    /// `InternalIP`, `ExternalIP`, `Hostname`, …
    #[serde(rename = "type")]
    pub type_: String,
    /// The address, as written (not trusted).
    pub address: String,
}

/// The metadata fields kept; the rest (labels, annotations, managed
/// fields, owner references) is skipped unread.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SlimMeta {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    uid: Option<String>,
    #[serde(default)]
    resource_version: Option<String>,
    #[serde(default)]
    deletion_timestamp: Option<Time>,
}

fn slim_meta<'de, D: Deserializer<'de>>(deserializer: D) -> Result<ObjectMeta, D::Error> {
    let slim = SlimMeta::deserialize(deserializer)?;
    Ok(ObjectMeta {
        name: slim.name,
        uid: slim.uid,
        resource_version: slim.resource_version,
        deletion_timestamp: slim.deletion_timestamp,
        ..ObjectMeta::default()
    })
}

impl Resource for PeerNode {
    type DynamicType = ();
    type Scope = k8s_openapi::ClusterResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("Node")
    }
    fn group(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("")
    }
    fn version(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("v1")
    }
    fn plural(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("nodes")
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Node as a kubelet writes it, with the fields peer routing skips.
    fn kubelet_node() -> serde_json::Value {
        serde_json::json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {
                "name": "node7", "uid": "u-7", "resourceVersion": "4242",
                "labels": {"kubernetes.io/hostname": "node7"},
                "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
                "managedFields": [{"manager": "kubelet", "operation": "Update",
                                   "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {"f:images": {}}}}]
            },
            "spec": {"podCIDR": "10.244.7.0/24", "podCIDRs": ["10.244.7.0/24"],
                     "taints": [{"key": "k", "effect": "NoSchedule"}]},
            "status": {
                "addresses": [{"type": "InternalIP", "address": "172.30.0.17"},
                              {"type": "Hostname", "address": "node7"}],
                "capacity": {"cpu": "8"},
                "conditions": [{"type": "Ready", "status": "True"}],
                "nodeInfo": {"kubeletVersion": "v1.20.2"},
                "images": [{"names": ["registry.example/a@sha256:00"], "sizeBytes": 1}]
            }
        })
    }

    #[test]
    fn a_kubelets_node_decodes_to_the_routing_fields_only() {
        let n: PeerNode = serde_json::from_value(kubelet_node()).unwrap();
        assert_eq!(n.metadata.name.as_deref(), Some("node7"));
        assert_eq!(n.metadata.uid.as_deref(), Some("u-7"));
        assert_eq!(n.metadata.resource_version.as_deref(), Some("4242"));
        assert!(n.metadata.labels.is_none() && n.metadata.managed_fields.is_none());
        assert!(n.metadata.annotations.is_none());
        let spec = n.spec.unwrap();
        assert_eq!(spec.pod_cidr.as_deref(), Some("10.244.7.0/24"));
        assert_eq!(spec.pod_cidrs.unwrap(), ["10.244.7.0/24"]);
        let addresses = n.status.unwrap().addresses.unwrap();
        assert_eq!(addresses.len(), 2);
        assert_eq!(
            (addresses[0].type_.as_str(), addresses[0].address.as_str()),
            ("InternalIP", "172.30.0.17")
        );
    }

    #[test]
    fn a_bookmark_and_a_node_being_deleted_decode() {
        // a watch bookmark carries only the resourceVersion
        let b: PeerNode = serde_json::from_value(serde_json::json!({
            "kind": "Node", "apiVersion": "v1", "metadata": {"resourceVersion": "99"}
        }))
        .unwrap();
        assert_eq!(b.metadata.resource_version.as_deref(), Some("99"));
        assert!(b.spec.is_none() && b.status.is_none());
        let d: PeerNode = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "n", "deletionTimestamp": "2024-01-01T00:00:00Z"},
            "spec": null, "status": {"addresses": null}
        }))
        .unwrap();
        assert!(d.metadata.deletion_timestamp.is_some());
    }

    #[test]
    fn the_resource_is_the_core_nodes() {
        assert_eq!(PeerNode::url_path(&(), None), "/api/v1/nodes");
        assert_eq!(PeerNode::kind(&()), "Node");
    }
}
