//! Pods, Namespaces and Services as policy sees them. Nothing from the API
//! server is trusted: an object without a name is skipped, labels are
//! bounded, an address or a port that does not parse is left out.

use std::net::IpAddr;

use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use sarena_core::api::bound_labels;
use sarena_core::policy::{NamedPort, PolicyNamespace, PolicyPod, Protocol};

use super::network_policy::is_port_name;

/// A Pod as policy sees it; `None` without a namespace or a name. A pod
/// that has finished (phase `Succeeded` or `Failed`) has no addresses:
/// they may already be another pod's.
pub fn policy_pod(pod: &Pod) -> Option<PolicyPod> {
    let namespace = pod.metadata.namespace.clone().filter(|n| !n.is_empty())?;
    let name = pod.metadata.name.clone().filter(|n| !n.is_empty())?;
    let spec = pod.spec.as_ref();
    let status = pod.status.as_ref();
    let finished = matches!(
        status.and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    );
    let mut ips: Vec<IpAddr> = Vec::new();
    if !finished && let Some(status) = status {
        let listed: Vec<&String> = match &status.pod_ips {
            Some(list) if !list.is_empty() => list.iter().map(|p| &p.ip).collect(),
            _ => status.pod_ip.iter().collect(),
        };
        for text in listed {
            match text.parse::<IpAddr>() {
                Ok(ip) if !ips.contains(&ip) => ips.push(ip),
                Ok(_) => {}
                Err(_) => {
                    tracing::warn!(pod = %format!("{namespace}/{name}"), ip = %text, "skipping a podIP that is no IP address")
                }
            }
        }
    }
    let mut named_ports: Vec<NamedPort> = spec
        .into_iter()
        .flat_map(|s| s.containers.iter())
        .flat_map(|c| c.ports.iter().flatten())
        .filter_map(|p| {
            let name = p.name.as_deref().filter(|n| is_port_name(n))?;
            let protocol = match p.protocol.as_deref() {
                None | Some("TCP") => Protocol::Tcp,
                Some("UDP") => Protocol::Udp,
                Some("SCTP") => Protocol::Sctp,
                Some(_) => return None,
            };
            let port = u16::try_from(p.container_port).ok().filter(|p| *p != 0)?;
            Some(NamedPort {
                name: name.to_owned(),
                protocol,
                port,
            })
        })
        .collect();
    named_ports.sort();
    named_ports.dedup();
    Some(PolicyPod {
        labels: pod
            .metadata
            .labels
            .as_ref()
            .map(bound_labels)
            .unwrap_or_default(),
        ips,
        named_ports,
        node: spec.and_then(|s| s.node_name.clone()).unwrap_or_default(),
        host_network: spec.and_then(|s| s.host_network).unwrap_or(false),
        namespace,
        name,
    })
}

/// A Namespace (its metadata) as policy sees it; `None` without a name.
pub fn policy_namespace(meta: &ObjectMeta) -> Option<PolicyNamespace> {
    Some(PolicyNamespace {
        name: meta.name.clone().filter(|n| !n.is_empty())?,
        labels: meta.labels.as_ref().map(bound_labels).unwrap_or_default(),
    })
}

/// A Service's (namespace, name, addresses): `spec.clusterIPs` (but
/// `None`), `spec.externalIPs` and `status.loadBalancer.ingress[].ip`,
/// each once; `None` without a namespace or a name.
pub fn service_addresses(svc: &Service) -> Option<(String, String, Vec<IpAddr>)> {
    let namespace = svc.metadata.namespace.clone().filter(|n| !n.is_empty())?;
    let name = svc.metadata.name.clone().filter(|n| !n.is_empty())?;
    let spec = svc.spec.as_ref();
    let cluster_ips: Vec<&String> = match spec.and_then(|s| s.cluster_ips.as_ref()) {
        Some(list) if !list.is_empty() => list.iter().collect(),
        _ => spec
            .and_then(|s| s.cluster_ip.as_ref())
            .into_iter()
            .collect(),
    };
    let external = spec
        .and_then(|s| s.external_ips.as_ref())
        .into_iter()
        .flatten();
    let balanced = svc
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|i| i.ip.as_ref());
    let mut addresses: Vec<IpAddr> = Vec::new();
    for text in cluster_ips.into_iter().chain(external).chain(balanced) {
        if text == "None" || text.is_empty() {
            continue;
        }
        match text.parse::<IpAddr>() {
            Ok(ip) if !addresses.contains(&ip) => addresses.push(ip),
            Ok(_) => {}
            Err(_) => {
                tracing::warn!(service = %format!("{namespace}/{name}"), address = %text, "skipping a Service address that is no IP address")
            }
        }
    }
    Some((namespace, name, addresses))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn a_running_pod_keeps_its_addresses_named_ports_node_and_bounded_labels() {
        let labels: serde_json::Map<String, serde_json::Value> =
            (0..100).map(|i| (format!("k{i:03}"), json!("v"))).collect();
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"namespace": "ns", "name": "web", "labels": labels},
            "spec": {"nodeName": "node1", "containers": [
                {"name": "a", "ports": [
                    {"name": "http", "containerPort": 8080},
                    {"name": "dns", "containerPort": 53, "protocol": "UDP"},
                    {"containerPort": 9000},
                    {"name": "Bad", "containerPort": 1},
                    {"name": "odd", "containerPort": 1, "protocol": "ICMP"},
                    {"name": "zero", "containerPort": 0}
                ]},
                {"name": "b", "ports": [{"name": "metrics", "containerPort": 9090, "protocol": "TCP"}]}
            ]},
            "status": {"phase": "Running", "podIP": "10.0.0.5", "podIPs": [
                {"ip": "10.0.0.5"}, {"ip": "fd00::5"}, {"ip": "bogus"}
            ]}
        }))
        .unwrap();
        let p = policy_pod(&pod).unwrap();
        assert_eq!(
            (p.namespace.as_str(), p.name.as_str(), p.node.as_str()),
            ("ns", "web", "node1")
        );
        assert_eq!(p.ips, vec![ip("10.0.0.5"), ip("fd00::5")]);
        assert_eq!(p.labels.len(), sarena_core::api::MAX_LABELS);
        assert!(!p.host_network);
        let names: Vec<(&str, Protocol, u16)> = p
            .named_ports
            .iter()
            .map(|n| (n.name.as_str(), n.protocol, n.port))
            .collect();
        assert_eq!(
            names,
            [
                ("dns", Protocol::Udp, 53),
                ("http", Protocol::Tcp, 8080),
                ("metrics", Protocol::Tcp, 9090)
            ]
        );
    }

    #[test]
    fn finished_pods_have_no_addresses_and_the_single_pod_ip_counts_alone() {
        for phase in ["Succeeded", "Failed"] {
            let pod: Pod = serde_json::from_value(json!({
                "metadata": {"namespace": "ns", "name": "job"},
                "status": {"phase": phase, "podIPs": [{"ip": "10.0.0.6"}]}
            }))
            .unwrap();
            assert!(policy_pod(&pod).unwrap().ips.is_empty(), "{phase}");
        }
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"namespace": "ns", "name": "old"},
            "spec": {"containers": [], "hostNetwork": true},
            "status": {"phase": "Pending", "podIP": "10.0.0.7"}
        }))
        .unwrap();
        let p = policy_pod(&pod).unwrap();
        assert_eq!(p.ips, vec![ip("10.0.0.7")]);
        assert!(p.host_network);
        assert!(p.node.is_empty());
        let nameless: Pod = serde_json::from_value(json!({"metadata": {"name": "x"}})).unwrap();
        assert!(policy_pod(&nameless).is_none());
    }

    #[test]
    fn a_namespace_keeps_its_name_and_labels() {
        let meta: ObjectMeta =
            serde_json::from_value(json!({"name": "prod", "labels": {"team": "a"}})).unwrap();
        let n = policy_namespace(&meta).unwrap();
        assert_eq!(n.name, "prod");
        assert_eq!(n.labels.get("team").map(String::as_str), Some("a"));
        assert!(policy_namespace(&ObjectMeta::default()).is_none());
    }

    #[test]
    fn a_service_gives_its_cluster_external_and_load_balancer_addresses() {
        let svc: Service = serde_json::from_value(json!({
            "metadata": {"namespace": "ns", "name": "web"},
            "spec": {"clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10", "fd00:96::10"],
                     "externalIPs": ["203.0.113.1", "not-an-ip"]},
            "status": {"loadBalancer": {"ingress": [{"ip": "198.51.100.7"}, {"hostname": "lb.example"}, {"ip": "203.0.113.1"}]}}
        }))
        .unwrap();
        let (ns, name, addresses) = service_addresses(&svc).unwrap();
        assert_eq!((ns.as_str(), name.as_str()), ("ns", "web"));
        assert_eq!(
            addresses,
            vec![
                ip("10.96.0.10"),
                ip("fd00:96::10"),
                ip("203.0.113.1"),
                ip("198.51.100.7")
            ]
        );
        let headless: Service = serde_json::from_value(json!({
            "metadata": {"namespace": "ns", "name": "h"},
            "spec": {"clusterIP": "None", "clusterIPs": ["None"]}
        }))
        .unwrap();
        assert!(service_addresses(&headless).unwrap().2.is_empty());
    }
}
