//! Naming an event's parties: its endpoint (host ifindex) and the other
//! side's address, as pods of this node, from the registry's endpoints; and
//! for a policy drop, the decision that denied it (`policy explain`).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sarena_core::api::{
    Endpoint, EventDirection, EventRecord, NodeApi, PolicyParty, PolicyProtocol, PolicyQuery,
};

/// The registry is read again for an unknown endpoint at most this often.
const REFRESH_EVERY: Duration = Duration::from_secs(1);

/// A pod of this node, as events name it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Named {
    /// `namespace/name`, or the container id without a pod name.
    pod: String,
    namespace: Option<String>,
    /// The pod's name, when the runtime gave one.
    name: Option<String>,
    interface: String,
}

fn named(ep: &Endpoint) -> Named {
    let pod = &ep.spec.pod;
    Named {
        pod: match (&pod.namespace, &pod.name) {
            (Some(ns), Some(name)) => format!("{ns}/{name}"),
            (None, Some(name)) => name.clone(),
            _ => ep.spec.owner.container_id.clone(),
        },
        namespace: pod.namespace.clone(),
        name: pod.name.clone(),
        interface: ep.spec.host_ifname.clone(),
    }
}

/// The endpoints by host ifindex and by address, refreshed on demand.
pub struct Resolver {
    daemon: Arc<dyn NodeApi>,
    by_ifindex: HashMap<u32, Named>,
    by_addr: HashMap<IpAddr, String>,
    refreshed: Option<Instant>,
}

impl Resolver {
    /// Resolves through `daemon`'s registry.
    pub fn new(daemon: Arc<dyn NodeApi>) -> Resolver {
        Resolver {
            daemon,
            by_ifindex: HashMap::new(),
            by_addr: HashMap::new(),
            refreshed: None,
        }
    }

    /// Reads the endpoints again (a failure keeps the old view).
    async fn refresh(&mut self) {
        self.refreshed = Some(Instant::now());
        let Ok(endpoints) = self.daemon.endpoints().await else {
            return;
        };
        self.by_ifindex.clear();
        self.by_addr.clear();
        for ep in &endpoints {
            let n = named(ep);
            for net in &ep.spec.addresses {
                self.by_addr.insert(net.addr(), n.pod.clone());
            }
            self.by_ifindex.insert(ep.spec.host_ifindex, n);
        }
    }

    /// Fills in `event`'s pod, namespace, interface and peer pod; reads the
    /// registry again when the endpoint is unknown (a new pod), at most
    /// once per [`REFRESH_EVERY`].
    pub async fn name(&mut self, event: &mut EventRecord) {
        let stale = self.refreshed.is_none_or(|t| t.elapsed() >= REFRESH_EVERY);
        if event.ifindex != 0 && !self.by_ifindex.contains_key(&event.ifindex) && stale {
            self.refresh().await;
        }
        if let Some(n) = self.by_ifindex.get(&event.ifindex) {
            event.pod = Some(n.pod.clone());
            event.namespace = n.namespace.clone();
            event.interface = Some(n.interface.clone());
        }
        let peer = match event.direction {
            EventDirection::Egress => event.packet.dst,
            EventDirection::Ingress => event.packet.src,
        };
        event.peer_pod = peer.and_then(|a| self.by_addr.get(&a).cloned());
    }

    /// A policy drop's decision: the deciding pod's policies (TCP, UDP and
    /// SCTP; other protocols carry no port to ask with).
    pub async fn explain(&self, event: &mut EventRecord) {
        let p = &event.packet;
        let (Some(src), Some(dst), Some(port)) = (p.src, p.dst, p.dst_port) else {
            return;
        };
        let protocol = match p.protocol.as_deref() {
            Some("TCP") => PolicyProtocol::Tcp,
            Some("UDP") => PolicyProtocol::Udp,
            Some("SCTP") => PolicyProtocol::Sctp,
            _ => return,
        };
        if port == 0 {
            return;
        }
        // The policy engine decides for pods, not addresses: the event's
        // own endpoint is named as its pod, the other side by its address.
        let own = self.by_ifindex.get(&event.ifindex).and_then(|n| {
            Some(PolicyParty::Pod {
                namespace: n.namespace.clone()?,
                name: n.name.clone()?,
            })
        });
        let Some(own) = own else {
            return;
        };
        let (from, to) = match event.direction {
            EventDirection::Ingress => (PolicyParty::Address(src), own),
            EventDirection::Egress => (own, PolicyParty::Address(dst)),
        };
        let query = PolicyQuery {
            from,
            to,
            port,
            protocol,
        };
        let Ok(explained) = self.daemon.policy_explain(query).await else {
            return;
        };
        event.policy = match event.direction {
            EventDirection::Ingress => explained.ingress,
            EventDirection::Egress => explained.egress,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sarena_core::api::{
        Attachment, EndpointSpec, EventKind, MockNodeApi, PacketSummary, PodRef, PolicyDecision,
        PolicyExplanation, PolicyVerdict,
    };

    fn endpoint(cid: &str, ifindex: u32, addr: &str) -> Endpoint {
        Endpoint {
            spec: EndpointSpec {
                owner: Attachment {
                    container_id: cid.into(),
                    ifname: "eth0".into(),
                },
                pod: PodRef {
                    namespace: Some("shop".into()),
                    name: Some(format!("pod-{cid}")),
                    uid: None,
                },
                host_ifname: format!("lxc{cid}"),
                host_ifindex: ifindex,
                host_mac: "02:00:00:00:00:01".parse().unwrap(),
                pod_mac: "02:00:00:00:00:02".parse().unwrap(),
                addresses: vec![addr.parse().unwrap()],
                netns: "/run/netns/t".into(),
                bandwidth: None,
                identity: Default::default(),
            },
            created_at: 1,
        }
    }

    fn denied_syn(ifindex: u32) -> EventRecord {
        EventRecord {
            time_unix_ns: 1,
            kind: EventKind::Drop,
            direction: EventDirection::Ingress,
            reason: Some("policy_denied_ingress".into()),
            path: None,
            pod: None,
            namespace: None,
            interface: None,
            ifindex,
            peer_pod: None,
            packet_len: 74,
            packet: PacketSummary {
                family: "ipv4".into(),
                src: Some("10.1.0.2".parse().unwrap()),
                dst: Some("10.1.0.3".parse().unwrap()),
                protocol: Some("TCP".into()),
                src_port: Some(40000),
                dst_port: Some(5432),
                tcp_flags: Some("SYN".into()),
                ..PacketSummary::default()
            },
            policy: None,
        }
    }

    #[tokio::test]
    async fn a_policy_drop_is_named_and_explained_by_the_receivers_policies() {
        let mut daemon = MockNodeApi::new();
        daemon.expect_endpoints().times(1).returning(|| {
            Ok(vec![
                endpoint("web", 7, "10.1.0.2/24"),
                endpoint("db", 8, "10.1.0.3/24"),
            ])
        });
        daemon
            .expect_policy_explain()
            .withf(|q| {
                q.port == 5432
                    && q.protocol == PolicyProtocol::Tcp
                    && q.from == PolicyParty::Address("10.1.0.2".parse().unwrap())
                    && q.to
                        == PolicyParty::Pod {
                            namespace: "shop".into(),
                            name: "pod-db".into(),
                        }
            })
            .returning(|query| {
                Ok(PolicyExplanation {
                    query,
                    egress: None,
                    ingress: Some(PolicyDecision {
                        pod: "shop/pod-db".into(),
                        verdict: PolicyVerdict::Denied,
                        rule: None,
                        policies: vec!["shop/db-only-from-api".into()],
                    }),
                    allowed: false,
                })
            });
        let mut resolver = Resolver::new(Arc::new(daemon));
        let mut e = denied_syn(8);
        resolver.name(&mut e).await;
        resolver.explain(&mut e).await;
        assert_eq!(e.pod.as_deref(), Some("shop/pod-db"));
        assert_eq!(e.namespace.as_deref(), Some("shop"));
        assert_eq!(e.interface.as_deref(), Some("lxcdb"));
        assert_eq!(e.peer_pod.as_deref(), Some("shop/pod-web"));
        let policy = e.policy.as_ref().unwrap();
        assert_eq!(policy.policies, ["shop/db-only-from-api"]);
        assert!(
            e.to_string().contains("isolated by shop/db-only-from-api"),
            "{e}"
        );
        // a known endpoint does not read the registry again (times(1))
        let mut again = denied_syn(8);
        resolver.name(&mut again).await;
        assert_eq!(again.pod.as_deref(), Some("shop/pod-db"));
    }

    #[tokio::test]
    async fn an_unknown_endpoint_reads_the_registry_at_most_once_a_second() {
        let mut daemon = MockNodeApi::new();
        daemon.expect_endpoints().times(1).returning(|| Ok(vec![]));
        let mut resolver = Resolver::new(Arc::new(daemon));
        for _ in 0..100 {
            let mut e = denied_syn(99);
            resolver.name(&mut e).await;
            assert_eq!(e.pod, None);
        }
    }
}
