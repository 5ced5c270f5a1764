//! The hub against a recording dataplane: nothing before every list is in,
//! one compiled state per burst of events, queries answered from it, a
//! failed apply counted and retried.

use std::sync::Mutex as StdMutex;

use async_trait::async_trait;
use sarena_core::api::{PolicyParty, PolicyProtocol, PolicyVerdict};
use sarena_core::cluster::{ClusterError, ClusterNode};
use sarena_core::dataplane::ebpf::BpfError;
use sarena_core::dataplane::{DataplaneError, UpdateOutcome};
use sarena_core::policy::{
    LabelSelector, Peer, Policy, PolicyNamespace, PolicyPod, PortRef, PortSpec, Protocol, Rule,
};

use super::*;

/// Records every compiled state; fails the first `fail` applies, then
/// the next `full` with a full `SARENA_POLICY` map.
#[derive(Default)]
struct Recorder {
    applied: StdMutex<Vec<Arc<CompiledPolicy>>>,
    fail: StdMutex<usize>,
    full: StdMutex<usize>,
}

#[async_trait]
impl NodeUpdates for Recorder {
    async fn apply(&self, update: &NodeUpdate) -> Result<UpdateOutcome, DataplaneError> {
        let NodeUpdate::Policy(compiled) = update else {
            return Ok(UpdateOutcome::Ignored);
        };
        let mut fail = self.fail.lock().unwrap();
        if *fail > 0 {
            *fail -= 1;
            return Err(DataplaneError::Io {
                call: "write the policy maps",
                path: "/sys/fs/bpf/test".into(),
                source: std::io::Error::other("refused by the test"),
            });
        }
        let mut full = self.full.lock().unwrap();
        if *full > 0 {
            *full -= 1;
            return Err(DataplaneError::Ebpf(BpfError::PolicyWrites {
                failed: 2,
                writes: 5,
                full_maps: vec!["SARENA_POLICY"],
            }));
        }
        self.applied.lock().unwrap().push(compiled.clone());
        Ok(UpdateOutcome::Applied)
    }
}

fn labels(app: &str) -> sarena_core::api::Labels {
    [("app".to_string(), app.to_string())].into()
}

fn pod(name: &str, app: &str, ip: &str) -> PolicyEvent {
    PolicyEvent::Pod(PolicyPod {
        namespace: "ns".into(),
        name: name.into(),
        labels: labels(app),
        ips: vec![ip.parse().unwrap()],
        node: "node1".into(),
        ..PolicyPod::default()
    })
}

/// `ns/web-policy`: app=web takes TCP 80 from app=client only.
fn web_policy() -> PolicyEvent {
    PolicyEvent::Policy(Policy {
        namespace: "ns".into(),
        name: "web-policy".into(),
        pod_selector: LabelSelector {
            match_labels: labels("web"),
            ..LabelSelector::default()
        },
        ingress_isolation: true,
        egress_isolation: false,
        ingress: vec![Rule {
            peers: vec![Peer::Pods {
                pods: Some(LabelSelector {
                    match_labels: labels("client"),
                    ..LabelSelector::default()
                }),
                namespaces: None,
            }],
            ports: vec![PortSpec {
                protocol: Protocol::Tcp,
                port: Some(PortRef::Number(80)),
                end_port: None,
            }],
        }],
        egress: vec![],
    })
}

fn listed() -> Vec<PolicyEvent> {
    [Kind::Pods, Kind::Namespaces, Kind::Policies, Kind::Services]
        .into_iter()
        .map(PolicyEvent::Listed)
        .collect()
}

fn query(from: &str, to: &str, port: u16) -> PolicyQuery {
    PolicyQuery {
        from: from.parse().unwrap(),
        to: to.parse().unwrap(),
        port,
        protocol: PolicyProtocol::Tcp,
    }
}

fn hub(recorder: &Arc<Recorder>, metrics: Option<PolicyMetrics>) -> PolicyHub {
    hub_with_api(recorder, metrics, None)
}

fn hub_with_api(
    recorder: &Arc<Recorder>,
    metrics: Option<PolicyMetrics>,
    api: Option<Arc<dyn ClusterApi>>,
) -> PolicyHub {
    let (hub, _task) = PolicyHub::spawn(PolicyHubParts {
        node: "node1".into(),
        first_identity: 0,
        dataplane: Some(recorder.clone()),
        metrics,
        api,
    });
    hub
}

async fn send(hub: &PolicyHub, events: impl IntoIterator<Item = PolicyEvent>) {
    for e in events {
        hub.events().send(e).await.unwrap();
    }
    // Past the debounce window: the task has compiled what it had.
    tokio::time::sleep(DEBOUNCE * 3).await;
}

#[tokio::test(start_paused = true)]
async fn nothing_is_compiled_or_answered_before_every_list_is_in() {
    let recorder = Arc::new(Recorder::default());
    let hub = hub(&recorder, None);
    let ns = PolicyEvent::Namespace(PolicyNamespace {
        name: "ns".into(),
        labels: Default::default(),
    });
    send(&hub, [ns, pod("web", "web", "10.0.0.2"), web_policy()]).await;
    send(&hub, listed().into_iter().take(3)).await;
    assert!(recorder.applied.lock().unwrap().is_empty());
    assert!(hub.compiled().is_none());
    let e = hub.endpoints().await.unwrap_err();
    assert_eq!(e.kind(), Some(ApiErrorKind::Unavailable));
    let e = hub
        .explain(query("ns/web", "ns/web", 80))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), Some(ApiErrorKind::Unavailable));
    send(&hub, listed().into_iter().skip(3)).await;
    assert_eq!(recorder.applied.lock().unwrap().len(), 1);
    let endpoints = hub.endpoints().await.unwrap();
    assert_eq!(endpoints.len(), 1);
    assert!(endpoints[0].ingress_isolated && !endpoints[0].egress_isolated);
    assert_eq!(endpoints[0].policies, ["ns/web-policy"]);
}

#[tokio::test(start_paused = true)]
async fn a_burst_of_changes_is_one_compile_and_explain_names_the_rule() {
    let recorder = Arc::new(Recorder::default());
    let hub = hub(&recorder, None);
    send(&hub, listed()).await;
    assert_eq!(recorder.applied.lock().unwrap().len(), 1);
    let burst = (0..50)
        .map(|i| pod(&format!("other-{i}"), "other", &format!("10.0.1.{i}")))
        .chain([
            pod("web", "web", "10.0.0.2"),
            pod("client", "client", "10.0.0.3"),
            web_policy(),
        ]);
    send(&hub, burst).await;
    let applied = recorder.applied.lock().unwrap().clone();
    assert_eq!(applied.len(), 2, "one compile for the whole burst");
    assert_eq!(applied[1].endpoints.len(), 52);

    let allowed = hub.explain(query("ns/client", "ns/web", 80)).await.unwrap();
    assert!(allowed.allowed);
    let ingress = allowed.ingress.unwrap();
    assert_eq!(ingress.verdict, PolicyVerdict::Allowed);
    assert_eq!(ingress.rule.as_deref(), Some("ns/web-policy ingress[0]"));
    assert_eq!(allowed.egress.unwrap().verdict, PolicyVerdict::NotIsolated);

    let denied = hub
        .explain(query("ns/other-1", "ns/web", 80))
        .await
        .unwrap();
    assert!(!denied.allowed);
    assert_eq!(denied.ingress.unwrap().verdict, PolicyVerdict::Denied);
    let wrong_port = hub.explain(query("10.0.0.3", "ns/web", 81)).await.unwrap();
    assert!(!wrong_port.allowed);
    assert!(wrong_port.egress.is_none());
    assert!(matches!(wrong_port.query.from, PolicyParty::Address(_)));

    let e = hub
        .explain(query("ns/ghost", "ns/web", 80))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), Some(ApiErrorKind::NotFound));
}

#[tokio::test(start_paused = true)]
async fn a_failed_apply_is_counted_and_retried() {
    let recorder = Arc::new(Recorder::default());
    *recorder.fail.lock().unwrap() = 1;
    let mut registry = prometheus_client::registry::Registry::default();
    let metrics = PolicyMetrics::register(&mut registry);
    let hub = hub(&recorder, Some(metrics));
    send(
        &hub,
        [pod("web", "web", "10.0.0.2"), web_policy()]
            .into_iter()
            .chain(listed()),
    )
    .await;
    assert!(recorder.applied.lock().unwrap().is_empty());
    assert!(
        hub.compiled().is_some(),
        "kept for queries even when not applied"
    );
    tokio::time::sleep(RETRY * 2).await;
    assert_eq!(recorder.applied.lock().unwrap().len(), 1);
    let mut out = String::new();
    prometheus_client::encoding::prometheus_text::encode(&mut out, &registry).unwrap();
    for line in [
        "sarena_policy_apply_errors_total 1",
        "sarena_policy_policies 1",
        "sarena_policy_endpoints_isolated{direction=\"ingress\"} 1",
    ] {
        assert!(out.lines().any(|l| l == line), "{line} missing in\n{out}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_full_map_is_named_in_one_node_event_and_counted_per_retry() {
    let recorder = Arc::new(Recorder::default());
    *recorder.full.lock().unwrap() = 3;
    let api = Arc::new(Warnings::default());
    let mut registry = prometheus_client::registry::Registry::default();
    let metrics = PolicyMetrics::register(&mut registry);
    let hub = hub_with_api(&recorder, Some(metrics), Some(api.clone()));
    send(
        &hub,
        [pod("web", "web", "10.0.0.2"), web_policy()]
            .into_iter()
            .chain(listed()),
    )
    .await;
    // The first try and two retries fail, the third retry applies.
    tokio::time::sleep(RETRY * 4).await;
    assert_eq!(recorder.applied.lock().unwrap().len(), 1);
    let mut out = String::new();
    prometheus_client::encoding::prometheus_text::encode(&mut out, &registry).unwrap();
    let line = "sarena_policy_map_full_total{map=\"SARENA_POLICY\"} 3";
    assert!(out.lines().any(|l| l == line), "{line} missing in\n{out}");
    let warned = api.warned.lock().unwrap().clone();
    assert_eq!(warned.len(), 1, "one Event for three failures: {warned:?}");
    let (node, reason, message) = &warned[0];
    assert_eq!((node.as_str(), reason.as_str()), ("node1", "PolicyMapFull"));
    assert!(message.contains("SARENA_POLICY are full"), "{message}");
    assert!(message.contains("2 of 7 writes failed"), "{message}");
}

/// Records the Events the hub posts.
#[derive(Default)]
struct Warnings {
    warned: StdMutex<Vec<(String, String, String)>>,
}

#[async_trait]
impl ClusterApi for Warnings {
    async fn mark_network_available(&self, _node: &str) -> Result<(), ClusterError> {
        Ok(())
    }

    async fn clear_network_condition(&self, _node: &str) -> Result<bool, ClusterError> {
        Ok(false)
    }

    async fn warn(
        &self,
        node: &ClusterNode,
        reason: &str,
        message: &str,
    ) -> Result<(), ClusterError> {
        let event = (node.name.clone(), reason.to_owned(), message.to_owned());
        self.warned.lock().unwrap().push(event);
        Ok(())
    }
}

/// End to end from the API object: a rule whose every peer is unreadable
/// allows nothing (not "any peer"), while the readable rule still allows.
#[tokio::test(start_paused = true)]
async fn an_unreadable_rule_from_the_api_server_allows_nothing() {
    let np: k8s_openapi::api::networking::v1::NetworkPolicy =
        serde_json::from_value(serde_json::json!({
            "metadata": {"namespace": "ns", "name": "hostile"},
            "spec": {
                "podSelector": {"matchLabels": {"app": "web"}},
                "ingress": [
                    {"from": [{"podSelector": {"matchExpressions": [
                        {"key": "app", "operator": "Resembles", "values": ["client"]}
                    ]}}]},
                    {"from": [{"podSelector": {"matchLabels": {"app": "client"}}}],
                     "ports": [{"port": 443}]}
                ]
            }
        }))
        .unwrap();
    let (policy, warnings) = sarena_k8s::policy::network_policy(&np).unwrap();
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    let recorder = Arc::new(Recorder::default());
    let hub = hub(&recorder, None);
    let events = [
        pod("web", "web", "10.0.0.2"),
        pod("client", "client", "10.0.0.3"),
        PolicyEvent::Policy(policy),
    ];
    send(&hub, events.into_iter().chain(listed())).await;
    let on_80 = hub.explain(query("ns/client", "ns/web", 80)).await.unwrap();
    assert!(!on_80.allowed, "{on_80:?}");
    let on_443 = hub
        .explain(query("ns/client", "ns/web", 443))
        .await
        .unwrap();
    assert_eq!(
        on_443.ingress.unwrap().rule.as_deref(),
        Some("ns/hostile ingress[1]")
    );
}
