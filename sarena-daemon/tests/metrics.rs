//! `--metrics-listen` on the real daemon (dataplane `none`, no privilege):
//! the endpoint is scraped over TCP and parsed by `prometheus-parse`, an
//! independent Prometheus text-format parser; the daemon refuses a remote
//! address without `--allow-remote-metrics`, and serves no metrics without
//! the flag.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashSet;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use prometheus_parse::{Sample, Scrape, Value};
use rand::Rng as _;
use sarena_core::api::{ApiErrorKind, Daemon};
use sarena_test_support::daemon::{
    SMALL_POOL, Site, alloc_req, free_loopback_addr, owner, raw, raw_tcp,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

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

/// The `sarena_api_request_duration_seconds` series (one per label set).
fn request_series(scrape: &Scrape) -> HashSet<Vec<(String, String)>> {
    scrape
        .samples
        .iter()
        .filter(|s| s.metric == "sarena_api_request_duration_seconds")
        .map(|s| {
            let mut labels: Vec<(String, String)> = s
                .labels
                .iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect();
            labels.sort();
            labels
        })
        .collect()
}

#[tokio::test]
async fn a_thousand_made_up_methods_make_a_bounded_number_of_series() {
    let site = Site::new();
    let addr = free_loopback_addr();
    let _daemon = site.start(&["--metrics-listen", &addr.to_string()]).await;
    let mut rng = rand::rng();
    for _ in 0..1000 {
        let method: String = (0..12)
            .map(|_| char::from(rng.random_range(b'A'..=b'Z')))
            .collect();
        let answer = raw(&site.socket(), &format!("{method} /v1/gc HTTP/1.1"), b"").await;
        assert_eq!(answer.status, 405, "{answer:?}");
    }
    let s = scrape(addr).await;
    let series = request_series(&s);
    assert!(series.len() <= 4, "{} series: {series:?}", series.len());
    assert_eq!(
        value(
            &s,
            "sarena_api_request_duration_seconds",
            &[("method", "other"), ("status", "405")]
        ),
        1000.0
    );
}

/// Whether the server closed `stream` (EOF or reset within `within`).
async fn closed_by_server(stream: &mut tokio::net::TcpStream, within: Duration) -> bool {
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout(within, stream.read(&mut buf)).await {
            Err(_) => return false,
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            Ok(Ok(_)) => {}
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_beyond_the_limit_are_closed_and_a_scrape_still_succeeds() {
    let site = Site::new();
    let addr = free_loopback_addr();
    let _daemon = site.start(&["--metrics-listen", &addr.to_string()]).await;
    let mut idle = Vec::new();
    for _ in 0..100 {
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        s.write_all(b"GET /metr").await.unwrap();
        idle.push(s);
    }
    // A scrape is answered at once, idle clients or not.
    let started = Instant::now();
    let s = scrape(addr).await;
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(value(&s, "sarena_ready", &[]), 1.0);
    // The server keeps at most its limit of them open.
    let mut open = 0;
    for s in &mut idle {
        if !closed_by_server(s, Duration::from_millis(20)).await {
            open += 1;
        }
    }
    assert!(open <= 16, "{open} idle connections still open");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_never_reads_is_disconnected() {
    let site = Site::new();
    let addr = free_loopback_addr();
    let _daemon = site.start(&["--metrics-listen", &addr.to_string()]).await;
    // A small receive window, and scrapes asked for until the server stops
    // reading them (its answers fill the window and its send buffer).
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut stream = socket.connect(addr).await.unwrap();
    let request = b"GET /metrics HTTP/1.1\r\nHost: sarena\r\n\r\n".repeat(64);
    let mut sent = 0usize;
    loop {
        match tokio::time::timeout(Duration::from_secs(1), stream.write_all(&request)).await {
            Ok(Ok(())) => sent += 64,
            Ok(Err(_)) => break,
            Err(_) => break,
        }
        assert!(
            sent < 1_000_000,
            "the server reads everything without writing"
        );
    }
    // Never read: within the write timeout (5 s) and a margin, the server
    // has given up on the connection.
    tokio::time::sleep(Duration::from_secs(7)).await;
    assert!(
        closed_by_server(&mut stream, Duration::from_secs(2)).await
            || stream.write_all(b"x").await.is_err(),
        "the server still holds a client that never reads ({sent} scrapes asked for)"
    );
}
