//! The podCIDR decision: given the session the node state runs with, the
//! Node's podCIDRs now and the endpoints alive on the node, what to do.
//! Pure; the supervisor carries it out.

use std::net::IpAddr;

use super::pools::{SessionParams, sorted};
use super::types::{ClusterView, RoutingMode};
use crate::api::{Attachment, Endpoint};

/// What the node state should do about this node's podCIDRs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodCidrDecision {
    /// Nothing to serve ADD from: why (the Node does not exist, or has no
    /// podCIDR yet).
    Wait(String),
    /// The session in place matches the Node: serve.
    Keep,
    /// (Re)open the node state with these parameters.
    Adopt(SessionParams),
    /// The podCIDRs changed while endpoints hold addresses of the old ones:
    /// keep the old session, serve no ADD, and say so loudly.
    Refuse(Refusal),
}

/// A podCIDR change the node refuses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The session in place.
    pub current: SessionParams,
    /// What the Node asks for now.
    pub offered: SessionParams,
    /// The live endpoints with addresses the new podCIDRs do not contain.
    pub holders: Vec<(Attachment, IpAddr)>,
}

impl Refusal {
    /// The message of the log line, the Event and the daemon's health.
    pub fn message(&self, node: &str) -> String {
        let example = self
            .holders
            .first()
            .map(|(owner, ip)| format!(" (e.g. {ip} of container {})", owner.container_id))
            .unwrap_or_default();
        format!(
            "spec.podCIDRs of node {node} changed from {} to {} while {} live endpoint address(es) \
             lie outside the new podCIDRs{example}; refusing to re-address them: ADD is refused \
             until those pods are deleted, then the new podCIDRs are adopted",
            list(&self.current.pod_cidrs),
            list(&self.offered.pod_cidrs),
            self.holders.len(),
        )
    }
}

fn list<T: std::fmt::Display>(items: &[T]) -> String {
    let parts: Vec<String> = items.iter().map(T::to_string).collect();
    format!("[{}]", parts.join(", "))
}

/// Decides for `view`'s local node. `current` is the session the node
/// state runs with (none before the first podCIDR), `endpoints` every
/// registered endpoint, `routing` and `mtu` (configured) give the pods' MTU.
pub fn decide(
    view: &ClusterView,
    current: Option<&SessionParams>,
    endpoints: &[Endpoint],
    routing: RoutingMode,
    mtu: u32,
) -> PodCidrDecision {
    let name = &view.local_name;
    let Some(local) = &view.local else {
        return PodCidrDecision::Wait(format!(
            "the Node object {name} does not exist (yet); waiting for it"
        ));
    };
    if local.pod_cidrs.is_empty() {
        return PodCidrDecision::Wait(format!(
            "node {name} has no spec.podCIDRs yet (is kube-controller-manager running with \
             --allocate-node-cidrs?); waiting for them"
        ));
    }
    let offered = SessionParams::for_node(local, routing, mtu);
    let Some(current) = current else {
        return PodCidrDecision::Adopt(offered);
    };
    if *current == offered {
        return PodCidrDecision::Keep;
    }
    if sorted(&current.pod_cidrs) == offered.pod_cidrs {
        // Only the MTU changed: new pods get the new one, old ones keep theirs.
        return PodCidrDecision::Adopt(offered);
    }
    let holders: Vec<(Attachment, IpAddr)> = endpoints
        .iter()
        .flat_map(|ep| ep.spec.addresses.iter().map(move |a| (ep, a.addr())))
        .filter(|(_, ip)| current.pod_cidrs.iter().any(|c| c.contains(ip)))
        .filter(|(_, ip)| !offered.pod_cidrs.iter().any(|c| c.contains(ip)))
        .map(|(ep, ip)| (ep.spec.owner.clone(), ip))
        .collect();
    if holders.is_empty() {
        PodCidrDecision::Adopt(offered)
    } else {
        PodCidrDecision::Refuse(Refusal {
            current: current.clone(),
            offered,
            holders,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::EndpointSpec;
    use crate::cluster::ClusterNode;

    fn view(cidrs: Option<&[&str]>) -> ClusterView {
        ClusterView {
            local_name: "node1".into(),
            local: cidrs.map(|cidrs| ClusterNode {
                name: "node1".into(),
                uid: "u1".into(),
                internal_ips: vec!["172.30.0.11".parse().unwrap()],
                pod_cidrs: cidrs.iter().map(|c| c.parse().unwrap()).collect(),
            }),
            peers: vec![],
        }
    }

    fn params(cidrs: &[&str], mtu: u32) -> SessionParams {
        SessionParams {
            pod_cidrs: cidrs.iter().map(|c| c.parse().unwrap()).collect(),
            mtu,
        }
    }

    fn endpoint(id: &str, addrs: &[&str]) -> Endpoint {
        Endpoint {
            spec: EndpointSpec {
                owner: Attachment {
                    container_id: id.into(),
                    ifname: "eth0".into(),
                },
                pod: Default::default(),
                host_ifname: format!("lxc{id}"),
                host_ifindex: 9,
                host_mac: Default::default(),
                pod_mac: Default::default(),
                addresses: addrs.iter().map(|a| a.parse().unwrap()).collect(),
                netns: String::new(),
                bandwidth: None,
                identity: Default::default(),
            },
            created_at: 0,
        }
    }

    fn native(v: &ClusterView, cur: Option<&SessionParams>, eps: &[Endpoint]) -> PodCidrDecision {
        decide(v, cur, eps, RoutingMode::Native, 1500)
    }

    #[test]
    fn no_node_or_no_pod_cidr_waits_with_the_reason() {
        match native(&view(None), None, &[]) {
            PodCidrDecision::Wait(r) => {
                assert!(r.contains("Node object node1 does not exist"), "{r}")
            }
            d => panic!("{d:?}"),
        }
        match native(
            &view(Some(&[])),
            Some(&params(&["10.244.1.0/24"], 1500)),
            &[],
        ) {
            PodCidrDecision::Wait(r) => {
                assert!(r.contains("node node1 has no spec.podCIDRs"), "{r}")
            }
            d => panic!("{d:?}"),
        }
    }

    #[test]
    fn the_first_pod_cidrs_are_adopted_in_both_families() {
        let v = view(Some(&["fd00:10:244:1::/64", "10.244.1.0/24"]));
        assert_eq!(
            decide(&v, None, &[], RoutingMode::Vxlan, 1500),
            PodCidrDecision::Adopt(params(&["10.244.1.0/24", "fd00:10:244:1::/64"], 1450))
        );
    }

    #[test]
    fn the_same_session_is_kept_and_an_mtu_change_alone_is_adopted() {
        let v = view(Some(&["10.244.1.0/24"]));
        let eps = [endpoint("a", &["10.244.1.5/24"])];
        assert_eq!(
            native(&v, Some(&params(&["10.244.1.0/24"], 1500)), &eps),
            PodCidrDecision::Keep
        );
        assert_eq!(
            native(&v, Some(&params(&["10.244.1.0/24"], 1450)), &eps),
            PodCidrDecision::Adopt(params(&["10.244.1.0/24"], 1500))
        );
    }

    #[test]
    fn a_change_under_live_endpoints_is_refused_naming_them() {
        let v = view(Some(&["10.244.7.0/24"]));
        let current = params(&["10.244.1.0/24"], 1500);
        let eps = [
            endpoint("a", &["10.244.1.5/24"]),
            endpoint("ns-pool", &["10.99.0.5/24"]),
        ];
        let PodCidrDecision::Refuse(refusal) = native(&v, Some(&current), &eps) else {
            panic!("not refused");
        };
        assert_eq!(
            refusal.holders.len(),
            1,
            "the per-namespace pool's endpoint is no holder"
        );
        assert_eq!(
            refusal.holders[0].1,
            "10.244.1.5".parse::<IpAddr>().unwrap()
        );
        let msg = refusal.message("node1");
        assert!(
            msg.contains("from [10.244.1.0/24] to [10.244.7.0/24]"),
            "{msg}"
        );
        assert!(msg.contains("10.244.1.5 of container a"), "{msg}");
    }

    #[test]
    fn a_change_without_live_endpoints_in_the_old_cidrs_is_adopted() {
        let current = params(&["10.244.1.0/24"], 1500);
        let eps = [endpoint("ns-pool", &["10.99.0.5/24"])];
        assert_eq!(
            native(&view(Some(&["10.244.7.0/24"])), Some(&current), &eps),
            PodCidrDecision::Adopt(params(&["10.244.7.0/24"], 1500))
        );
        // A podCIDR that grows around the live addresses re-addresses nobody.
        let eps = [endpoint("a", &["10.244.1.5/24"])];
        assert_eq!(
            native(&view(Some(&["10.244.0.0/23"])), Some(&current), &eps),
            PodCidrDecision::Adopt(params(&["10.244.0.0/23"], 1500))
        );
    }
}
