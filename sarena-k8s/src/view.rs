//! Node objects → [`ClusterView`]. Nothing from the API server is trusted:
//! an address or a CIDR that does not parse is skipped with a warning.
//! [`NodeTable`] keeps the view up to date one watch event at a time: an
//! event that changes nothing the view holds (a status heartbeat) costs a
//! lookup, not a pass over every node.

use std::collections::BTreeMap;
use std::net::IpAddr;

use ipnet::IpNet;
use sarena_core::cluster::{ClusterNode, ClusterView};

use crate::node::PeerNode;

/// The node as Sarena sees it; `None` for an object without a name.
pub fn cluster_node(node: &PeerNode) -> Option<ClusterNode> {
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

/// The nodes of the cluster by name, as the view holds them, kept from
/// watch events. Nodes being deleted (`deletionTimestamp` set) are left
/// out. A re-list is gathered apart and replaces the table at its end, so
/// the view never holds half a list.
#[derive(Debug, Clone)]
pub struct NodeTable {
    local_name: String,
    nodes: BTreeMap<String, ClusterNode>,
    relist: Option<BTreeMap<String, ClusterNode>>,
}

impl NodeTable {
    /// An empty table for the node named `local_name`.
    pub fn new(local_name: &str) -> Self {
        NodeTable {
            local_name: local_name.to_owned(),
            nodes: BTreeMap::new(),
            relist: None,
        }
    }

    /// An added or changed Node; whether the view changed.
    pub fn apply(&mut self, node: &PeerNode) -> bool {
        let Some(name) = node.metadata.name.as_deref() else {
            return false;
        };
        if node.metadata.deletion_timestamp.is_some() {
            return self.nodes.remove(name).is_some();
        }
        let Some(reduced) = cluster_node(node) else {
            return false;
        };
        if self.nodes.get(name) == Some(&reduced) {
            return false;
        }
        self.nodes.insert(reduced.name.clone(), reduced);
        true
    }

    /// A deleted Node; whether the view changed.
    pub fn remove(&mut self, node: &PeerNode) -> bool {
        node.metadata
            .name
            .as_deref()
            .is_some_and(|name| self.nodes.remove(name).is_some())
    }

    /// A re-list begins: the Nodes that follow ([`NodeTable::relisted`])
    /// replace the table at [`NodeTable::relist_done`].
    pub fn relist_begin(&mut self) {
        self.relist = Some(BTreeMap::new());
    }

    /// A Node of the re-list.
    pub fn relisted(&mut self, node: &PeerNode) {
        if node.metadata.deletion_timestamp.is_some() {
            return;
        }
        if let (Some(relist), Some(reduced)) = (self.relist.as_mut(), cluster_node(node)) {
            relist.insert(reduced.name.clone(), reduced);
        }
    }

    /// The re-list is complete; whether the view changed.
    pub fn relist_done(&mut self) -> bool {
        match self.relist.take() {
            Some(listed) if listed != self.nodes => {
                self.nodes = listed;
                true
            }
            _ => false,
        }
    }

    /// The view of the local node: itself apart, the others by name.
    pub fn view(&self) -> ClusterView {
        let mut view = ClusterView {
            local_name: self.local_name.clone(),
            local: None,
            peers: Vec::with_capacity(self.nodes.len()),
        };
        for (name, node) in &self.nodes {
            if *name == self.local_name {
                view.local = Some(node.clone());
            } else {
                view.peers.push(node.clone());
            }
        }
        view
    }
}

/// The view of `local_name` over `nodes` (a [`NodeTable`] of them).
pub fn cluster_view<'a>(
    nodes: impl IntoIterator<Item = &'a PeerNode>,
    local_name: &str,
) -> ClusterView {
    let mut table = NodeTable::new(local_name);
    for node in nodes {
        table.apply(node);
    }
    table.view()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(json: serde_json::Value) -> PeerNode {
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

    fn routed(name: &str, cidr: &str, ip: &str) -> PeerNode {
        node(serde_json::json!({
            "metadata": {"name": name, "uid": format!("u-{name}")},
            "spec": {"podCIDRs": [cidr]},
            "status": {"addresses": [{"type": "InternalIP", "address": ip}],
                       "conditions": [{"type": "Ready", "status": "True"}]}
        }))
    }

    #[test]
    fn the_table_changes_the_view_only_when_what_it_holds_changes() {
        let mut t = NodeTable::new("me");
        assert!(t.apply(&routed("me", "10.244.0.0/24", "172.30.0.10")));
        assert!(t.apply(&routed("b", "10.244.2.0/24", "172.30.0.12")));
        assert!(t.apply(&routed("a", "10.244.1.0/24", "172.30.0.11")));
        // a heartbeat: the same routing fields, another status
        let mut beat = routed("a", "10.244.1.0/24", "172.30.0.11");
        beat.metadata.resource_version = Some("2".into());
        assert!(!t.apply(&beat));
        let view = t.view();
        assert_eq!(view.local.as_ref().map(|n| n.name.as_str()), Some("me"));
        let peers: Vec<&str> = view.peers.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(peers, ["a", "b"], "peers by name");
        // a new podCIDR, then the node being deleted, then its deletion
        assert!(t.apply(&routed("a", "10.244.9.0/24", "172.30.0.11")));
        assert_eq!(
            t.view().peers[0].pod_cidrs,
            ["10.244.9.0/24".parse::<IpNet>().unwrap()]
        );
        let mut leaving = routed("b", "10.244.2.0/24", "172.30.0.12");
        leaving.metadata.deletion_timestamp = node(
            serde_json::json!({"metadata": {"name": "x", "deletionTimestamp": "2024-01-01T00:00:00Z"}}),
        )
        .metadata
        .deletion_timestamp;
        assert!(t.apply(&leaving));
        assert!(!t.remove(&leaving), "already out of the view");
        assert!(t.remove(&routed("a", "", "")));
        assert!(t.view().peers.is_empty());
        assert!(!t.apply(&node(serde_json::json!({"metadata": {}}))));
    }

    #[test]
    fn a_relist_replaces_the_table_at_its_end_and_says_whether_anything_changed() {
        let mut t = NodeTable::new("me");
        t.relist_begin();
        t.relisted(&routed("a", "10.244.1.0/24", "172.30.0.11"));
        t.relisted(&routed("b", "10.244.2.0/24", "172.30.0.12"));
        assert!(t.view().peers.is_empty(), "nothing before the list is done");
        assert!(t.relist_done());
        assert_eq!(t.view().peers.len(), 2);
        // the same list again: no change
        t.relist_begin();
        t.relisted(&routed("a", "10.244.1.0/24", "172.30.0.11"));
        t.relisted(&routed("b", "10.244.2.0/24", "172.30.0.12"));
        assert!(!t.relist_done());
        // b went while the watch was down
        t.relist_begin();
        t.relisted(&routed("a", "10.244.1.0/24", "172.30.0.11"));
        assert!(t.relist_done());
        let peers: Vec<String> = t.view().peers.into_iter().map(|n| n.name).collect();
        assert_eq!(peers, ["a"]);
        assert!(!t.relist_done(), "no re-list under way");
    }
}
