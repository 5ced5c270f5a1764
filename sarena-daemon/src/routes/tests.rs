//! Routing and handler tests against `MockNodeApi`: a mock without an expectation
//! panics when called, so these also prove bad requests never reach the backend.

use hyper::HeaderMap;
use sarena_core::api::{
    AllocateRequest, Allocation, DaemonConfig, Deleted, Endpoint, EndpointSpec, GcReport,
    MockNodeApi, PodRef,
};
use serde_json::{Value, json};

use super::*;

struct Answer {
    status: u16,
    body: Value,
    headers: HeaderMap,
}

async fn call(daemon: &MockNodeApi, method: &str, path: &str, body: &str) -> Answer {
    let req = Request::builder()
        .method(method)
        .uri(path)
        .body(Full::new(Bytes::from(body.to_owned())))
        .unwrap();
    let resp = handle(daemon, req).await;
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    let body = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(headers[header::CONTENT_TYPE], "application/json");
    Answer {
        status,
        body,
        headers,
    }
}

fn owner(cid: &str) -> Attachment {
    Attachment {
        container_id: cid.into(),
        ifname: "eth0".into(),
    }
}

fn endpoint(cid: &str) -> Endpoint {
    Endpoint {
        spec: EndpointSpec {
            owner: owner(cid),
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

fn assert_error(a: &Answer, status: u16, kind: &str, needle: &str) {
    assert_eq!(a.status, status, "{}", a.body);
    assert_eq!(a.body["kind"], kind, "{}", a.body);
    let message = a.body["message"].as_str().unwrap();
    assert!(
        message.contains(needle),
        "{message:?} should contain {needle:?}"
    );
}

#[test]
fn route_table() {
    let r = |m: &str, p: &str| route(&m.parse().unwrap(), p, None);
    assert_eq!(r("GET", "/v1/daemon/config"), Ok(Route::Config));
    assert_eq!(r("GET", "/v1/daemon/health"), Ok(Route::Health));
    assert_eq!(r("POST", "/v1/ipam/allocate"), Ok(Route::Allocate));
    assert_eq!(
        r("DELETE", "/v1/ipam/allocations/c1/eth0"),
        Ok(Route::Release(owner("c1")))
    );
    assert_eq!(r("GET", "/v1/ipam"), Ok(Route::Ipam));
    assert_eq!(r("POST", "/v1/endpoint/create"), Ok(Route::CreateEndpoint));
    assert_eq!(r("GET", "/v1/endpoints"), Ok(Route::Endpoints));
    assert_eq!(
        r("GET", "/v1/endpoints/c1/eth0"),
        Ok(Route::GetEndpoint(owner("c1")))
    );
    assert_eq!(
        r("DELETE", "/v1/endpoints/c1/eth0"),
        Ok(Route::DeleteEndpoint(owner("c1"), false))
    );
    let q = |query| route(&Method::DELETE, "/v1/endpoints/c1/eth0", Some(query));
    assert_eq!(
        q("veth=remove"),
        Ok(Route::DeleteEndpoint(owner("c1"), true))
    );
    assert_eq!(
        q("allocation=keep"),
        Ok(Route::UnregisterEndpoint(owner("c1")))
    );
    assert_eq!(q("veth=keep").unwrap_err().kind, ApiErrorKind::BadRequest);
    assert_eq!(r("POST", "/v1/gc"), Ok(Route::Gc));
    let odd = Attachment {
        container_id: "c1".into(),
        ifname: "a@b".into(),
    };
    assert_eq!(
        r("GET", "/v1/endpoints/c1/a%40b"),
        Ok(Route::GetEndpoint(odd))
    );

    for (m, p) in [
        ("GET", "/"),
        ("GET", "/v1"),
        ("GET", "/v1/"),
        ("GET", "/v2/daemon/config"),
        ("GET", "/v1x/daemon/config"),
        ("GET", "/v1/daemon"),
        ("GET", "/v1/daemon/config/"),
        ("GET", "/v1/endpoints/c1"),
        ("GET", "/v1/endpoints/c1/eth0/x"),
        ("DELETE", "/v1/ipam/allocations/c1"),
    ] {
        assert_eq!(r(m, p).unwrap_err().kind, ApiErrorKind::NotFound, "{m} {p}");
    }
    for (m, p, allow) in [
        ("POST", "/v1/daemon/config", "GET"),
        ("DELETE", "/v1/daemon/health", "GET"),
        ("PUT", "/v1/ipam", "GET"),
        ("GET", "/v1/ipam/allocate", "POST"),
        ("GET", "/v1/ipam/allocations/c1/eth0", "DELETE"),
        ("GET", "/v1/endpoint/create", "POST"),
        ("POST", "/v1/endpoints", "GET"),
        ("POST", "/v1/endpoints/c1/eth0", "GET, DELETE"),
        ("GET", "/v1/gc", "POST"),
        ("HEAD", "/v1/daemon/config", "GET"),
    ] {
        let e = r(m, p).unwrap_err();
        assert_eq!(
            (e.kind, e.allow),
            (ApiErrorKind::MethodNotAllowed, Some(allow)),
            "{m} {p}"
        );
    }
    for (m, p) in [
        ("GET", "/v1/endpoints/-c1/eth0"),
        ("GET", "/v1/endpoints/c%2F1/eth0"),
        ("DELETE", "/v1/endpoints/c1/a%2Fb"),
        ("DELETE", "/v1/ipam/allocations/c1/0123456789abcdef"),
        ("DELETE", "/v1/ipam/allocations/c1/.."),
        ("DELETE", "/v1/ipam/allocations/c1/e%zz"),
        ("GET", "/v1/endpoints//eth0"),
        ("GET", "/v1/endpoints/c1/"),
    ] {
        assert_eq!(
            r(m, p).unwrap_err().kind,
            ApiErrorKind::BadRequest,
            "{m} {p}"
        );
    }
}

#[tokio::test]
async fn config_and_health() {
    let mut d = MockNodeApi::new();
    d.expect_config().returning(|| {
        Ok(DaemonConfig {
            mtu: 1500,
            dataplane: "kernel".into(),
        })
    });
    d.expect_health().returning(|| {
        Err(DaemonError::api(
            ApiErrorKind::Unavailable,
            "dataplane not loaded",
        ))
    });
    let a = call(&d, "GET", "/v1/daemon/config", "").await;
    assert_eq!(
        (a.status, a.body),
        (200, json!({"mtu": 1500, "dataplane": "kernel"}))
    );
    let a = call(&d, "GET", "/v1/daemon/health", "").await;
    assert_error(&a, 503, "unavailable", "dataplane not loaded");
}

#[tokio::test]
async fn allocate_passes_the_request_through() {
    let body = json!({
        "owner": {"container_id": "c1", "ifname": "eth0"},
        "pod": {"namespace": "ns1", "name": "p"},
        "requested": ["10.1.0.9"],
        "pool": "blue"
    });
    let expected: AllocateRequest = serde_json::from_value(body.clone()).unwrap();
    let mut d = MockNodeApi::new();
    d.expect_allocate()
        .withf(move |req| *req == expected)
        .times(1)
        .returning(|req| {
            Ok(Allocation {
                owner: req.owner,
                addresses: vec![],
                routes: vec![],
                lease_expires_at: Some(9),
            })
        });
    let a = call(&d, "POST", "/v1/ipam/allocate", &body.to_string()).await;
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.body["owner"]["container_id"], "c1");
    assert_eq!(a.body["lease_expires_at"], 9);
}

#[tokio::test]
async fn daemon_errors_keep_their_kind() {
    let mut d = MockNodeApi::new();
    d.expect_allocate().returning(|_| {
        Err(DaemonError::api(
            ApiErrorKind::PoolExhausted,
            "pool default is full",
        ))
    });
    let body = r#"{"owner":{"container_id":"c1","ifname":"eth0"}}"#;
    let a = call(&d, "POST", "/v1/ipam/allocate", body).await;
    assert_error(&a, 409, "pool_exhausted", "pool default is full");

    let mut d = MockNodeApi::new();
    d.expect_ipam_state().returning(|| {
        Err(DaemonError::Decode {
            path: "x".into(),
            source: serde_json::from_str::<u8>("x").unwrap_err(),
        })
    });
    assert_error(
        &call(&d, "GET", "/v1/ipam", "").await,
        500,
        "internal",
        "decode",
    );
}

#[tokio::test]
async fn bad_bodies_are_400_and_never_reach_the_daemon() {
    let d = MockNodeApi::new();
    let cases = [
        ("/v1/ipam/allocate", "", "invalid JSON body"),
        ("/v1/ipam/allocate", "{not json", "invalid JSON body"),
        (
            "/v1/ipam/allocate",
            r#"{"owner":{"container_id":"c1","ifname":"eth0"},"bogus":1}"#,
            "unknown field `bogus`",
        ),
        (
            "/v1/ipam/allocate",
            r#"{"owner":{"container_id":"c1"}}"#,
            "missing field `ifname`",
        ),
        (
            "/v1/ipam/allocate",
            r#"{"owner":{"container_id":"-c1","ifname":"eth0"}}"#,
            "owner: invalid container id",
        ),
        (
            "/v1/ipam/allocate",
            r#"{"owner":{"container_id":"c1","ifname":"eth0"},"requested":["300.1.1.1"]}"#,
            "invalid JSON body",
        ),
        (
            "/v1/endpoint/create",
            r#"{"owner":{"container_id":"c1","ifname":"eth0"}}"#,
            "missing field",
        ),
        (
            "/v1/gc",
            r#"{"valid":[{"container_id":"c1","ifname":"eth0"},{"container_id":"c2","ifname":"a/b"}]}"#,
            "valid[1]: invalid interface name",
        ),
        (
            "/v1/gc",
            r#"{"valid":[],"extra":true}"#,
            "unknown field `extra`",
        ),
    ];
    for (path, body, needle) in cases {
        let a = call(&d, "POST", path, body).await;
        assert_error(&a, 400, "bad_request", needle);
    }
}

#[tokio::test]
async fn oversize_bodies_are_413() {
    let d = MockNodeApi::new();
    let big = format!(r#"{{"valid":[],"pad":"{}"}}"#, "x".repeat(MAX_BODY_BYTES));
    // Without a Content-Length header: stopped while reading.
    let a = call(&d, "POST", "/v1/gc", &big).await;
    assert_error(&a, 413, "payload_too_large", "larger than 65536 bytes");
    // With a declared length: refused before reading.
    let req = Request::builder()
        .method("POST")
        .uri("/v1/gc")
        .header(header::CONTENT_LENGTH, "1000000")
        .body(Full::new(Bytes::from_static(b"{}")))
        .unwrap();
    assert_eq!(
        handle(&d, req).await.status(),
        StatusCode::PAYLOAD_TOO_LARGE
    );
}

#[tokio::test]
async fn endpoint_lookup_release_delete() {
    let mut d = MockNodeApi::new();
    d.expect_endpoint()
        .returning(|o| Ok((o.container_id == "c1").then(|| endpoint("c1"))));
    d.expect_release()
        .withf(|o| *o == owner("c1"))
        .returning(|_| Ok(true));
    d.expect_delete_endpoint()
        .withf(|o| *o == owner("c2"))
        .returning(|_| Ok(false));
    d.expect_endpoints().returning(|| Ok(vec![endpoint("c1")]));
    d.expect_delete_endpoint_and_veth()
        .withf(|o| *o == owner("c1"))
        .returning(|_| {
            Ok(Deleted {
                deleted: true,
                veth_removal: true,
            })
        });
    let a = call(&d, "DELETE", "/v1/endpoints/c1/eth0?veth=remove", "").await;
    assert_eq!(
        (a.status, a.body),
        (200, json!({"deleted": true, "veth_removal": true}))
    );

    let a = call(&d, "GET", "/v1/endpoints/c1/eth0", "").await;
    assert_eq!(a.status, 200);
    assert_eq!(
        serde_json::from_value::<Endpoint>(a.body).unwrap(),
        endpoint("c1")
    );
    let a = call(&d, "GET", "/v1/endpoints/c2/eth0", "").await;
    assert_error(
        &a,
        404,
        "not_found",
        "no endpoint for container c2 ifname eth0",
    );
    let a = call(&d, "DELETE", "/v1/ipam/allocations/c1/eth0", "").await;
    assert_eq!((a.status, a.body), (200, json!({"released": true})));
    let a = call(&d, "DELETE", "/v1/endpoints/c2/eth0", "").await;
    assert_eq!(
        (a.status, a.body),
        (200, json!({"deleted": false, "veth_removal": false}))
    );
    let a = call(&d, "GET", "/v1/endpoints", "").await;
    assert_eq!(a.body.as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn unregistering_answers_the_endpoint_removed() {
    let mut d = MockNodeApi::new();
    d.expect_unregister_endpoint()
        .returning(|o| Ok((o.container_id == "c1").then(|| endpoint("c1"))));
    let a = call(&d, "DELETE", "/v1/endpoints/c1/eth0?allocation=keep", "").await;
    assert_eq!(a.status, 200);
    let answer: sarena_core::api::Unregistered = serde_json::from_value(a.body).unwrap();
    assert_eq!(answer.endpoint, Some(endpoint("c1")));
    let a = call(&d, "DELETE", "/v1/endpoints/c2/eth0?allocation=keep", "").await;
    assert_eq!((a.status, a.body), (200, json!({"endpoint": null})));
}

#[tokio::test]
async fn gc_and_405_and_404_answers() {
    let mut d = MockNodeApi::new();
    d.expect_gc()
        .withf(|r| r.valid == [owner("c1")])
        .returning(|_| {
            Ok(GcReport {
                endpoints_removed: vec![owner("c9")],
                allocations_released: vec![],
            })
        });
    let a = call(
        &d,
        "POST",
        "/v1/gc",
        r#"{"valid":[{"container_id":"c1","ifname":"eth0"}]}"#,
    )
    .await;
    assert_eq!(a.status, 200);
    assert_eq!(a.body["endpoints_removed"][0]["container_id"], "c9");

    let a = call(&d, "PUT", "/v1/endpoints/c1/eth0", "").await;
    assert_error(&a, 405, "method_not_allowed", "PUT not allowed");
    assert_eq!(a.headers[header::ALLOW], "GET, DELETE");
    let a = call(&d, "GET", "/v1/nope", "").await;
    assert_error(&a, 404, "not_found", "no route GET /v1/nope");
    let a = call(&d, "GET", "/v1/endpoints/c%2F1/eth0", "").await;
    assert_error(&a, 400, "bad_request", "invalid container id \"c/1\"");
}

/// A body whose client never sends anything.
struct Silent;

impl Body for Silent {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Self::Error>>> {
        std::task::Poll::Pending
    }
}

#[tokio::test(start_paused = true)]
async fn a_body_that_never_comes_times_out() {
    let d = MockNodeApi::new();
    let req = Request::builder()
        .method("POST")
        .uri("/v1/gc")
        .body(Silent)
        .unwrap();
    let resp = handle(&d, req).await;
    assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    let body: Value = serde_json::from_slice(&bytes).unwrap();
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("not received within 10s"),
        "{body}"
    );
}
