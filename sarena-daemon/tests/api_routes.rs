//! Every route of the real daemon binary, through `HttpDaemon` and through raw
//! HTTP for the requests a well-behaved client never sends.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashSet;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};

use sarena_core::api::{
    ApiErrorKind, Daemon, DaemonError, EndpointCreate, EndpointSpec, GcRequest, HttpDaemon,
    Inspect as _, PodRef,
};
use sarena_test_support::daemon::{SMALL_POOL, Site, alloc_req, owner, raw, raw_bytes};

fn endpoint_create(alloc: &sarena_core::api::Allocation) -> EndpointCreate {
    EndpointCreate {
        spec: EndpointSpec {
            owner: alloc.owner.clone(),
            pod: PodRef {
                namespace: Some("default".into()),
                name: Some("web".into()),
                uid: None,
            },
            host_ifname: "lxc0a1b2c3d".into(),
            host_ifindex: 42,
            host_mac: "02:00:00:aa:bb:01".parse().unwrap(),
            pod_mac: "02:00:00:aa:bb:02".parse().unwrap(),
            addresses: alloc.addresses.iter().map(|a| a.address).collect(),
            netns: "/var/run/netns/test".into(),
            bandwidth: None,
            identity: Default::default(),
        },
    }
}

#[tokio::test]
async fn every_route_through_the_client() {
    let site = Site::new();
    let _daemon = site.start(&[]).await;
    let d = site.client();

    // No `mtu` configured: the default route's device's, as the status says.
    let config = d.config().await.unwrap();
    let status = d.status().await.unwrap();
    let mtu = status.network.and_then(|n| n.mtu).unwrap();
    assert_eq!((config.mtu, config.dataplane.as_str()), (mtu.mtu, "none"));
    assert_ne!(mtu.source, sarena_core::api::MtuSource::Configured, "{mtu}");
    assert!(d.health().await.unwrap().ready);

    // Allocate is idempotent per owner.
    let a = d.allocate(alloc_req("c1")).await.unwrap();
    assert_eq!(a.owner, owner("c1"));
    assert_eq!(a.addresses.len(), 1);
    assert!(a.lease_expires_at.is_some());
    assert!(!a.routes.is_empty());
    assert_eq!(
        d.allocate(alloc_req("c1")).await.unwrap().addresses,
        a.addresses
    );

    let state = d.ipam_state().await.unwrap();
    assert_eq!(state.allocations.len(), 1);
    assert_eq!(state.allocations[0].address, a.addresses[0].address.addr());
    assert_eq!(state.pools[0].allocated, 1);

    // Endpoint create, get, list, delete (which releases the address), delete again.
    let ep = d.create_endpoint(endpoint_create(&a)).await.unwrap();
    assert_eq!(
        (ep.spec.host_ifindex, ep.spec.owner.clone()),
        (42, owner("c1"))
    );
    assert_eq!(d.endpoint(owner("c1")).await.unwrap(), Some(ep.clone()));
    assert_eq!(d.endpoints().await.unwrap(), vec![ep]);
    assert!(d.delete_endpoint(owner("c1")).await.unwrap());
    assert!(!d.delete_endpoint(owner("c1")).await.unwrap());
    assert_eq!(d.endpoint(owner("c1")).await.unwrap(), None);
    assert!(d.ipam_state().await.unwrap().allocations.is_empty());

    // Unregistering keeps the address for a repeated ADD.
    let a = d.allocate(alloc_req("c3")).await.unwrap();
    let ep = d.create_endpoint(endpoint_create(&a)).await.unwrap();
    assert_eq!(d.unregister_endpoint(owner("c3")).await.unwrap(), Some(ep));
    assert_eq!(d.unregister_endpoint(owner("c3")).await.unwrap(), None);
    assert_eq!(d.endpoint(owner("c3")).await.unwrap(), None);
    assert_eq!(
        d.allocate(alloc_req("c3")).await.unwrap().addresses,
        a.addresses
    );
    assert!(d.release(owner("c3")).await.unwrap());

    // Release, and a double release.
    d.allocate(alloc_req("c2")).await.unwrap();
    assert!(d.release(owner("c2")).await.unwrap());
    assert!(!d.release(owner("c2")).await.unwrap());

    // GC keeps what is listed.
    for c in ["g1", "g2", "g3"] {
        d.allocate(alloc_req(c)).await.unwrap();
    }
    let g2 = d.allocate(alloc_req("g2")).await.unwrap();
    d.create_endpoint(endpoint_create(&g2)).await.unwrap();
    let report = d
        .gc(GcRequest {
            valid: vec![owner("g1")],
        })
        .await
        .unwrap();
    assert_eq!(report.endpoints_removed, vec![owner("g2")]);
    assert_eq!(report.allocations_released, vec![owner("g3")]);
    let left: Vec<_> = d
        .ipam_state()
        .await
        .unwrap()
        .allocations
        .into_iter()
        .map(|r| r.owner)
        .collect();
    assert_eq!(left, vec![owner("g1")]);
}

#[tokio::test]
async fn unknown_endpoint_and_bad_segments() {
    let site = Site::new();
    let _daemon = site.start(&[]).await;
    let d = site.client();
    assert_eq!(d.endpoint(owner("nobody")).await.unwrap(), None);
    let sock = site.socket();
    raw(&sock, "GET /v1/endpoints/nobody/eth0 HTTP/1.1", b"")
        .await
        .assert_error(404, "not_found", "no endpoint");

    // Invalid owners are 400 whether they come in the path or in a body.
    let bad_ifname = sarena_core::api::Attachment {
        container_id: "c1".into(),
        ifname: "a/b".into(),
    };
    let err = d.release(bad_ifname.clone()).await.unwrap_err();
    assert_eq!(err.kind(), Some(ApiErrorKind::BadRequest), "{err}");
    let err = d.delete_endpoint(bad_ifname).await.unwrap_err();
    assert!(err.to_string().contains("invalid interface name"), "{err}");
    let err = d
        .allocate(alloc_req("-starts-with-dash"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("invalid container id"), "{err}");
    for path in [
        "/v1/endpoints/c%2Fx/eth0",
        "/v1/endpoints/c1/this-name-is-too-long",
        "/v1/ipam/allocations/c1/..",
        "/v1/ipam/allocations/c1/e%ZZ",
    ] {
        let method = if path.contains("allocations") {
            "DELETE"
        } else {
            "GET"
        };
        let a = raw(&sock, &format!("{method} {path} HTTP/1.1"), b"").await;
        assert_eq!(a.status, 400, "{path}: {a:?}");
        assert_eq!(a.json()["kind"], "bad_request");
    }
}

#[tokio::test]
async fn malformed_requests_over_raw_http() {
    let site = Site::new();
    let _daemon = site.start(&[]).await;
    let sock = site.socket();
    let post = |path: &str, body: &str| {
        let head = format!(
            "POST {path} HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: {}",
            body.len()
        );
        (head, body.as_bytes().to_vec())
    };
    let cases = [
        (
            "/v1/ipam/allocate",
            "{\"owner\": ",
            "invalid JSON body: EOF",
        ),
        ("/v1/ipam/allocate", "[1,2]", "invalid JSON body"),
        ("/v1/ipam/allocate", "", "invalid JSON body"),
        (
            "/v1/ipam/allocate",
            r#"{"owner":{"container_id":"c1","ifname":"eth0"},"colour":"red"}"#,
            "unknown field `colour`",
        ),
        (
            "/v1/ipam/allocate",
            r#"{"owner":{"container_id":"c1","ifname":"eth0","x":1}}"#,
            "unknown field `x`",
        ),
        (
            "/v1/endpoint/create",
            r#"{"owner":{"container_id":"c1","ifname":"eth0"}}"#,
            "missing field `host_ifname`",
        ),
        ("/v1/gc", r#"{"valid":"everything"}"#, "invalid type"),
    ];
    for (path, body, needle) in cases {
        let (head, body) = post(path, body);
        raw(&sock, &head, &body)
            .await
            .assert_error(400, "bad_request", needle);
    }

    // Oversize: declared up front, and streamed (chunked) without a length.
    let big = vec![b' '; 200 * 1024];
    let (head, _) = post("/v1/gc", "");
    let head = head.replace(
        "Content-Length: 0",
        &format!("Content-Length: {}", big.len()),
    );
    raw(&sock, &head, &big)
        .await
        .assert_error(413, "payload_too_large", "65536");
    let mut chunked = Vec::new();
    for _ in 0..20 {
        chunked.extend_from_slice(format!("{:x}\r\n", 8192).as_bytes());
        chunked.extend_from_slice(&[b' '; 8192]);
        chunked.extend_from_slice(b"\r\n");
    }
    chunked.extend_from_slice(b"0\r\n\r\n");
    raw(
        &sock,
        "POST /v1/ipam/allocate HTTP/1.1\r\nTransfer-Encoding: chunked",
        &chunked,
    )
    .await
    .assert_error(413, "payload_too_large", "larger than");

    // Unknown routes and wrong methods.
    for path in [
        "/",
        "/v1",
        "/v2/daemon/config",
        "/v1/daemon",
        "/v1/endpoints/a/b/c",
    ] {
        raw(&sock, &format!("GET {path} HTTP/1.1"), b"")
            .await
            .assert_error(404, "not_found", "no route");
    }
    for (method, path, allow) in [
        ("POST", "/v1/daemon/config", "GET"),
        ("GET", "/v1/ipam/allocate", "POST"),
        ("PUT", "/v1/endpoints/c1/eth0", "GET, DELETE"),
        ("GET", "/v1/ipam/allocations/c1/eth0", "DELETE"),
        ("DELETE", "/v1/gc", "POST"),
    ] {
        let a = raw(&sock, &format!("{method} {path} HTTP/1.1"), b"").await;
        a.assert_error(405, "method_not_allowed", "not allowed");
        assert!(
            a.head
                .to_ascii_lowercase()
                .contains(&format!("allow: {}", allow.to_ascii_lowercase())),
            "{a:?}"
        );
    }

    // Not HTTP at all: the connection is refused politely and the daemon lives on.
    let junk = raw_bytes(&sock, b"\x00\x01garbage\r\n\r\n".to_vec()).await;
    assert!(junk.status == 400 || junk.status == 0, "{junk:?}");
    assert!(site.client().health().await.unwrap().ready);
}

#[tokio::test]
async fn exhausted_pool_is_a_clear_error() {
    let site = Site::new();
    let config = site.config(SMALL_POOL);
    let _daemon = site.start(&["--config", config.to_str().unwrap()]).await;
    let d = site.client();
    assert_eq!(d.config().await.unwrap().mtu, 1400);
    let mut seen = HashSet::new();
    for i in 0..5 {
        let a = d.allocate(alloc_req(&format!("p{i}"))).await.unwrap();
        assert!(
            seen.insert(a.addresses[0].address.addr()),
            "address handed out twice"
        );
    }
    let err = d.allocate(alloc_req("p5")).await.unwrap_err();
    match &err {
        DaemonError::Api {
            kind: ApiErrorKind::PoolExhausted,
            message,
        } => {
            assert!(message.contains("tiny"), "{message}");
        }
        e => panic!("expected pool_exhausted, got {e}"),
    }
    let state = d.ipam_state().await.unwrap();
    assert_eq!((state.pools[0].allocated, state.pools[0].capacity), (5, 5));
    // Still exhausted on retry, not a hang; one release makes room.
    assert_eq!(
        d.allocate(alloc_req("p5")).await.unwrap_err().kind(),
        Some(ApiErrorKind::PoolExhausted)
    );
    assert!(d.release(owner("p2")).await.unwrap());
    d.allocate(alloc_req("p5")).await.unwrap();
}

#[tokio::test]
async fn socket_mode_and_loopback_tcp() {
    let site = Site::new();
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let addr = format!("127.0.0.1:{port}");
    let _daemon = site.start(&["--listen-tcp", &addr]).await;
    let meta = std::fs::symlink_metadata(site.socket()).unwrap();
    assert!(meta.file_type().is_socket());
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);

    let tcp = HttpDaemon::new(&format!("http://{addr}"))
        .unwrap()
        .with_token_file(&site.state_dir().join("api-token"))
        .unwrap();
    let a = tcp.allocate(alloc_req("t1")).await.unwrap();
    // Both listeners serve the same state.
    let via_unix = site.client().ipam_state().await.unwrap();
    assert_eq!(
        via_unix.allocations[0].address,
        a.addresses[0].address.addr()
    );
}

#[test]
fn non_loopback_tcp_is_refused() {
    let site = Site::new();
    let (status, log) = site.start_failing(&["--listen-tcp", "0.0.0.0:0"]);
    assert_eq!(status.code(), Some(1), "{log}");
    assert!(log.contains("--allow-remote-tcp"), "{log}");
    assert!(!site.socket().exists());
}

#[test]
fn bad_config_fails_start_naming_the_file() {
    let site = Site::new();
    let config = site.config("mtu = \"jumbo\"\n");
    let (status, log) = site.start_failing(&["--config", config.to_str().unwrap()]);
    assert_eq!(status.code(), Some(1), "{log}");
    assert!(log.contains("config.toml") && log.contains("mtu"), "{log}");
}

#[tokio::test]
async fn second_daemon_on_a_live_socket_is_refused() {
    let site = Site::new();
    let _first = site.start(&[]).await;
    let other = Site::with_socket(site.socket());
    let (status, log) = other.start_failing(&[]);
    assert_eq!(status.code(), Some(1), "{log}");
    assert!(log.contains("already listening"), "{log}");
    assert!(site.client().health().await.unwrap().ready);
}

#[tokio::test]
async fn sigterm_exits_cleanly_and_state_survives() {
    let site = Site::new();
    let daemon = site.start(&[]).await;
    let d = site.client();
    let a = d.allocate(alloc_req("s1")).await.unwrap();
    d.create_endpoint(endpoint_create(&a)).await.unwrap();
    let status = daemon.signal_and_wait(libc::SIGTERM);
    assert_eq!(status.code(), Some(0));
    assert!(!site.socket().exists(), "socket left behind");
    // The client's pooled connection died with the daemon: it notices, redials,
    // and reports the daemon unreachable.
    assert!(d.health().await.unwrap_err().is_unreachable());

    let daemon = site.start(&[]).await;
    assert_eq!(
        d.allocate(alloc_req("s1")).await.unwrap().addresses,
        a.addresses
    );
    assert!(d.endpoint(owner("s1")).await.unwrap().is_some());
    assert_eq!(daemon.signal_and_wait(libc::SIGINT).code(), Some(0));
}

#[tokio::test]
async fn stale_socket_from_a_killed_daemon_is_replaced() {
    let site = Site::new();
    site.start(&[]).await.kill();
    assert!(site.socket().exists(), "SIGKILL leaves the socket file");
    let _daemon = site.start(&[]).await;
    assert!(site.client().health().await.unwrap().ready);
}
