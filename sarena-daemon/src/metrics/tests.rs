//! The metrics as a scraper sees them: rendered over a `MockNodeApi` and
//! parsed back with `prometheus-parse`, an independent text-format parser.

use prometheus_parse::{Sample, Scrape, Value};
use sarena_core::api::{
    ApiErrorKind, Attachment, DaemonStatus, DataplaneCounters, Endpoint, EndpointSpec,
    EndpointStats, Health, HostRoutingStatus, IpamState, MockNodeApi, NetworkStatus, PeersStatus,
    PodRef, PoolState, ProgramsStatus, RejectedPeerStatus, VxlanFilterStatus,
};
use sarena_core::dataplane::ebpf::{DropReason, EndpointCounters};

use super::*;

pub(super) fn parse(text: &str) -> Scrape {
    Scrape::parse(text.lines().map(|l| Ok(l.to_owned()))).unwrap()
}

/// The one sample of `metric` whose labels include `labels`.
fn sample<'a>(scrape: &'a Scrape, metric: &str, labels: &[(&str, &str)]) -> &'a Sample {
    let found: Vec<&Sample> = scrape
        .samples
        .iter()
        .filter(|s| s.metric == metric && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .collect();
    assert_eq!(found.len(), 1, "{metric} {labels:?}: {found:?}");
    found[0]
}

fn number(sample: &Sample) -> f64 {
    match sample.value {
        Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => v,
        ref other => panic!("not a number: {other:?}"),
    }
}

fn endpoint(cid: &str) -> Endpoint {
    Endpoint {
        spec: EndpointSpec {
            owner: Attachment {
                container_id: cid.into(),
                ifname: "eth0".into(),
            },
            pod: PodRef {
                namespace: Some("default".into()),
                name: Some(format!("pod-{cid}")),
                uid: None,
            },
            host_ifname: format!("lxc{cid}"),
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

pub(super) fn daemon() -> MockNodeApi {
    let mut daemon = MockNodeApi::new();
    daemon.expect_status().returning(|| {
        let ipam = IpamState {
            pools: vec![PoolState {
                name: "default".into(),
                cidr: "10.1.0.0/24".parse().unwrap(),
                gateway: "10.1.0.1".parse().unwrap(),
                namespaces: vec![],
                allocated: 2,
                capacity: 253,
            }],
            allocations: vec![],
        };
        let health = Health {
            ready: true,
            message: String::new(),
        };
        let mut status = DaemonStatus::from_parts(health, "ebpf", &ipam, 2);
        status.dataplane.programs = Some(ProgramsStatus {
            attached: 1,
            detached: vec!["lxcb".into()],
        });
        status.dataplane.host_routing = Some(HostRoutingStatus {
            peer_pod_cidrs: vec!["10.244.1.0/24".parse().unwrap()],
            counters: [("from_peer_redirected".to_owned(), 11)].into(),
        });
        status.network = Some(NetworkStatus {
            peers: Some(PeersStatus {
                rejected: vec![RejectedPeerStatus {
                    node: "evil".into(),
                    reason: "own_address".into(),
                    detail: "InternalIP 172.30.0.11".into(),
                }],
                rejections: [("own_address".to_owned(), 3)].into(),
            }),
            vxlan_filter: Some(VxlanFilterStatus {
                dropped_packets: 7,
                dropped_bytes: 700,
            }),
            ..NetworkStatus::default()
        });
        Ok(status)
    });
    daemon.expect_endpoint_stats().returning(|| {
        let mut raw = EndpointCounters {
            from_pod_packets: 5,
            to_pod_bytes: 640,
            ..Default::default()
        };
        raw.drops[DropReason::MalformedArp as usize] = 2;
        Ok(vec![
            EndpointStats {
                endpoint: endpoint("a"),
                counters: Some(DataplaneCounters::from(&raw)),
                bandwidth: None,
            },
            EndpointStats {
                endpoint: endpoint("b"),
                counters: Some(DataplaneCounters::default()),
                bandwidth: None,
            },
            EndpointStats {
                endpoint: endpoint("k"),
                counters: None,
                bandwidth: None,
            },
        ])
    });
    daemon
}

#[tokio::test]
async fn a_scrape_has_the_snapshot_and_what_was_recorded() {
    let metrics = Metrics::new(DEFAULT_ENDPOINT_LIMIT);
    metrics.observe(
        &Method::POST,
        "/v1/ipam/allocate",
        StatusCode::OK,
        Duration::from_millis(3),
    );
    metrics.operation::<()>("allocate", &Ok(()), false);
    metrics.operation::<()>(
        "allocate",
        &Err(DaemonError::api(ApiErrorKind::PoolExhausted, "full")),
        false,
    );
    metrics.operation::<()>("endpoint_delete", &Ok(()), true);
    metrics.replay(&ReplayReport {
        done: vec![endpoint("q").spec.owner],
        ..Default::default()
    });
    metrics.reconcile(&ReconcileReport {
        attached: vec!["lxca".into()],
        removed: vec![],
    });

    let text = metrics.render(&daemon()).await.unwrap();
    let scrape = parse(&text);

    let latency = sample(
        &scrape,
        "sarena_api_request_duration_seconds",
        &[
            ("route", "/v1/ipam/allocate"),
            ("status", "200"),
            ("method", "POST"),
        ],
    );
    let Value::Histogram(buckets) = &latency.value else {
        panic!("{latency:?}")
    };
    let le = |bound: f64| buckets.iter().find(|b| b.less_than == bound).unwrap().count;
    assert_eq!((le(0.0016), le(0.0032), le(f64::INFINITY)), (0.0, 1.0, 1.0));

    let op = |outcome| {
        number(sample(
            &scrape,
            "sarena_operations_total",
            &[("operation", "allocate"), ("outcome", outcome)],
        ))
    };
    assert_eq!((op("ok"), op("pool_exhausted")), (1.0, 1.0));
    let noop = sample(
        &scrape,
        "sarena_operations_total",
        &[("operation", "endpoint_delete")],
    );
    assert_eq!(
        (noop.labels.get("outcome"), number(noop)),
        (Some("noop"), 1.0)
    );
    assert_eq!(
        number(sample(&scrape, "sarena_delete_queue_replays_total", &[])),
        1.0
    );
    assert_eq!(
        number(sample(&scrape, "sarena_delete_queue_replayed_total", &[])),
        1.0
    );
    assert_eq!(
        number(sample(
            &scrape,
            "sarena_dataplane_reconcile_attached_total",
            &[]
        )),
        1.0
    );

    assert_eq!(number(sample(&scrape, "sarena_ready", &[])), 1.0);
    assert_eq!(
        number(sample(
            &scrape,
            "sarena_ipam_pool_capacity",
            &[("pool", "default")]
        )),
        253.0
    );
    assert_eq!(
        number(sample(
            &scrape,
            "sarena_ipam_pool_used",
            &[("pool", "default")]
        )),
        2.0
    );
    assert_eq!(number(sample(&scrape, "sarena_endpoints", &[])), 2.0);
    assert_eq!(
        number(sample(&scrape, "sarena_dataplane_programs_detached", &[])),
        1.0
    );
    assert_eq!(
        number(sample(&scrape, "sarena_host_routing_peer_pod_cidrs", &[])),
        1.0
    );
    assert_eq!(
        number(sample(
            &scrape,
            "sarena_host_routing_from_peer_redirected_total",
            &[]
        )),
        11.0
    );
    assert_eq!(
        number(sample(&scrape, "sarena_metrics_endpoints_omitted", &[])),
        0.0
    );

    let a = [
        ("container_id", "a"),
        ("pod", "pod-a"),
        ("namespace", "default"),
        ("interface", "eth0"),
    ];
    assert_eq!(
        number(sample(
            &scrape,
            "sarena_endpoint_from_pod_packets_total",
            &a
        )),
        5.0
    );
    assert_eq!(
        number(sample(&scrape, "sarena_endpoint_to_pod_bytes_total", &a)),
        640.0
    );
    let arp = [("container_id", "a"), ("reason", "malformed_arp")];
    assert_eq!(
        number(sample(&scrape, "sarena_endpoint_drops_total", &arp)),
        2.0
    );
    let drops_of_b = scrape
        .samples
        .iter()
        .filter(|s| {
            s.metric == "sarena_endpoint_drops_total" && s.labels.get("container_id") == Some("b")
        })
        .count();
    assert_eq!(drops_of_b, 0, "b's drops map is empty");
    assert!(
        !scrape
            .samples
            .iter()
            .any(|s| s.labels.get("container_id") == Some("k")),
        "an endpoint without counters exports none"
    );
}

#[tokio::test]
async fn per_endpoint_series_stop_at_the_limit() {
    let metrics = Metrics::new(1);
    let scrape = parse(&metrics.render(&daemon()).await.unwrap());
    assert_eq!(
        number(sample(&scrape, "sarena_metrics_endpoints_omitted", &[])),
        1.0
    );
    let ids: std::collections::BTreeSet<&str> = scrape
        .samples
        .iter()
        .filter_map(|s| s.labels.get("container_id"))
        .collect();
    assert_eq!(ids.into_iter().collect::<Vec<_>>(), vec!["a"]);
}

#[tokio::test]
async fn a_daemon_that_cannot_answer_still_gets_a_scrape() {
    let mut daemon = MockNodeApi::new();
    daemon
        .expect_status()
        .returning(|| Err(DaemonError::api(ApiErrorKind::Unavailable, "later")));
    daemon
        .expect_endpoint_stats()
        .returning(|| Err(DaemonError::api(ApiErrorKind::Unavailable, "later")));
    let metrics = Metrics::new(DEFAULT_ENDPOINT_LIMIT);
    let scrape = parse(&metrics.render(&daemon).await.unwrap());
    assert_eq!(number(sample(&scrape, "sarena_ready", &[])), 0.0);
    assert!(
        !scrape
            .samples
            .iter()
            .any(|s| s.metric == "sarena_endpoints")
    );
}

#[test]
fn remote_addresses_need_the_flag() {
    assert!(check_addr("127.0.0.1:9464".parse().unwrap(), false).is_ok());
    assert!(check_addr("[::1]:9464".parse().unwrap(), false).is_ok());
    let err = check_addr("0.0.0.0:9464".parse().unwrap(), false).unwrap_err();
    assert!(err.to_string().contains("--allow-remote-metrics"), "{err}");
    assert!(check_addr("0.0.0.0:9464".parse().unwrap(), true).is_ok());
}

#[tokio::test]
async fn rejected_peers_and_vxlan_filter_drops_are_series_with_bounded_labels() {
    let text = Metrics::new(DEFAULT_ENDPOINT_LIMIT)
        .render(&daemon())
        .await
        .unwrap();
    let scrape = parse(&text);
    let total = |reason| {
        number(sample(
            &scrape,
            "sarena_peer_rejections_total",
            &[("reason", reason)],
        ))
    };
    assert_eq!(total("own_address"), 3.0);
    assert_eq!(total("pod_cidr_outside_cluster"), 0.0);
    let now = sample(
        &scrape,
        "sarena_peers_rejected",
        &[("reason", "own_address")],
    );
    assert_eq!(number(now), 1.0);
    let families: Vec<&Sample> = scrape
        .samples
        .iter()
        .filter(|s| s.metric == "sarena_peer_rejections_total")
        .collect();
    assert_eq!(
        families.len(),
        sarena_core::cluster::RejectReason::ALL.len()
    );
    assert!(families.iter().all(|s| s.labels.get("node").is_none()));
    let drops = sample(&scrape, "sarena_vxlan_filter_dropped_packets_total", &[]);
    assert_eq!(number(drops), 7.0);
    let bytes = sample(&scrape, "sarena_vxlan_filter_dropped_bytes_total", &[]);
    assert_eq!(number(bytes), 700.0);
}
