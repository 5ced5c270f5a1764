//! Change latency: on an engine holding a whole cluster and its compiled
//! state, one change at a time, timed from `handle` of its event to the end
//! of the `compile` that follows (the engine's share of "policy created →
//! enforced"): a policy created, then deleted; a pod relabelled (then put
//! back, untimed); a pod created (every other one on this node), then
//! deleted.

use std::net::{IpAddr, Ipv4Addr};
use std::time::Instant;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sarena_core::policy::{PolicyEngine, PolicyEvent};
use serde::{Deserialize, Serialize};

use super::cluster::{Cluster, ClusterSpec, LOCAL_NODE};
use crate::BenchError;
use crate::stats::{Summary, ms};

/// The operations timed, in the order of each round.
pub const OPS: [&str; 5] = [
    "policy created",
    "policy deleted",
    "pod relabelled",
    "pod created",
    "pod deleted",
];

/// One operation's latencies.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ChangeRow {
    /// One of [`OPS`].
    pub op: String,
    /// `handle` → end of `compile`, ms.
    pub summary: Option<Summary>,
    /// Every sample, ms, in order.
    pub samples_ms: Vec<f64>,
}

/// The change run's results.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ChangeResults {
    /// The cluster.
    pub spec: ClusterSpec,
    /// Rounds (each op once per round).
    pub rounds: usize,
    /// The first compile of the cluster (untimed rounds start after it), ms.
    pub first_compile_ms: f64,
    /// One row per op of [`OPS`].
    pub rows: Vec<ChangeRow>,
}

impl ChangeResults {
    /// The row of `op`.
    pub fn row(&self, op: &str) -> Option<&ChangeRow> {
        self.rows.iter().find(|r| r.op == op)
    }
}

/// Tells `engine` the events, compiles; the time taken, ms.
fn timed(engine: &mut PolicyEngine, events: Vec<PolicyEvent>) -> f64 {
    let started = Instant::now();
    for e in events {
        engine.handle(e);
    }
    let compiled = engine.compile();
    let took = ms(started.elapsed());
    drop(compiled);
    took
}

/// Runs `rounds` rounds of [`OPS`] on the cluster of `spec`.
pub fn measure(spec: ClusterSpec, rounds: usize) -> Result<ChangeResults, BenchError> {
    let cluster = Cluster::new(spec)?;
    let mut engine = PolicyEngine::new(LOCAL_NODE, 256);
    for event in cluster.events() {
        engine.handle(event);
    }
    let started = Instant::now();
    let first = engine.compile();
    let first_compile_ms = ms(started.elapsed());
    drop(first);
    let mut rng = StdRng::seed_from_u64(spec.seed.wrapping_add(1));
    let mut samples: Vec<Vec<f64>> = vec![Vec::with_capacity(rounds); OPS.len()];
    let mut push = |op: usize, v: f64| {
        if let Some(s) = samples.get_mut(op) {
            s.push(v);
        }
    };
    for k in 0..rounds {
        // A policy, created then deleted.
        let ns = rng.random_range(0..spec.namespaces);
        let policy = cluster.random_policy(&mut rng, ns, format!("bench-change-{k}"));
        let gone = PolicyEvent::PolicyGone {
            namespace: policy.namespace.clone(),
            name: policy.name.clone(),
        };
        push(0, timed(&mut engine, vec![PolicyEvent::Policy(policy)]));
        push(1, timed(&mut engine, vec![gone]));

        // A pod relabelled, then put back.
        let pod = cluster.pod(rng.random_range(0..spec.pods));
        let mut relabelled = pod.clone();
        relabelled
            .labels
            .insert("quarantine".into(), format!("case-{k}"));
        push(2, timed(&mut engine, vec![PolicyEvent::Pod(relabelled)]));
        timed(&mut engine, vec![PolicyEvent::Pod(pod)]);

        // A pod created (a Deployment scaled up), then deleted.
        let (ns, app) = (
            rng.random_range(0..spec.namespaces),
            rng.random_range(0..spec.apps_per_namespace),
        );
        let node = if k % 2 == 0 {
            LOCAL_NODE.to_string()
        } else {
            Cluster::node_name(rng.random_range(0..spec.nodes))
        };
        let ip = IpAddr::V4(Ipv4Addr::new(10, 126, (k / 250) as u8, (k % 250 + 2) as u8));
        let mut new = cluster.app_pod(ns, app, 900 + k, node, ip);
        new.name = format!("bench-new-{k}");
        let gone = PolicyEvent::PodGone {
            namespace: new.namespace.clone(),
            name: new.name.clone(),
        };
        push(3, timed(&mut engine, vec![PolicyEvent::Pod(new)]));
        push(4, timed(&mut engine, vec![gone]));
    }
    let rows = (OPS.iter().zip(samples))
        .map(|(op, samples_ms)| ChangeRow {
            op: op.to_string(),
            summary: Summary::of(&samples_ms),
            samples_ms,
        })
        .collect();
    Ok(ChangeResults {
        spec,
        rounds,
        first_compile_ms,
        rows,
    })
}
