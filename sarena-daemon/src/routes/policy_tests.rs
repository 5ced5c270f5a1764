//! `/v1/policy/*`: routing, the query's validation (400 naming the
//! parameter, the backend never called) and the answers passed through.

use sarena_core::api::{
    MockNodeApi, PolicyDecision, PolicyEndpoint, PolicyExplanation, PolicyParty, PolicyProtocol,
    PolicyQuery, PolicyVerdict,
};
use serde_json::Value;

use super::*;

async fn call(daemon: &MockNodeApi, method: &str, path: &str) -> (u16, Value) {
    let req = Request::builder()
        .method(method)
        .uri(path)
        .body(Full::new(Bytes::new()))
        .unwrap();
    let resp = handle(daemon, req).await;
    let status = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (status, serde_json::from_slice(&bytes).unwrap())
}

#[test]
fn policy_routes_and_their_templates() {
    let r = |m: &str, p: &str, q: Option<&str>| route(&m.parse().unwrap(), p, q);
    assert_eq!(
        r("GET", "/v1/policy/endpoints", None),
        Ok(Route::PolicyEndpoints)
    );
    let explain = r(
        "GET",
        "/v1/policy/explain",
        Some("from=ns/a&to=10.0.0.9&port=53&protocol=UDP"),
    )
    .unwrap();
    assert_eq!(
        explain,
        Route::PolicyExplain(PolicyQuery {
            from: PolicyParty::Pod {
                namespace: "ns".into(),
                name: "a".into()
            },
            to: PolicyParty::Address("10.0.0.9".parse().unwrap()),
            port: 53,
            protocol: PolicyProtocol::Udp,
        })
    );
    assert_eq!(explain.template(), "/v1/policy/explain");
    assert_eq!(
        r("POST", "/v1/policy/endpoints", None).unwrap_err().kind,
        ApiErrorKind::MethodNotAllowed
    );
}

#[tokio::test]
async fn a_bad_query_is_400_naming_the_parameter_and_never_reaches_the_daemon() {
    let d = MockNodeApi::new();
    for (query, needle) in [
        ("", "from"),
        ("from=ns/a&to=ns/b", "port"),
        ("from=ns/a&to=ns/b&port=http", "port"),
        ("from=ns/a&to=ns/b&port=80&protocol=icmp", "protocol"),
        ("from=ns&to=ns/b&port=80", "from"),
    ] {
        let (status, body) = call(&d, "GET", &format!("/v1/policy/explain?{query}")).await;
        assert_eq!(status, 400, "{query}: {body}");
        let message = body["message"].as_str().unwrap();
        assert!(
            message.contains(&format!("query parameter {needle}")),
            "{query}: {message}"
        );
    }
}

#[tokio::test]
async fn answers_and_errors_of_the_daemon_are_passed_through() {
    let mut d = MockNodeApi::new();
    d.expect_policy_endpoints().returning(|| {
        Ok(vec![PolicyEndpoint {
            namespace: "ns".into(),
            name: "web".into(),
            ingress_isolated: true,
            egress_isolated: false,
            policies: vec!["ns/deny".into()],
        }])
    });
    d.expect_policy_explain()
        .withf(|q| q.port == 80 && q.to.to_string() == "ns/web")
        .returning(|query| {
            Ok(PolicyExplanation {
                query,
                egress: None,
                ingress: Some(PolicyDecision {
                    pod: "ns/web".into(),
                    verdict: PolicyVerdict::Allowed,
                    rule: Some("ns/deny ingress[0]".into()),
                    policies: vec!["ns/deny".into()],
                }),
                allowed: true,
            })
        });
    let (status, body) = call(&d, "GET", "/v1/policy/endpoints").await;
    assert_eq!(status, 200);
    assert_eq!(body[0]["ingress_isolated"], true);
    assert_eq!(body[0]["policies"][0], "ns/deny");
    let (status, body) = call(
        &d,
        "GET",
        "/v1/policy/explain?from=10.1.0.4&to=ns%2Fweb&port=80",
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["ingress"]["rule"], "ns/deny ingress[0]");
    assert_eq!(body["ingress"]["verdict"], "allowed");
    assert_eq!(body["allowed"], true);

    let mut d = MockNodeApi::new();
    d.expect_policy_explain().returning(|_| {
        Err(sarena_core::api::DaemonError::api(
            ApiErrorKind::NotFound,
            "no pod ns/ghost",
        ))
    });
    let (status, body) = call(&d, "GET", "/v1/policy/explain?from=ns/ghost&to=ns/b&port=1").await;
    assert_eq!((status, body["kind"].as_str()), (404, Some("not_found")));
}
