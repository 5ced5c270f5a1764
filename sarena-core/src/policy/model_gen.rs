//! Random worlds for the model test: labels, namespaces' labels,
//! selectors, pods (two nodes, IPv4 / IPv6 / both / none, named ports, now
//! and then on the host network) and policies with every peer and port kind.

use std::collections::BTreeSet;
use std::net::IpAddr;

use ipnet::IpNet;
use rand::Rng;
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;

use super::*;
use crate::api::Labels;

pub(super) const NODE: &str = "n1";
pub(super) const NODE_ADDRS: [&str; 2] = ["192.168.0.1", "fd99::1"];
pub(super) const SERVICE_ADDRS: [&str; 3] = ["10.96.0.10", "10.0.1.77", "fd00:96::10"];
pub(super) const OTHER_ADDRS: [&str; 7] = [
    "8.8.8.8",
    "10.0.1.200",
    "10.0.2.3",
    "10.1.0.1",
    "fd00:1::99",
    "fd00::77",
    "2001:db8::1",
];
pub(super) const PREFIXES: [&str; 11] = [
    "10.0.0.0/8",
    "10.0.0.0/16",
    "10.0.1.0/24",
    "10.0.1.0/25",
    "10.0.0.4/30",
    "0.0.0.0/0",
    "fd00::/16",
    "fd00::/64",
    "fd00:1::/32",
    "fd00::4/126",
    "::/0",
];
pub(super) const PORTS: [u16; 8] = [53, 80, 1000, 1003, 5432, 8080, 8081, 9999];
pub(super) const NAMES: [&str; 4] = ["http", "dns", "sql", "nope"];
pub(super) const PROTOS: [Protocol; 3] = [Protocol::Tcp, Protocol::Udp, Protocol::Sctp];

/// A seeded generator of random pods, selectors and policies.
pub(super) struct Gen {
    pub(super) rng: StdRng,
    pub(super) next_host: u8,
}

impl Gen {
    pub(super) fn labels(&mut self) -> Labels {
        let mut l = Labels::new();
        if self.rng.random_bool(0.8) {
            l.insert(
                "app".into(),
                ["web", "db", "api"]
                    .choose(&mut self.rng)
                    .unwrap()
                    .to_string(),
            );
        }
        if self.rng.random_bool(0.5) {
            l.insert(
                "tier".into(),
                ["1", "2"].choose(&mut self.rng).unwrap().to_string(),
            );
        }
        l
    }

    pub(super) fn ns_labels(&mut self) -> Labels {
        let mut l = Labels::new();
        if self.rng.random_bool(0.7) {
            l.insert(
                "team".into(),
                ["x", "y"].choose(&mut self.rng).unwrap().to_string(),
            );
        }
        if self.rng.random_bool(0.4) {
            l.insert("env".into(), "prod".into());
        }
        l
    }

    pub(super) fn selector(&mut self, keys: &[(&str, &[&str])]) -> LabelSelector {
        let mut s = LabelSelector::default();
        let (key, values) = *keys.choose(&mut self.rng).unwrap();
        let value = values.choose(&mut self.rng).unwrap().to_string();
        let set = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
        match self.rng.random_range(0..7) {
            0 => {}
            1 | 2 => {
                s.match_labels.insert(key.into(), value);
            }
            3 => s.match_expressions.push(Requirement {
                key: key.into(),
                op: Operator::In(set(&values[..1])),
            }),
            4 => s.match_expressions.push(Requirement {
                key: key.into(),
                op: Operator::NotIn(set(&values[..1])),
            }),
            5 => s.match_expressions.push(Requirement {
                key: key.into(),
                op: Operator::Exists,
            }),
            _ => s.match_expressions.push(Requirement {
                key: key.into(),
                op: Operator::DoesNotExist,
            }),
        }
        s
    }

    pub(super) fn pod_selector(&mut self) -> LabelSelector {
        self.selector(&[("app", &["web", "db", "api"]), ("tier", &["1", "2"])])
    }

    pub(super) fn pod(&mut self, ns: &str, name: &str) -> PolicyPod {
        let h = self.next_host;
        self.next_host = self.next_host.wrapping_add(1);
        let sub = self.rng.random_range(0..3u8);
        let v4: IpAddr = format!("10.0.{sub}.{h}").parse().unwrap();
        let v6: IpAddr = format!("fd00:{sub}::{h}").parse().unwrap();
        let ips = match self.rng.random_range(0..8) {
            0 => vec![],
            1 | 2 => vec![v6],
            3 | 4 => vec![v4, v6],
            _ => vec![v4],
        };
        let mut named_ports = vec![];
        for (name, protocol, ports) in [
            ("http", Protocol::Tcp, &[8080u16, 8081][..]),
            ("dns", Protocol::Udp, &[53][..]),
            ("sql", Protocol::Tcp, &[5432, 1003][..]),
        ] {
            if self.rng.random_bool(0.4) {
                let port = *ports.choose(&mut self.rng).unwrap();
                named_ports.push(NamedPort {
                    name: name.into(),
                    protocol,
                    port,
                });
            }
        }
        let host_network = self.rng.random_bool(0.05);
        PolicyPod {
            namespace: ns.into(),
            name: name.into(),
            labels: self.labels(),
            ips: if host_network {
                vec![format!("192.168.1.{h}").parse().unwrap()]
            } else {
                ips
            },
            named_ports,
            node: if self.rng.random_bool(0.6) {
                NODE.into()
            } else {
                "n2".into()
            },
            host_network,
        }
    }

    pub(super) fn peer(&mut self) -> Peer {
        if self.rng.random_bool(0.35) {
            let cidr: IpNet = PREFIXES.choose(&mut self.rng).unwrap().parse().unwrap();
            let inside: Vec<IpNet> = PREFIXES
                .iter()
                .map(|p| p.parse::<IpNet>().unwrap())
                .filter(|p| cidr.contains(p) && *p != cidr)
                .collect();
            let n = self.rng.random_range(0..=inside.len().min(2));
            let except = inside.choose_multiple(&mut self.rng, n).copied().collect();
            return Peer::IpBlock { cidr, except };
        }
        let ns_keys: &[(&str, &[&str])] = &[("team", &["x", "y"]), ("env", &["prod"])];
        match self.rng.random_range(0..3) {
            0 => Peer::Pods {
                pods: Some(self.pod_selector()),
                namespaces: None,
            },
            1 => Peer::Pods {
                pods: None,
                namespaces: Some(self.selector(ns_keys)),
            },
            _ => Peer::Pods {
                pods: Some(self.pod_selector()),
                namespaces: Some(self.selector(ns_keys)),
            },
        }
    }

    pub(super) fn port(&mut self) -> PortSpec {
        let protocol = *PROTOS.choose(&mut self.rng).unwrap();
        let (port, end_port) = match self.rng.random_range(0..6) {
            0 => (None, None),
            1 | 2 => (
                Some(PortRef::Number(*PORTS.choose(&mut self.rng).unwrap())),
                None,
            ),
            3 => {
                let a = self.rng.random_range(50..1100u16);
                (
                    Some(PortRef::Number(a)),
                    Some(a + self.rng.random_range(0..8000)),
                )
            }
            _ => (
                Some(PortRef::Named(
                    NAMES.choose(&mut self.rng).unwrap().to_string(),
                )),
                None,
            ),
        };
        PortSpec {
            protocol,
            port,
            end_port,
        }
    }

    pub(super) fn rules(&mut self) -> Vec<Rule> {
        (0..self.rng.random_range(0..3))
            .map(|_| Rule {
                peers: (0..self.rng.random_range(0..3))
                    .map(|_| self.peer())
                    .collect(),
                ports: (0..self.rng.random_range(0..3))
                    .map(|_| self.port())
                    .collect(),
            })
            .collect()
    }

    pub(super) fn policy(&mut self, ns: &str, name: &str) -> Policy {
        let (ingress_isolation, egress_isolation) = match self.rng.random_range(0..3) {
            0 => (true, false),
            1 => (false, true),
            _ => (true, true),
        };
        Policy {
            namespace: ns.into(),
            name: name.into(),
            pod_selector: self.pod_selector(),
            ingress_isolation,
            egress_isolation,
            // Rules of a direction not isolated are kept: they must be ignored.
            ingress: self.rules(),
            egress: self.rules(),
        }
    }
}
