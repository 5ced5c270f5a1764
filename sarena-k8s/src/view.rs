//! Node objects → [`ClusterView`]. Nothing from the API server is trusted:
//! an address or a CIDR that does not parse is skipped with a warning.

use std::net::IpAddr;

use ipnet::IpNet;
use k8s_openapi::api::core::v1::Node;
use sarena_core::cluster::{ClusterNode, ClusterView};

/// The node as Sarena sees it; `None` for an object without a name.
pub fn cluster_node(node: &Node) -> Option<ClusterNode> {
    let name = node.metadata.name.clone()?;
    let internal_ips = node
        .status
        .as_ref()
        .and_then(|s| s.addresses.as_ref())
        .into_iter()
        .flatten()
        .filter(|a| a.type_ == "InternalIP")
        .filter_map(|a| match a.address.parse::<IpAddr>() {
            Ok(ip) => Some(ip),
            Err(_) => {
                tracing::warn!(node = %name, address = %a.address, "skipping an InternalIP that is no IP address");
                None
            }
        })
        .collect();
    let spec = node.spec.as_ref();
    let mut texts: Vec<&String> = spec
        .and_then(|s| s.pod_cidrs.as_ref())
        .into_iter()
        .flatten()
        .collect();
    if texts.is_empty()
        && let Some(single) = spec.and_then(|s| s.pod_cidr.as_ref())
    {
        texts.push(single);
    }
    let pod_cidrs = texts
        .into_iter()
        .filter_map(|text| match text.parse::<IpNet>() {
            Ok(net) => Some(net.trunc()),
            Err(_) => {
                tracing::warn!(node = %name, pod_cidr = %text, "skipping a podCIDR that is no CIDR");
                None
            }
        })
        .collect();
    Some(ClusterNode {
        uid: node.metadata.uid.clone().unwrap_or_default(),
        name,
        internal_ips,
        pod_cidrs,
    })
}

/// The view of `local_name` over `nodes`: itself apart, the others sorted
/// by name. Nodes being deleted (`deletionTimestamp` set) are left out.
pub fn cluster_view<'a>(
    nodes: impl IntoIterator<Item = &'a Node>,
    local_name: &str,
) -> ClusterView {
    let mut view = ClusterView {
        local_name: local_name.to_owned(),
        local: None,
        peers: Vec::new(),
    };
    for node in nodes {
        if node.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let Some(node) = cluster_node(node) else {
            continue;
        };
        if node.name == local_name {
            view.local = Some(node);
        } else {
            view.peers.push(node);
        }
    }
    view.peers.sort_by(|a, b| a.name.cmp(&b.name));
    view
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(json: serde_json::Value) -> Node {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn internal_ips_and_both_pod_cidr_families_are_taken_bad_values_skipped() {
        let n = node(serde_json::json!({
            "metadata": {"name": "node2", "uid": "u-2"},
            "spec": {"podCIDR": "10.244.1.0/24", "podCIDRs": ["10.244.1.0/24", "fd00:10:244:1::/64", "bogus"]},
            "status": {"addresses": [
                {"type": "Hostname", "address": "node2"},
                {"type": "InternalIP", "address": "172.30.0.12"},
                {"type": "ExternalIP", "address": "203.0.113.9"},
                {"type": "InternalIP", "address": "fd00:172:30::12"},
                {"type": "InternalIP", "address": "not-an-ip"}
            ]}
        }));
        let c = cluster_node(&n).unwrap();
        assert_eq!(c.name, "node2");
        assert_eq!(c.uid, "u-2");
        assert_eq!(
            c.internal_ips,
            vec![
                "172.30.0.12".parse::<IpAddr>().unwrap(),
                "fd00:172:30::12".parse().unwrap()
            ]
        );
        assert_eq!(
            c.pod_cidrs,
            vec![
                "10.244.1.0/24".parse::<IpNet>().unwrap(),
                "fd00:10:244:1::/64".parse().unwrap()
            ]
        );
    }

    #[test]
    fn the_single_pod_cidr_field_of_older_servers_counts_and_a_bare_node_has_none() {
        let old = node(
            serde_json::json!({"metadata": {"name": "n"}, "spec": {"podCIDR": "10.244.3.0/24"}}),
        );
        assert_eq!(
            cluster_node(&old).unwrap().pod_cidrs,
            vec!["10.244.3.0/24".parse::<IpNet>().unwrap()]
        );
        let bare = node(serde_json::json!({"metadata": {"name": "n"}}));
        let c = cluster_node(&bare).unwrap();
        assert!(c.pod_cidrs.is_empty() && c.internal_ips.is_empty());
        assert!(cluster_node(&node(serde_json::json!({"metadata": {}}))).is_none());
    }

    #[test]
    fn the_view_sets_the_local_node_apart_and_leaves_out_nodes_being_deleted() {
        let nodes = [
            node(serde_json::json!({"metadata": {"name": "c"}})),
            node(serde_json::json!({"metadata": {"name": "a"}})),
            node(serde_json::json!({"metadata": {"name": "me"}})),
            node(
                serde_json::json!({"metadata": {"name": "b", "deletionTimestamp": "2024-01-01T00:00:00Z"}}),
            ),
        ];
        let view = cluster_view(&nodes, "me");
        assert_eq!(view.local.as_ref().map(|n| n.name.as_str()), Some("me"));
        let peers: Vec<&str> = view.peers.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(peers, ["a", "c"]);
        assert!(cluster_view(&nodes, "elsewhere").local.is_none());
    }
}
