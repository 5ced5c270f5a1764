//! The acceptance test: an independent model of `networking.k8s.io/v1`
//! NetworkPolicy, written from the specification over the raw pods,
//! namespaces and policies (no identities, no entries), against
//! `compile()` + `decide()` (and `explain()`) on randomized worlds: random
//! labels, namespaces (one never announced), pods on two nodes with IPv4,
//! IPv6 or both (or none), named ports, policies with every peer and port
//! kind, Services and node addresses; each world then changed a few times.

use std::collections::BTreeMap;
use std::net::IpAddr;

use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};

use super::model_gen::*;
use super::*;
use crate::api::Labels;

// ---- the model -------------------------------------------------------------

/// The cluster as the specification talks about it.
#[derive(Debug, Clone, Default)]
struct World {
    pods: BTreeMap<(String, String), PolicyPod>,
    /// Announced namespaces only.
    namespaces: BTreeMap<String, Labels>,
    policies: BTreeMap<(String, String), Policy>,
}

/// A label selector, evaluated the way the API documents it.
fn selects(s: &LabelSelector, labels: &Labels) -> bool {
    for (k, v) in &s.match_labels {
        if labels.get(k) != Some(v) {
            return false;
        }
    }
    for r in &s.match_expressions {
        let value = labels.get(&r.key);
        let ok = match &r.op {
            Operator::In(vs) => matches!(value, Some(v) if vs.contains(v)),
            Operator::NotIn(vs) => !matches!(value, Some(v) if vs.contains(v)),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
        };
        if !ok {
            return false;
        }
    }
    true
}

impl World {
    /// The pod (not on the host network) holding `addr`.
    fn pod_at(&self, addr: IpAddr) -> Option<&PolicyPod> {
        self.pods
            .values()
            .find(|p| !p.host_network && p.ips.contains(&addr))
    }

    fn ns_labels(&self, ns: &str) -> Labels {
        self.namespaces.get(ns).cloned().unwrap_or_default()
    }

    /// The policies that apply to `pod` in `dir` (select it and isolate it).
    fn applying(&self, pod: &PolicyPod, dir: Direction) -> Vec<&Policy> {
        self.policies
            .values()
            .filter(|p| p.namespace == pod.namespace && selects(&p.pod_selector, &pod.labels))
            .filter(|p| match dir {
                Direction::Ingress => p.ingress_isolation,
                Direction::Egress => p.egress_isolation,
            })
            .collect()
    }

    /// Whether rule `rule` of `policy` lets `pod` talk with `peer` in `dir`.
    #[allow(clippy::too_many_arguments)]
    fn rule_allows(
        &self,
        pod: &PolicyPod,
        policy: &Policy,
        rule: &Rule,
        dir: Direction,
        peer: IpAddr,
        proto: u8,
        port: u16,
    ) -> bool {
        let peer_pod = self.pod_at(peer);
        let peer_ok = rule.peers.is_empty()
            || rule.peers.iter().any(|p| match p {
                Peer::Pods { pods, namespaces } => peer_pod.is_some_and(|q| {
                    let ns_ok = match namespaces {
                        None => q.namespace == policy.namespace,
                        Some(s) => selects(s, &self.ns_labels(&q.namespace)),
                    };
                    ns_ok && pods.as_ref().is_none_or(|s| selects(s, &q.labels))
                }),
                Peer::IpBlock { cidr, except } => {
                    cidr.contains(&peer) && !except.iter().any(|e| e.contains(&peer))
                }
            });
        let port_ok = rule.ports.is_empty()
            || rule.ports.iter().any(|s| {
                s.protocol.number() == proto
                    && match &s.port {
                        None => true,
                        Some(PortRef::Number(n)) => *n <= port && port <= s.end_port.unwrap_or(*n),
                        Some(PortRef::Named(name)) => {
                            let owner = match dir {
                                Direction::Ingress => Some(pod),
                                Direction::Egress => peer_pod,
                            };
                            owner.is_some_and(|o| {
                                o.named_ports.iter().any(|np| {
                                    np.name == *name && np.protocol == s.protocol && np.port == port
                                })
                            })
                        }
                    }
            });
        peer_ok && port_ok
    }

    /// The expected decision, as a category: None not isolated (or the
    /// node), Some(allowed).
    fn expect(
        &self,
        pod: &PolicyPod,
        dir: Direction,
        peer: IpAddr,
        proto: u8,
        port: u16,
    ) -> Option<bool> {
        if NODE_ADDRS
            .iter()
            .any(|a| a.parse::<IpAddr>().ok() == Some(peer))
        {
            return None;
        }
        let applying = self.applying(pod, dir);
        if applying.is_empty() {
            return None;
        }
        Some(applying.iter().any(|p| {
            let rules = match dir {
                Direction::Ingress => &p.ingress,
                Direction::Egress => &p.egress,
            };
            rules
                .iter()
                .any(|r| self.rule_allows(pod, p, r, dir, peer, proto, port))
        }))
    }
}

// ---- the comparison -------------------------------------------------------

const NAMESPACES: [&str; 4] = ["a", "b", "c", "d"]; // "d" is never announced

/// What the model expects of one probe.
#[derive(Debug, PartialEq, Eq)]
enum Expect {
    Host,
    NotIsolated,
    Allowed,
    Denied,
}

fn expect(
    w: &World,
    pod: &PolicyPod,
    dir: Direction,
    peer: IpAddr,
    proto: u8,
    port: u16,
) -> Expect {
    if NODE_ADDRS
        .iter()
        .any(|a| a.parse::<IpAddr>().ok() == Some(peer))
    {
        return Expect::Host;
    }
    match w.expect(pod, dir, peer, proto, port) {
        None => Expect::NotIsolated,
        Some(true) => Expect::Allowed,
        Some(false) => Expect::Denied,
    }
}

/// Whether `got` is what the model expects, the allowing rule included.
#[allow(clippy::too_many_arguments)]
fn agrees(
    w: &World,
    c: &CompiledPolicy,
    pod: &PolicyPod,
    dir: Direction,
    peer: IpAddr,
    proto: u8,
    port: u16,
    got: &Decision,
) -> bool {
    match (expect(w, pod, dir, peer, proto, port), got) {
        (Expect::Host, Decision::Host) => true,
        (Expect::NotIsolated, Decision::NotIsolated) => true,
        (Expect::Denied, Decision::Denied) => true,
        (Expect::Allowed, Decision::Allowed(id)) => {
            // The rule named must itself allow the packet.
            let Some(r) = c.rules.get(id) else {
                return false;
            };
            let Some(p) = w.policies.get(&(r.namespace.clone(), r.name.clone())) else {
                return false;
            };
            let rules = if r.direction == Direction::Ingress {
                &p.ingress
            } else {
                &p.egress
            };
            r.direction == dir
                && w.applying(pod, dir).iter().any(|a| a.name == p.name)
                && rules
                    .get(r.index)
                    .is_some_and(|rule| w.rule_allows(pod, p, rule, dir, peer, proto, port))
        }
        _ => false,
    }
}

fn peers(w: &World) -> Vec<IpAddr> {
    let mut out: Vec<IpAddr> = w.pods.values().flat_map(|p| p.ips.clone()).collect();
    for a in OTHER_ADDRS.iter().chain(&SERVICE_ADDRS).chain(&NODE_ADDRS) {
        out.push(a.parse().unwrap());
    }
    out
}

/// Compiles and checks every local endpoint against the model on random
/// (proto, port) probes for every peer and direction; returns the probes run.
fn check(seed: u64, rng: &mut StdRng, e: &mut PolicyEngine, w: &World) -> usize {
    let c = e.compile();
    let local: Vec<&PolicyPod> = w
        .pods
        .values()
        .filter(|p| p.node == NODE && !p.host_network)
        .collect();
    let eps: Vec<PodKey> = local
        .iter()
        .map(|p| PodKey::new(&p.namespace, &p.name))
        .collect();
    assert_eq!(
        c.endpoints.keys().cloned().collect::<Vec<_>>(),
        eps,
        "seed {seed}"
    );
    let mut n = 0;
    for pod in &local {
        let key = PodKey::new(&pod.namespace, &pod.name);
        for dir in [Direction::Ingress, Direction::Egress] {
            for peer in peers(w) {
                for _ in 0..4 {
                    let (proto, port) = match rng.random_range(0..9) {
                        0 => (1, 0),
                        _ => (
                            PROTOS.choose(rng).unwrap().number(),
                            *PORTS.choose(rng).unwrap(),
                        ),
                    };
                    let got = c.decide(&key, dir, peer, proto, port);
                    assert!(
                        agrees(w, &c, pod, dir, peer, proto, port, &got),
                        "seed {seed}: {key} {dir:?} peer {peer} proto {proto} port {port}: got {got:?}, \
                         model {:?}\nworld {w:#?}\nendpoint {:#?}",
                        expect(w, pod, dir, peer, proto, port),
                        c.endpoints[&key],
                    );
                    n += 1;
                }
            }
        }
    }
    n + check_explain(seed, rng, e, w)
}

/// `explain()` between random parties against the model.
fn check_explain(seed: u64, rng: &mut StdRng, e: &mut PolicyEngine, w: &World) -> usize {
    let pods: Vec<&PolicyPod> = w.pods.values().collect();
    let addrs = peers(w);
    let mut n = 0;
    for _ in 0..6 {
        let party = |rng: &mut StdRng| -> (Party, Option<&PolicyPod>) {
            if !pods.is_empty() && rng.random_bool(0.7) {
                let p = *pods.choose(rng).unwrap();
                (Party::Pod(PodKey::new(&p.namespace, &p.name)), Some(p))
            } else {
                (Party::Address(*addrs.choose(rng).unwrap()), None)
            }
        };
        let ((from, fp), (to, tp)) = (party(rng), party(rng));
        let proto = *PROTOS.choose(rng).unwrap();
        let port = *PORTS.choose(rng).unwrap();
        let got = e.explain(&from, &to, proto, port);
        // The addresses: a pod's of the other end's family (both pods: the
        // receiver's first address whose family the sender has).
        let same = |a: &IpAddr, b: &IpAddr| a.is_ipv4() == b.is_ipv4();
        let pair = match (&from, fp, &to, tp) {
            (Party::Address(a), _, Party::Address(b), _) => Some((*a, *b)),
            (_, Some(p), Party::Address(b), _) => {
                p.ips.iter().find(|a| same(a, b)).map(|a| (*a, *b))
            }
            (Party::Address(a), _, _, Some(q)) => {
                q.ips.iter().find(|b| same(a, b)).map(|b| (*a, *b))
            }
            (_, Some(p), _, Some(q)) => q
                .ips
                .iter()
                .find_map(|b| p.ips.iter().find(|a| same(a, b)).map(|a| (*a, *b))),
            _ => unreachable!(),
        };
        let Some((src, dst)) = pair else {
            assert!(
                matches!(got, Err(ExplainError::NoAddress { .. })),
                "seed {seed}: {got:?}"
            );
            continue;
        };
        let got = got.unwrap_or_else(|err| panic!("seed {seed}: {err}"));
        let side = |p: Option<&PolicyPod>, dir, peer| {
            p.filter(|p| !p.host_network)
                .map(|p| expect(w, p, dir, peer, proto.number(), port))
        };
        let (eg, ing) = (
            side(fp, Direction::Egress, dst),
            side(tp, Direction::Ingress, src),
        );
        let cat = |d: &Option<(PodKey, Decision)>| {
            d.as_ref().map(|(_, d)| match d {
                Decision::Host => Expect::Host,
                Decision::NotIsolated => Expect::NotIsolated,
                Decision::Allowed(_) => Expect::Allowed,
                Decision::Denied => Expect::Denied,
            })
        };
        let ctx = format!("seed {seed}: {from:?} -> {to:?} {proto:?}/{port}: {got:?}");
        assert_eq!(cat(&got.egress), eg, "{ctx}");
        assert_eq!(cat(&got.ingress), ing, "{ctx}");
        let allows = |x: &Option<Expect>| !matches!(x, Some(Expect::Denied));
        assert_eq!(got.allowed, allows(&eg) && allows(&ing), "{ctx}");
        n += 1;
    }
    n
}

/// One random change, to the engine and the model alike.
fn mutate(g: &mut Gen, e: &mut PolicyEngine, w: &mut World, serial: &mut u32) {
    *serial += 1;
    let ns = NAMESPACES.choose(&mut g.rng).unwrap().to_string();
    match g.rng.random_range(0..9) {
        0 | 1 => {
            let p = g.pod(&ns, &format!("p{serial}"));
            w.pods
                .insert((p.namespace.clone(), p.name.clone()), p.clone());
            e.handle(PolicyEvent::Pod(p));
        }
        2 => {
            // Relabel a pod (same addresses).
            let Some(k) = w
                .pods
                .keys()
                .cloned()
                .collect::<Vec<_>>()
                .choose(&mut g.rng)
                .cloned()
            else {
                return;
            };
            let labels = g.labels();
            let p = w.pods.get_mut(&k).unwrap();
            p.labels = labels;
            e.handle(PolicyEvent::Pod(p.clone()));
        }
        3 => {
            let Some(k) = w
                .pods
                .keys()
                .cloned()
                .collect::<Vec<_>>()
                .choose(&mut g.rng)
                .cloned()
            else {
                return;
            };
            w.pods.remove(&k);
            e.handle(PolicyEvent::PodGone {
                namespace: k.0,
                name: k.1,
            });
        }
        4 => {
            if ns == "d" {
                return;
            }
            let labels = g.ns_labels();
            w.namespaces.insert(ns.clone(), labels.clone());
            e.handle(PolicyEvent::Namespace(PolicyNamespace { name: ns, labels }));
        }
        5 | 6 => {
            let name = format!("pol{}", g.rng.random_range(0..4));
            let p = g.policy(&ns, &name);
            w.policies
                .insert((p.namespace.clone(), p.name.clone()), p.clone());
            e.handle(PolicyEvent::Policy(p));
        }
        7 => {
            let Some(k) = w
                .policies
                .keys()
                .cloned()
                .collect::<Vec<_>>()
                .choose(&mut g.rng)
                .cloned()
            else {
                return;
            };
            w.policies.remove(&k);
            e.handle(PolicyEvent::PolicyGone {
                namespace: k.0,
                name: k.1,
            });
        }
        _ => {
            // A relist of policies or pods that leaves one object out.
            let kind = if g.rng.random_bool(0.5) {
                Kind::Policies
            } else {
                Kind::Pods
            };
            e.handle(PolicyEvent::Relisting(kind));
            match kind {
                Kind::Policies => {
                    let keys: Vec<_> = w.policies.keys().cloned().collect();
                    if let Some(k) = keys.choose(&mut g.rng) {
                        w.policies.remove(k);
                    }
                    for p in w.policies.values() {
                        e.handle(PolicyEvent::Policy(p.clone()));
                    }
                }
                _ => {
                    let keys: Vec<_> = w.pods.keys().cloned().collect();
                    if let Some(k) = keys.choose(&mut g.rng) {
                        w.pods.remove(k);
                    }
                    for p in w.pods.values() {
                        e.handle(PolicyEvent::Pod(p.clone()));
                    }
                }
            }
            e.handle(PolicyEvent::Listed(kind));
        }
    }
}

fn run(seed: u64) -> usize {
    let mut g = Gen {
        rng: StdRng::seed_from_u64(seed),
        next_host: 1,
    };
    let mut e = PolicyEngine::new(NODE, 1000);
    let mut w = World::default();
    e.handle(PolicyEvent::NodeAddresses(
        NODE_ADDRS.iter().map(|a| a.parse().unwrap()).collect(),
    ));
    e.handle(PolicyEvent::Service {
        namespace: "a".into(),
        name: "svc".into(),
        addresses: SERVICE_ADDRS.iter().map(|a| a.parse().unwrap()).collect(),
    });
    for ns in &NAMESPACES[..3] {
        let labels = g.ns_labels();
        w.namespaces.insert(ns.to_string(), labels.clone());
        e.handle(PolicyEvent::Namespace(PolicyNamespace {
            name: ns.to_string(),
            labels,
        }));
    }
    let mut serial = 0;
    for _ in 0..g.rng.random_range(3..8) {
        mutate(&mut g, &mut e, &mut w, &mut serial);
        let ns = NAMESPACES.choose(&mut g.rng).unwrap().to_string();
        let p = g.pod(&ns, &format!("q{serial}"));
        w.pods
            .insert((p.namespace.clone(), p.name.clone()), p.clone());
        e.handle(PolicyEvent::Pod(p));
    }
    for i in 0..g.rng.random_range(1..5) {
        let ns = NAMESPACES.choose(&mut g.rng).unwrap().to_string();
        let p = g.policy(&ns, &format!("init{i}"));
        w.policies
            .insert((p.namespace.clone(), p.name.clone()), p.clone());
        e.handle(PolicyEvent::Policy(p));
    }
    let mut probes = 0;
    let mut rng = StdRng::seed_from_u64(seed ^ 0x5eed);
    for _ in 0..4 {
        probes += check(seed, &mut rng, &mut e, &w);
        for _ in 0..g.rng.random_range(1..4) {
            mutate(&mut g, &mut e, &mut w, &mut serial);
        }
    }
    probes
}

#[test]
fn compiled_decisions_match_the_model_on_random_worlds() {
    let probes: usize = (0..1000u64).map(run).sum();
    assert!(probes > 100_000, "only {probes} probes");
}
