//! The operator's routes (`/daemon/status`, `/stats/endpoints…`) and the
//! request observer, against `MockNodeApi`.

use std::sync::Mutex;

use sarena_core::api::{
    DaemonStatus, DataplaneCounters, Endpoint, EndpointSpec, EndpointStats, Health, IpamState,
    MockNodeApi, PodRef,
};
use serde_json::{Value, json};

use super::*;

async fn get(
    daemon: &MockNodeApi,
    observer: Option<&dyn RequestObserver>,
    path: &str,
) -> (u16, Value) {
    let req = Request::builder()
        .method("GET")
        .uri(path)
        .body(Full::new(Bytes::new()))
        .unwrap();
    let resp = handle_observed(daemon, observer, req).await;
    let status = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (status, serde_json::from_slice(&bytes).unwrap())
}

fn endpoint() -> Endpoint {
    Endpoint {
        spec: EndpointSpec {
            owner: Attachment {
                container_id: "c1".into(),
                ifname: "eth0".into(),
            },
            pod: PodRef::default(),
            host_ifname: "lxc0".into(),
            host_ifindex: 3,
            host_mac: "02:00:00:00:00:01".parse().unwrap(),
            pod_mac: "02:00:00:00:00:02".parse().unwrap(),
            addresses: vec!["10.1.0.2/24".parse().unwrap()],
            netns: "/run/netns/t".into(),
            bandwidth: None,
            identity: Default::default(),
        },
        created_at: 1,
    }
}

#[test]
fn operator_routes_and_their_templates() {
    let r = |m: &str, p: &str| route(&m.parse().unwrap(), p, None);
    assert_eq!(r("GET", "/v1/daemon/status"), Ok(Route::Status));
    assert_eq!(r("GET", "/v1/stats/endpoints"), Ok(Route::EndpointStats));
    let of = r("GET", "/v1/stats/endpoints/c1/eth0").unwrap();
    assert_eq!(of.template(), "/v1/stats/endpoints/:container_id/:ifname");
    for (m, p) in [
        ("POST", "/v1/daemon/status"),
        ("DELETE", "/v1/stats/endpoints"),
        ("POST", "/v1/stats/endpoints/c1/eth0"),
    ] {
        let e = r(m, p).unwrap_err();
        assert_eq!(
            (e.kind, e.allow),
            (ApiErrorKind::MethodNotAllowed, Some("GET"))
        );
    }
    assert_eq!(
        r("GET", "/v1/stats/endpoints/-bad/eth0").unwrap_err().kind,
        ApiErrorKind::BadRequest
    );
    assert_eq!(
        r("GET", "/v1/stats").unwrap_err().kind,
        ApiErrorKind::NotFound
    );
}

#[tokio::test]
async fn status_and_stats_are_served() {
    let mut daemon = MockNodeApi::new();
    daemon.expect_status().returning(|| {
        let health = Health {
            ready: true,
            message: "fine".into(),
        };
        Ok(DaemonStatus::from_parts(
            health,
            "ebpf",
            &IpamState::default(),
            0,
        ))
    });
    daemon.expect_endpoint_stats().returning(|| {
        let mut counters = DataplaneCounters::default();
        counters.counters.insert("to_pod_packets".into(), 9);
        Ok(vec![EndpointStats {
            endpoint: endpoint(),
            counters: Some(counters),
            bandwidth: None,
        }])
    });
    daemon.expect_endpoint_stats_of().returning(|o| {
        Ok((o.container_id == "c1").then(|| EndpointStats {
            endpoint: endpoint(),
            counters: None,
            bandwidth: None,
        }))
    });

    let (status, body) = get(&daemon, None, "/v1/daemon/status").await;
    assert_eq!(status, 200);
    assert_eq!(body["health"], json!({"ready": true, "message": "fine"}));
    assert_eq!(body["dataplane"]["mode"], "ebpf");

    let (status, body) = get(&daemon, None, "/v1/stats/endpoints").await;
    assert_eq!(status, 200);
    assert_eq!(body[0]["counters"]["counters"]["to_pod_packets"], 9);
    assert_eq!(body[0]["endpoint"]["host_ifname"], "lxc0");

    let (status, body) = get(&daemon, None, "/v1/stats/endpoints/c1/eth0").await;
    assert_eq!(status, 200);
    assert!(body.get("counters").is_none(), "{body}");
    let (status, body) = get(&daemon, None, "/v1/stats/endpoints/c2/eth0").await;
    assert_eq!((status, body["kind"].as_str()), (404, Some("not_found")));
}

#[derive(Default)]
struct Seen(Mutex<Vec<(String, &'static str, u16)>>);

impl RequestObserver for Seen {
    fn observe(&self, method: &Method, route: &'static str, status: StatusCode, _: Duration) {
        self.0
            .lock()
            .unwrap()
            .push((method.to_string(), route, status.as_u16()));
    }
}

#[tokio::test]
async fn the_observer_sees_templates_and_statuses() {
    let mut daemon = MockNodeApi::new();
    daemon.expect_endpoint().returning(|_| Ok(None));
    let seen = Seen::default();
    get(&daemon, Some(&seen), "/v1/endpoints/abc/eth0").await;
    get(&daemon, Some(&seen), "/v1/nope").await;
    get(&daemon, Some(&seen), "/v1/endpoints/-x/eth0").await;
    assert_eq!(
        *seen.0.lock().unwrap(),
        vec![
            ("GET".into(), "/v1/endpoints/:container_id/:ifname", 404),
            ("GET".into(), UNMATCHED_ROUTE, 404),
            ("GET".into(), UNMATCHED_ROUTE, 400),
        ]
    );
}
