//! [`PolicyHub`]: Kubernetes mode's NetworkPolicy. One task owns the
//! [`PolicyEngine`], fed in order by the Pod, Namespace, NetworkPolicy and
//! Service watches (and this node's addresses). Once every list is in
//! ([`PolicyEngine::synced`]), each change (events gathered for up to
//! [`DEBOUNCE`]) is compiled and pushed to the dataplane as
//! [`NodeUpdate::Policy`]; the last compiled state answers the API's
//! queries (`GET /v1/policy/endpoints`, `GET /v1/policy/explain`, the
//! latter through the same task, since explaining needs the engine).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sarena_core::api::{ApiErrorKind, DaemonError, PolicyEndpoint, PolicyExplanation, PolicyQuery};
use sarena_core::cluster::ClusterApi;
use sarena_core::dataplane::{NodeUpdate, NodeUpdates};
use sarena_core::policy::{CompiledPolicy, Identity, Kind, PolicyEngine, PolicyEvent};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::policy_answers::{endpoints, explain};
use super::policy_warnings::FullMaps;
use crate::metrics::PolicyMetrics;

/// How long events are gathered before one compile.
pub const DEBOUNCE: Duration = Duration::from_millis(20);
/// How long after a failed apply the dataplane is given the state again.
const RETRY: Duration = Duration::from_secs(1);
/// How many events may wait for the engine before senders wait too.
const QUEUE: usize = 4096;

/// What the hub's task needs.
pub struct PolicyHubParts {
    /// This node's name (its pods are the endpoints).
    pub node: String,
    /// The first identity to allocate (at least the first allocatable one).
    pub first_identity: Identity,
    /// Where compiled states go (none: dataplane `none`, only kept).
    pub dataplane: Option<Arc<dyn NodeUpdates>>,
    /// Where compiles and failed applies are counted.
    pub metrics: Option<PolicyMetrics>,
    /// Where a full map is reported (a Warning Event on the Node).
    pub api: Option<Arc<dyn ClusterApi>>,
}

impl std::fmt::Debug for PolicyHubParts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolicyHubParts")
            .field("node", &self.node)
            .field("first_identity", &self.first_identity)
            .finish_non_exhaustive()
    }
}

/// A question for the task.
struct Explain {
    query: PolicyQuery,
    reply: oneshot::Sender<Result<PolicyExplanation, DaemonError>>,
}

/// Kubernetes mode's NetworkPolicy: the engine's task and the last
/// compiled state. Cheap to clone.
#[derive(Clone)]
pub struct PolicyHub {
    events: mpsc::Sender<PolicyEvent>,
    queries: mpsc::Sender<Explain>,
    last: Arc<Mutex<Option<Arc<CompiledPolicy>>>>,
}

impl std::fmt::Debug for PolicyHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolicyHub").finish_non_exhaustive()
    }
}

impl PolicyHub {
    /// Starts the engine's task; it ends when every event sender (the
    /// hubs' and the watches') is gone.
    pub fn spawn(parts: PolicyHubParts) -> (PolicyHub, JoinHandle<()>) {
        let (events, events_rx) = mpsc::channel(QUEUE);
        let (queries, queries_rx) = mpsc::channel(16);
        let last: Arc<Mutex<Option<Arc<CompiledPolicy>>>> = Arc::default();
        let full_maps = FullMaps::new(parts.node.clone(), parts.api, parts.metrics.clone());
        let task = Task {
            full_maps,
            engine: PolicyEngine::new(parts.node, parts.first_identity),
            dataplane: parts.dataplane,
            metrics: parts.metrics,
            last: last.clone(),
            known: KnownPolicies::default(),
            changed: false,
            unapplied: None,
        };
        let handle = tokio::spawn(task.run(events_rx, queries_rx));
        (
            PolicyHub {
                events,
                queries,
                last,
            },
            handle,
        )
    }

    /// Where the watches send what they see.
    pub fn events(&self) -> mpsc::Sender<PolicyEvent> {
        self.events.clone()
    }

    /// The last compiled state (none until every list is in).
    pub fn compiled(&self) -> Option<Arc<CompiledPolicy>> {
        self.last
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// `GET /v1/policy/endpoints`: every endpoint of this node; `unavailable`
    /// until every list is in.
    pub async fn endpoints(&self) -> Result<Vec<PolicyEndpoint>, DaemonError> {
        let compiled = self.compiled().ok_or_else(not_synced)?;
        Ok(endpoints(&compiled))
    }

    /// `GET /v1/policy/explain`: `unavailable` until every list is in,
    /// `not_found` for an unknown pod (or one without an address of the
    /// other end's family).
    pub async fn explain(&self, query: PolicyQuery) -> Result<PolicyExplanation, DaemonError> {
        let gone = || DaemonError::api(ApiErrorKind::Unavailable, "the policy engine stopped");
        let (reply, answer) = oneshot::channel();
        self.queries
            .send(Explain { query, reply })
            .await
            .map_err(|_| gone())?;
        answer.await.map_err(|_| gone())?
    }
}

/// `unavailable`: some list is not in yet.
pub(super) fn not_synced() -> DaemonError {
    DaemonError::api(
        ApiErrorKind::Unavailable,
        "NetworkPolicy is not synced yet (Pods, Namespaces, NetworkPolicies and Services \
         are being listed)",
    )
}

/// The policies known, by (namespace, name), relists included (for the
/// `sarena_policy_policies` gauge).
#[derive(Debug, Default)]
struct KnownPolicies {
    known: BTreeSet<(String, String)>,
    relist: Option<BTreeSet<(String, String)>>,
}

impl KnownPolicies {
    fn see(&mut self, event: &PolicyEvent) {
        match event {
            PolicyEvent::Policy(p) => {
                let key = (p.namespace.clone(), p.name.clone());
                if let Some(relist) = &mut self.relist {
                    relist.insert(key.clone());
                }
                self.known.insert(key);
            }
            PolicyEvent::PolicyGone { namespace, name } => {
                let key = (namespace.clone(), name.clone());
                if let Some(relist) = &mut self.relist {
                    relist.remove(&key);
                }
                self.known.remove(&key);
            }
            PolicyEvent::Relisting(Kind::Policies) => self.relist = Some(BTreeSet::new()),
            PolicyEvent::Listed(Kind::Policies) => {
                if let Some(listed) = self.relist.take() {
                    self.known = listed;
                }
            }
            _ => {}
        }
    }
}

/// The engine's task.
struct Task {
    full_maps: FullMaps,
    engine: PolicyEngine,
    dataplane: Option<Arc<dyn NodeUpdates>>,
    metrics: Option<PolicyMetrics>,
    last: Arc<Mutex<Option<Arc<CompiledPolicy>>>>,
    known: KnownPolicies,
    /// Events changed what a compile gives since the last one.
    changed: bool,
    /// A compiled state the dataplane failed to take, and when to retry.
    unapplied: Option<(Arc<CompiledPolicy>, Instant)>,
}

impl Task {
    async fn run(
        mut self,
        mut events: mpsc::Receiver<PolicyEvent>,
        mut queries: mpsc::Receiver<Explain>,
    ) {
        let mut asking = true;
        loop {
            let retry_at = self.unapplied.as_ref().map(|(_, at)| *at);
            tokio::select! {
                event = events.recv() => {
                    let Some(event) = event else { break };
                    self.take(event);
                    let deadline = Instant::now() + DEBOUNCE;
                    let mut closed = false;
                    loop {
                        match tokio::time::timeout_at(deadline, events.recv()).await {
                            Ok(Some(event)) => self.take(event),
                            Ok(None) => { closed = true; break; }
                            Err(_) => break,
                        }
                    }
                    self.publish().await;
                    if closed { break; }
                }
                query = queries.recv(), if asking => match query {
                    Some(q) => {
                        let answer = self.explain(q.query);
                        let _ = q.reply.send(answer);
                    }
                    None => asking = false,
                },
                () = sleep_until(retry_at), if retry_at.is_some() => {
                    if let Some((compiled, _)) = self.unapplied.take() {
                        self.apply(compiled).await;
                    }
                }
            }
        }
    }

    fn take(&mut self, event: PolicyEvent) {
        self.known.see(&event);
        self.changed |= self.engine.handle(event);
    }

    /// Compiles and applies, when something changed and every list is in.
    async fn publish(&mut self) {
        let first = self.last_compiled().is_none();
        if !(self.changed || first) || !self.engine.synced() {
            return;
        }
        let started = std::time::Instant::now();
        let compiled = Arc::new(self.engine.compile());
        let took = started.elapsed();
        self.changed = false;
        if let Some(m) = &self.metrics {
            let isolated = |f: fn(&sarena_core::policy::EndpointPolicy) -> bool| {
                compiled.endpoints.values().filter(|e| f(e)).count()
            };
            m.compiled(
                self.known.known.len(),
                isolated(|e| e.ingress_isolated),
                isolated(|e| e.egress_isolated),
                took,
            );
        }
        if first {
            tracing::info!(
                endpoints = compiled.endpoints.len(),
                policies = self.known.known.len(),
                "NetworkPolicy synced; enforcing"
            );
        }
        tracing::debug!(took_us = took.as_micros(), "NetworkPolicy compiled");
        self.unapplied = None;
        self.apply(compiled.clone()).await;
        // Published once the dataplane has been given it: what the API
        // answers (`sarena policy list`) is then in force (or retried,
        // fail-closed, when the write failed).
        *self
            .last
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(compiled);
    }

    async fn apply(&mut self, compiled: Arc<CompiledPolicy>) {
        let Some(dataplane) = &self.dataplane else {
            return;
        };
        match dataplane.apply(&NodeUpdate::Policy(compiled.clone())).await {
            Ok(_) => self.full_maps.cleared(),
            Err(e) => {
                tracing::warn!(
                    error = %sarena_core::error_chain(&e),
                    "NetworkPolicy not applied (retrying in {RETRY:?})"
                );
                if let Some(m) = &self.metrics {
                    m.apply_failed();
                }
                self.full_maps.failed(&e);
                self.unapplied = Some((compiled, Instant::now() + RETRY));
            }
        }
    }

    fn last_compiled(&self) -> Option<Arc<CompiledPolicy>> {
        self.last
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    fn explain(&mut self, query: PolicyQuery) -> Result<PolicyExplanation, DaemonError> {
        let compiled = self.last_compiled().ok_or_else(not_synced)?;
        explain(&mut self.engine, &compiled, query)
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
#[path = "policy_tests.rs"]
mod tests;
