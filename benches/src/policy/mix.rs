//! The NetworkPolicies of a [`Cluster`]: a default-deny (ingress) in every
//! namespace first, then a mix of what clusters hold: Deployment from
//! Deployment on a named or numbered port (now and then a port range),
//! namespace selectors (teams, monitoring), egress with DNS to
//! `kube-system`, and a few `ipBlock`s with `except`. Also the Deployments'
//! tiers, which decide their labels and container ports.

use std::collections::BTreeSet;

use ipnet::IpNet;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sarena_core::api::Labels;
use sarena_core::policy::{
    LabelSelector, Operator, Peer, Policy, PortRef, PortSpec, Protocol, Requirement, Rule,
};

use super::cluster::Cluster;

/// The kinds of policy in the mix, with their weights (out of 100).
pub const MIX: [(&str, u32); 6] = [
    ("app-from-app", 45),
    ("from-namespaces", 15),
    ("from-monitoring", 10),
    ("same-namespace", 5),
    ("ip-block", 5),
    ("egress", 20),
];

/// The tier of a Deployment: its `tier` label and container ports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tier {
    Web,
    Api,
    Db,
}

impl Tier {
    /// The tier of Deployment `app-N` (4 web, 4 api, 2 db in every 10).
    pub(crate) fn of(app: usize) -> Tier {
        match app % 10 {
            0..=3 => Tier::Web,
            4..=7 => Tier::Api,
            _ => Tier::Db,
        }
    }

    pub(crate) fn label(self) -> &'static str {
        match self {
            Tier::Web => "web",
            Tier::Api => "api",
            Tier::Db => "db",
        }
    }

    /// Its named container ports (TCP), the served one first.
    pub(crate) fn ports(self) -> &'static [(&'static str, u16)] {
        match self {
            Tier::Web => &[("http", 8080), ("metrics", 9090)],
            Tier::Api => &[("grpc", 9000), ("http", 8080), ("metrics", 9090)],
            Tier::Db => &[("postgres", 5432), ("metrics", 9090)],
        }
    }
}

fn labels(pairs: &[(&str, &str)]) -> Labels {
    (pairs.iter())
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn select(pairs: &[(&str, &str)]) -> LabelSelector {
    LabelSelector {
        match_labels: labels(pairs),
        match_expressions: Vec::new(),
    }
}

fn pods(pods: Option<LabelSelector>, namespaces: Option<LabelSelector>) -> Peer {
    Peer::Pods { pods, namespaces }
}

fn tcp(port: PortRef) -> PortSpec {
    PortSpec {
        protocol: Protocol::Tcp,
        port: Some(port),
        end_port: None,
    }
}

fn net(s: &str) -> Option<IpNet> {
    s.parse().ok()
}

/// `cidr` without `except`, both parsed (constants: never empty in practice).
fn block(cidr: &str, except: &[&str]) -> Vec<Peer> {
    net(cidr)
        .map(|cidr| Peer::IpBlock {
            cidr,
            except: except.iter().filter_map(|e| net(e)).collect(),
        })
        .into_iter()
        .collect()
}

impl Cluster {
    /// Policy `j`: the default-deny of namespace `j` for the first ones,
    /// then one of [`MIX`] in namespace `j % namespaces`.
    pub fn policy(&self, j: usize) -> Policy {
        let ns = j % self.spec.namespaces;
        if j < self.spec.namespaces {
            return Policy {
                namespace: self.namespace_name(ns),
                name: "default-deny".into(),
                ingress_isolation: true,
                ..Policy::default()
            };
        }
        let seed = self.spec.seed ^ (j as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let mut rng = StdRng::seed_from_u64(seed);
        self.random_policy(&mut rng, ns, format!("policy-{j:04}"))
    }

    /// The kind of policy `j` (an index into [`MIX`]; `None`: a default-deny).
    pub fn policy_kind(&self, j: usize) -> Option<usize> {
        (j >= self.spec.namespaces).then(|| {
            let seed = self.spec.seed ^ (j as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            pick_kind(&mut StdRng::seed_from_u64(seed))
        })
    }

    /// A policy of a kind drawn from [`MIX`], in namespace `ns`.
    pub fn random_policy(&self, rng: &mut StdRng, ns: usize, name: String) -> Policy {
        let kind = pick_kind(rng);
        let apps = self.spec.apps_per_namespace;
        let (app, peer_app) = (rng.random_range(0..apps), rng.random_range(0..apps));
        let target = select(&[("app", &format!("app-{app}"))]);
        let tier = Tier::of(app);
        let mut p = Policy {
            namespace: self.namespace_name(ns),
            name,
            pod_selector: target,
            ingress_isolation: true,
            ..Policy::default()
        };
        let ingress = |peers: Vec<Peer>, ports: Vec<PortSpec>| vec![Rule { peers, ports }];
        match kind {
            0 => {
                let from = select(&[("app", &format!("app-{peer_app}"))]);
                p.ingress = ingress(vec![pods(Some(from), None)], service_port(rng, tier));
            }
            1 => {
                let teams = (0..rng.random_range(1..=3))
                    .map(|_| format!("team-{}", rng.random_range(0..20)))
                    .collect::<BTreeSet<_>>();
                let namespaces = LabelSelector {
                    match_labels: Labels::new(),
                    match_expressions: vec![Requirement {
                        key: "team".into(),
                        op: Operator::In(teams),
                    }],
                };
                let from = rng.random_bool(0.5).then(|| select(&[("tier", "web")]));
                p.ingress = ingress(vec![pods(from, Some(namespaces))], service_port(rng, tier));
            }
            2 => {
                p.pod_selector = LabelSelector::default();
                let monitoring = select(&[("kubernetes.io/metadata.name", "monitoring")]);
                let ports = vec![tcp(PortRef::Named("metrics".into()))];
                p.ingress = ingress(vec![pods(None, Some(monitoring))], ports);
            }
            3 => p.ingress = ingress(vec![pods(Some(LabelSelector::default()), None)], vec![]),
            4 => {
                p.pod_selector = select(&[("tier", "web")]);
                let internet = ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"];
                let peers = if rng.random_bool(0.5) {
                    block("0.0.0.0/0", &internet)
                } else {
                    block("10.0.0.0/8", &["10.64.0.0/10", "10.96.0.0/12"])
                };
                p.ingress = ingress(peers, vec![tcp(PortRef::Number(8080))]);
            }
            _ => egress(rng, &mut p, peer_app),
        }
        p
    }
}

/// An index into [`MIX`], by weight.
fn pick_kind(rng: &mut StdRng) -> usize {
    let mut roll = rng.random_range(0..100u32);
    for (i, (_, weight)) in MIX.iter().enumerate() {
        if roll < *weight {
            return i;
        }
        roll -= weight;
    }
    0
}

/// What a client of a `tier` Deployment reaches: its port by name or by
/// number, now and then a range.
fn service_port(rng: &mut StdRng, tier: Tier) -> Vec<PortSpec> {
    let (name, number) = tier.ports()[0];
    match rng.random_range(0..10) {
        0..=4 => vec![tcp(PortRef::Named(name.into()))],
        5..=8 => vec![tcp(PortRef::Number(number))],
        _ => vec![PortSpec {
            end_port: Some(8100),
            ..tcp(PortRef::Number(8000))
        }],
    }
}

/// Egress only: to a Deployment of the namespace, DNS in `kube-system`,
/// now and then HTTPS anywhere but the cloud's metadata address.
fn egress(rng: &mut StdRng, p: &mut Policy, peer_app: usize) {
    p.ingress_isolation = false;
    p.egress_isolation = true;
    let to = select(&[("app", &format!("app-{peer_app}"))]);
    let dns = select(&[("kubernetes.io/metadata.name", "kube-system")]);
    let dns_port = |protocol| PortSpec {
        protocol,
        port: Some(PortRef::Number(53)),
        end_port: None,
    };
    p.egress = vec![
        Rule {
            peers: vec![pods(Some(to), None)],
            ports: service_port(rng, Tier::of(peer_app)),
        },
        Rule {
            peers: vec![pods(None, Some(dns))],
            ports: vec![dns_port(Protocol::Udp), dns_port(Protocol::Tcp)],
        },
    ];
    if rng.random_bool(0.25) {
        p.egress.push(Rule {
            peers: block("0.0.0.0/0", &["169.254.169.254/32"]),
            ports: vec![tcp(PortRef::Number(443))],
        });
    }
}
