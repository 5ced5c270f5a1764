//! A synthetic cluster for the policy engine, the same for a given
//! [`ClusterSpec`] (seed included): namespaces with the labels teams put on
//! them, pods of Deployments (replicas share their labels) spread evenly
//! over the nodes, one Service per Deployment, and a mix of NetworkPolicies
//! (`mix.rs`). Objects are made on demand, so feeding an engine holds no
//! second copy of the cluster in memory.

use std::net::{IpAddr, Ipv4Addr};

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use sarena_core::api::Labels;
use sarena_core::policy::{Kind, NamedPort, PolicyEvent, PolicyNamespace, PolicyPod, Protocol};
use serde::{Deserialize, Serialize};

use super::mix::Tier;
use crate::BenchError;

/// The seed of the published runs.
pub const SEED: u64 = 26;

/// This node's name (node 0).
pub const LOCAL_NODE: &str = "node-000";

/// Addresses per node block (a /23): the most pods a node can hold here.
pub const PODS_PER_NODE_MAX: usize = 500;

/// Node blocks fit in the pod network 10.64.0.0/10.
const NODES_MAX: usize = (1 << 22) / 512;

/// The shape of a cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterSpec {
    /// Pods of every node.
    pub pods: usize,
    /// Nodes (node 0 is this one).
    pub nodes: usize,
    /// Namespaces (the first two are `kube-system` and `monitoring`).
    pub namespaces: usize,
    /// NetworkPolicies, a default-deny in each namespace first.
    pub policies: usize,
    /// Deployments per namespace (`app=app-N`).
    pub apps_per_namespace: usize,
    /// The generator's seed.
    pub seed: u64,
}

impl ClusterSpec {
    /// Issue 26's scale point: 10,000 pods on 100 nodes, 200 namespaces,
    /// 1,000 policies.
    pub fn scale() -> ClusterSpec {
        ClusterSpec {
            pods: 10_000,
            nodes: 100,
            namespaces: 200,
            policies: 1_000,
            apps_per_namespace: 10,
            seed: SEED,
        }
    }

    /// Issue 26's change point: 1,000 pods on 10 nodes, 200 policies.
    pub fn change() -> ClusterSpec {
        ClusterSpec {
            pods: 1_000,
            nodes: 10,
            namespaces: 20,
            policies: 200,
            ..ClusterSpec::scale()
        }
    }

    /// A tenth of [`ClusterSpec::scale`] (`--quick`).
    pub fn quick_scale() -> ClusterSpec {
        ClusterSpec {
            pods: 1_000,
            nodes: 10,
            namespaces: 20,
            policies: 100,
            ..ClusterSpec::scale()
        }
    }

    /// A fifth of [`ClusterSpec::change`] (`--quick`).
    pub fn quick_change() -> ClusterSpec {
        ClusterSpec {
            pods: 200,
            nodes: 2,
            namespaces: 4,
            policies: 40,
            ..ClusterSpec::scale()
        }
    }

    /// Whether the numbers make a cluster (addresses included).
    pub fn validate(&self) -> Result<(), BenchError> {
        let bad = |what: String| Err(BenchError::Input { what });
        let sizes = [
            self.pods,
            self.nodes,
            self.namespaces,
            self.apps_per_namespace,
        ];
        if sizes.contains(&0) {
            return bad(format!(
                "cluster {self:?}: pods, nodes, namespaces and apps must be ≥ 1"
            ));
        }
        if self.nodes > NODES_MAX || self.pods.div_ceil(self.nodes) > PODS_PER_NODE_MAX {
            return bad(format!(
                "cluster {self:?}: at most {NODES_MAX} nodes of {PODS_PER_NODE_MAX} pods"
            ));
        }
        Ok(())
    }

    /// Pods on node 0: every node holds `pods / nodes`, the first
    /// `pods % nodes` nodes one more.
    pub fn local_pods(&self) -> usize {
        let even = self.pods.checked_div(self.nodes).unwrap_or(0);
        even + usize::from(!self.pods.is_multiple_of(self.nodes))
    }
}

/// A cluster made from a [`ClusterSpec`]: where each pod runs, which
/// Deployments are half-way through a rollout; everything else on demand.
#[derive(Debug, Clone)]
pub struct Cluster {
    /// Its shape.
    pub spec: ClusterSpec,
    /// Pod → (node, its index on the node).
    placement: Vec<(u32, u32)>,
    /// (namespace, app) → two ReplicaSets (a rollout under way).
    rolling: Vec<bool>,
}

/// `a.b.c.d` + `n`.
fn offset(base: Ipv4Addr, n: usize) -> IpAddr {
    let n = u32::try_from(n).unwrap_or(u32::MAX);
    IpAddr::V4(Ipv4Addr::from(u32::from(base).saturating_add(n)))
}

impl Cluster {
    /// The cluster of `spec` (validated).
    pub fn new(spec: ClusterSpec) -> Result<Cluster, BenchError> {
        spec.validate()?;
        let mut rng = StdRng::seed_from_u64(spec.seed);
        // Node of each pod: an even share each, in a seeded order.
        let mut nodes: Vec<u32> = (0..spec.pods)
            .map(|i| u32::try_from(i % spec.nodes).unwrap_or(u32::MAX))
            .collect();
        nodes.shuffle(&mut rng);
        let mut next = vec![0u32; spec.nodes];
        let placement = (nodes.into_iter())
            .map(|n| {
                let slot = next.get_mut(n as usize).map_or(0, |s| {
                    *s += 1;
                    *s - 1
                });
                (n, slot)
            })
            .collect();
        let rolling = (0..spec.namespaces * spec.apps_per_namespace)
            .map(|_| rng.random_bool(0.1))
            .collect();
        Ok(Cluster {
            spec,
            placement,
            rolling,
        })
    }

    /// Namespace `i`'s name.
    pub fn namespace_name(&self, i: usize) -> String {
        match i {
            0 => "kube-system".into(),
            1 => "monitoring".into(),
            _ => format!("ns-{i:03}"),
        }
    }

    /// Namespace `i`: its name label, a team (20 of them) and an
    /// environment.
    pub fn namespace(&self, i: usize) -> PolicyNamespace {
        let name = self.namespace_name(i);
        let labels = Labels::from([
            ("kubernetes.io/metadata.name".to_string(), name.clone()),
            ("team".to_string(), format!("team-{}", i % 20)),
            (
                "env".to_string(),
                ["prod", "staging", "dev"][i % 3].to_string(),
            ),
        ]);
        PolicyNamespace { name, labels }
    }

    /// Node `n`'s name.
    pub fn node_name(n: usize) -> String {
        format!("node-{n:03}")
    }

    /// Pod `i`: namespace `i % namespaces`, Deployment `app-K` of it.
    pub fn pod(&self, i: usize) -> PolicyPod {
        let ns = i % self.spec.namespaces;
        let ordinal = i / self.spec.namespaces;
        let app = ordinal % self.spec.apps_per_namespace;
        let replica = ordinal / self.spec.apps_per_namespace;
        let (node, slot) = self.placement.get(i).copied().unwrap_or_default();
        let base = Ipv4Addr::new(10, 64, 0, 2);
        let ip = offset(base, node as usize * 512 + slot as usize);
        self.app_pod(ns, app, replica, Cluster::node_name(node as usize), ip)
    }

    /// A replica of Deployment `app` of namespace `ns` on `node` at `ip`.
    pub fn app_pod(
        &self,
        ns: usize,
        app: usize,
        replica: usize,
        node: String,
        ip: IpAddr,
    ) -> PolicyPod {
        let rolling = (self.rolling)
            .get(ns * self.spec.apps_per_namespace + app)
            .copied()
            .unwrap_or(false);
        let set = u64::from(rolling && replica % 2 == 1);
        // Ten hex digits, as a ReplicaSet's.
        let key = (ns as u64) << 32 | (app as u64) << 1 | set;
        let hash = format!("{:010x}", key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 24);
        let tier = Tier::of(app);
        let labels = Labels::from([
            ("app".to_string(), format!("app-{app}")),
            ("tier".to_string(), tier.label().to_string()),
            ("pod-template-hash".to_string(), hash.clone()),
        ]);
        let named_ports = (tier.ports().iter())
            .map(|(name, port)| NamedPort {
                name: name.to_string(),
                protocol: Protocol::Tcp,
                port: *port,
            })
            .collect();
        PolicyPod {
            namespace: self.namespace_name(ns),
            name: format!("app-{app}-{hash}-{replica:03}"),
            labels,
            ips: vec![ip],
            named_ports,
            node,
            host_network: false,
        }
    }

    /// Service `i` (one per Deployment): its ClusterIP in 10.96.0.0/12.
    pub fn service(&self, i: usize) -> PolicyEvent {
        let ns = i / self.spec.apps_per_namespace;
        PolicyEvent::Service {
            namespace: self.namespace_name(ns),
            name: format!("app-{}", i % self.spec.apps_per_namespace),
            addresses: vec![offset(Ipv4Addr::new(10, 96, 0, 10), i)],
        }
    }

    /// Services: one per Deployment.
    pub fn services(&self) -> usize {
        self.spec.namespaces * self.spec.apps_per_namespace
    }

    /// This node's address.
    pub fn node_address() -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(192, 168, 10, 1))
    }

    /// Everything a daemon's watches would tell the engine at its start:
    /// each list, then its completion.
    pub fn events(&self) -> impl Iterator<Item = PolicyEvent> + '_ {
        let s = self.spec;
        let namespaces = (0..s.namespaces).map(|i| PolicyEvent::Namespace(self.namespace(i)));
        let pods = (0..s.pods).map(|i| PolicyEvent::Pod(self.pod(i)));
        let policies = (0..s.policies).map(|j| PolicyEvent::Policy(self.policy(j)));
        let services = (0..self.services()).map(|i| self.service(i));
        let node = PolicyEvent::NodeAddresses(vec![Cluster::node_address()]);
        let listed =
            [Kind::Namespaces, Kind::Pods, Kind::Policies, Kind::Services].map(PolicyEvent::Listed);
        (namespaces.chain(pods).chain(policies).chain(services))
            .chain(std::iter::once(node))
            .chain(listed)
    }
}
