//! `--metrics-listen` on the real daemon (dataplane `none`, no privilege):
//! the endpoint is scraped over TCP and parsed by `prometheus-parse`, an
//! independent Prometheus text-format parser; the daemon refuses a remote
//! address without `--allow-remote-metrics`, and serves no metrics without
//! the flag.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::SocketAddr;

use prometheus_parse::{Sample, Scrape, Value};
use sarena_core::api::{ApiErrorKind, Daemon};
use sarena_test_support::daemon::{
    SMALL_POOL, Site, alloc_req, free_loopback_addr, owner, raw_tcp,
};

async fn scrape(addr: SocketAddr) -> Scrape {
    let answer = raw_tcp(addr, "GET /metrics HTTP/1.1").await;
    assert_eq!(answer.status, 200, "{answer:?}");
    assert!(
        answer
            .head
            .to_ascii_lowercase()
            .contains("content-type: text/plain; version=0.0.4"),
        "{answer:?}"
    );
    Scrape::parse(answer.body.lines().map(|l| Ok(l.to_owned()))).unwrap()
}

fn value(scrape: &Scrape, metric: &str, labels: &[(&str, &str)]) -> f64 {
    let found: Vec<&Sample> = scrape
        .samples
        .iter()
        .filter(|s| s.metric == metric && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .collect();
    assert_eq!(
        found.len(),
        1,
        "{metric} {labels:?} in {:#?}",
        scrape.samples
    );
    match &found[0].value {
        Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => *v,
        Value::Histogram(buckets) => buckets.iter().map(|b| b.count).fold(0.0, f64::max),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_scrape_sees_pools_operations_and_request_latency() {
    let site = Site::new();
    let config = site.config(SMALL_POOL);
    let addr = free_loopback_addr();
    let _daemon = site
        .start(&[
            "--config",
            config.to_str().unwrap(),
            "--metrics-listen",
            &addr.to_string(),
        ])
        .await;
    let client = site.client();
    for cid in ["m1", "m2", "m3", "m4", "m5"] {
        client.allocate(alloc_req(cid)).await.unwrap();
    }
    let full = client.allocate(alloc_req("m6")).await.unwrap_err();
    assert_eq!(full.kind(), Some(ApiErrorKind::PoolExhausted));
    assert!(client.release(owner("m1")).await.unwrap());
    assert!(!client.delete_endpoint(owner("never")).await.unwrap());

    let s = scrape(addr).await;
    assert_eq!(value(&s, "sarena_ready", &[]), 1.0);
    assert_eq!(
        value(&s, "sarena_ipam_pool_capacity", &[("pool", "tiny")]),
        5.0
    );
    assert_eq!(value(&s, "sarena_ipam_pool_used", &[("pool", "tiny")]), 4.0);
    assert_eq!(value(&s, "sarena_ipam_leases", &[]), 4.0);
    assert_eq!(value(&s, "sarena_endpoints", &[]), 0.0);
    assert_eq!(value(&s, "sarena_delete_queue_pending", &[]), 0.0);
    assert_eq!(
        value(&s, "sarena_build_info", &[("dataplane", "none")]),
        1.0
    );
    let op = |operation, outcome| {
        value(
            &s,
            "sarena_operations_total",
            &[("operation", operation), ("outcome", outcome)],
        )
    };
    assert_eq!(op("allocate", "ok"), 5.0);
    assert_eq!(op("allocate", "pool_exhausted"), 1.0);
    assert_eq!(op("release", "ok"), 1.0);
    assert_eq!(op("endpoint_delete", "noop"), 1.0);
    // The start-up replay found an empty queue: one replay, nothing done.
    assert_eq!(value(&s, "sarena_delete_queue_replays_total", &[]), 1.0);
    assert_eq!(value(&s, "sarena_delete_queue_replayed_total", &[]), 0.0);
    // Six allocations answered: five 200s, one 409, all under one template.
    let route = [("route", "/v1/ipam/allocate"), ("method", "POST")];
    let ok = [route[0], route[1], ("status", "200")];
    let conflict = [route[0], route[1], ("status", "409")];
    assert_eq!(value(&s, "sarena_api_request_duration_seconds", &ok), 5.0);
    assert_eq!(
        value(&s, "sarena_api_request_duration_seconds", &conflict),
        1.0
    );
    let delete = [
        ("route", "/v1/endpoints/:container_id/:ifname"),
        ("status", "200"),
    ];
    assert_eq!(
        value(&s, "sarena_api_request_duration_seconds", &delete),
        1.0
    );
    assert!(
        !s.samples
            .iter()
            .any(|x| x.labels.get("route").is_some_and(|r| r.contains("never"))),
        "routes are templates, never container ids"
    );

    let other = raw_tcp(addr, "GET /other HTTP/1.1").await;
    assert_eq!(other.status, 404, "{other:?}");
}

#[tokio::test]
async fn remote_metrics_need_the_flag_and_metrics_are_off_by_default() {
    let site = Site::new();
    let (status, log) = site.start_failing(&["--metrics-listen", "0.0.0.0:9464"]);
    assert_eq!(status.code(), Some(1), "{log}");
    assert!(log.contains("--allow-remote-metrics"), "{log}");

    let addr = free_loopback_addr();
    let _daemon = Site::new().start(&[]).await;
    assert!(
        tokio::net::TcpStream::connect(addr).await.is_err(),
        "nothing listens without --metrics-listen"
    );
}
