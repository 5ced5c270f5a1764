//! The API over TCP (`--listen-tcp`) against the real daemon: every route
//! but the health check needs the bearer token of the token file (created
//! 0600 by the daemon when absent; a file others can read is refused), a
//! request without it or with a wrong one changes nothing, and idle TCP
//! clients cannot lock the plugin out of the Unix socket.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::SocketAddr;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::time::{Duration, Instant};

use sarena_core::api::{
    Allocation, ApiErrorKind, Daemon, EndpointCreate, EndpointSpec, HttpDaemon, Inspect as _,
};
use sarena_test_support::daemon::{
    RawAnswer, Site, alloc_req, free_loopback_addr, owner, raw_tcp_with,
};
use tokio::io::AsyncWriteExt;

fn endpoint_create(alloc: &Allocation) -> EndpointCreate {
    EndpointCreate {
        spec: EndpointSpec::for_tests(
            alloc.owner.clone(),
            &format!("lxc{}", alloc.owner.container_id),
            alloc.addresses.iter().map(|a| a.address).collect(),
        ),
    }
}

/// `POST path` with a JSON `body` over TCP, with `authorization` (a whole
/// header line) when given.
async fn post(addr: SocketAddr, path: &str, body: &str, authorization: Option<&str>) -> RawAnswer {
    let auth = authorization
        .map(|a| format!("\r\n{a}"))
        .unwrap_or_default();
    let head = format!(
        "POST {path} HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: {}{auth}",
        body.len()
    );
    raw_tcp_with(addr, &head, body.as_bytes()).await
}

/// A daemon with `--listen-tcp` on a free loopback port.
async fn tcp_daemon(site: &Site) -> (sarena_test_support::daemon::Running, SocketAddr) {
    let addr = free_loopback_addr();
    let daemon = site.start(&["--listen-tcp", &addr.to_string()]).await;
    (daemon, addr)
}

#[tokio::test]
async fn tcp_without_the_token_is_refused_and_changes_nothing() {
    let site = Site::new();
    let (_daemon, addr) = tcp_daemon(&site).await;
    let unix = site.client();
    let kept = unix.allocate(alloc_req("kept")).await.unwrap();
    unix.create_endpoint(endpoint_create(&kept)).await.unwrap();
    let other = unix.allocate(alloc_req("other")).await.unwrap();
    let create = serde_json::to_string(&endpoint_create(&other)).unwrap();

    for auth in [
        None,
        Some("Authorization: Bearer not-the-token"),
        Some("Authorization: Basic cm9vdDpyb290"),
    ] {
        let gc = post(addr, "/v1/gc", r#"{"valid":[]}"#, auth).await;
        gc.assert_error(401, "unauthorized", "token");
        assert!(
            gc.head.contains("WWW-Authenticate: Bearer")
                || gc.head.contains("www-authenticate: Bearer"),
            "{gc:?}"
        );
        let created = post(addr, "/v1/endpoint/create", &create, auth).await;
        assert_eq!(created.status, 401, "{created:?}");
    }
    // Nothing was deleted, nothing created.
    assert!(unix.endpoint(owner("kept")).await.unwrap().is_some());
    assert!(unix.endpoint(owner("other")).await.unwrap().is_none());
    assert_eq!(unix.ipam_state().await.unwrap().allocations.len(), 2);

    // The health check is open (it says only whether ADD can be served).
    let health = raw_tcp_with(addr, "GET /v1/daemon/health HTTP/1.1", b"").await;
    assert_eq!(health.status, 200, "{health:?}");

    // With the token, the same requests work: through the client...
    let token_file = site.state_dir().join("api-token");
    let tcp = HttpDaemon::new(&format!("http://{addr}"))
        .unwrap()
        .with_token_file(&token_file)
        .unwrap();
    tcp.create_endpoint(endpoint_create(&other)).await.unwrap();
    // ... and raw.
    let token = std::fs::read_to_string(&token_file).unwrap();
    let bearer = format!("Authorization: Bearer {}", token.trim());
    let gc = post(addr, "/v1/gc", r#"{"valid":[]}"#, Some(&bearer)).await;
    assert_eq!(gc.status, 200, "{gc:?}");
    assert!(unix.endpoints().await.unwrap().is_empty());
}

#[tokio::test]
async fn the_token_file_is_the_daemons_alone() {
    let site = Site::new();
    let (daemon, addr) = tcp_daemon(&site).await;
    let token_file = site.state_dir().join("api-token");
    let meta = std::fs::symlink_metadata(&token_file).unwrap();
    assert!(meta.file_type().is_file());
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    // SAFETY: geteuid has no preconditions.
    assert_eq!(meta.uid(), unsafe { libc::geteuid() });
    let token = std::fs::read_to_string(&token_file).unwrap();
    assert!(token.trim().len() >= 32, "{token:?}");
    drop(daemon);

    // Restarted, it keeps the token: clients configured with it keep working.
    let _daemon = site.start(&["--listen-tcp", &addr.to_string()]).await;
    assert_eq!(std::fs::read_to_string(&token_file).unwrap(), token);
    let tcp = HttpDaemon::new(&format!("http://{addr}"))
        .unwrap()
        .with_token_file(&token_file)
        .unwrap();
    assert!(tcp.status().await.is_ok());
    // A client without it is told why.
    let anonymous = HttpDaemon::new(&format!("http://{addr}")).unwrap();
    let err = anonymous.status().await.unwrap_err();
    assert_eq!(err.kind(), Some(ApiErrorKind::Unauthorized), "{err}");
}

#[test]
fn a_token_file_others_can_read_is_refused() {
    for (mode, content) in [(0o644, "x".repeat(64)), (0o600, "short".to_owned())] {
        let site = Site::new();
        let token_file = site.dir.path().join("token");
        std::fs::write(&token_file, &content).unwrap();
        std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(mode)).unwrap();
        let (status, log) = site.start_failing(&[
            "--listen-tcp",
            &free_loopback_addr().to_string(),
            "--tcp-token-file",
            token_file.to_str().unwrap(),
        ]);
        assert_eq!(status.code(), Some(1), "{log}");
        assert!(log.contains(token_file.to_str().unwrap()), "{log}");
        assert!(!site.socket().exists(), "it served before refusing");
    }
    // A symlink is not followed.
    let site = Site::new();
    let target = site.dir.path().join("real");
    std::fs::write(&target, "y".repeat(64)).unwrap();
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o600)).unwrap();
    let link = site.dir.path().join("link");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let (status, log) = site.start_failing(&[
        "--listen-tcp",
        &free_loopback_addr().to_string(),
        "--tcp-token-file",
        link.to_str().unwrap(),
    ]);
    assert_eq!(status.code(), Some(1), "{log}");
    assert!(log.contains("link"), "{log}");
}

/// Opens `n` TCP connections to `addr` that each send half a request line
/// and then nothing.
async fn idle_clients(addr: SocketAddr, n: usize) -> Vec<tokio::net::TcpStream> {
    let mut idle = Vec::new();
    for _ in 0..n {
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        let _ = s.write_all(b"GET /v1/daemon/sta").await;
        idle.push(s);
    }
    idle
}

/// How long `site`'s Unix socket takes to answer `GET /v1/daemon/status`.
async fn unix_status_time(site: &Site) -> Duration {
    let client = site.client().with_timeout(Duration::from_secs(3));
    let started = Instant::now();
    let answer = client.status().await;
    let took = started.elapsed();
    answer.unwrap();
    took
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_tcp_clients_cannot_lock_the_plugin_out() {
    let site = Site::new();
    let (_daemon, addr) = tcp_daemon(&site).await;
    // More idle TCP clients than the daemon serves connections at once.
    let _idle = idle_clients(addr, 300).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    // The plugin's path, the Unix socket, answers at once...
    for _ in 0..5 {
        let took = unix_status_time(&site).await;
        assert!(took < Duration::from_secs(1), "{took:?}");
    }
    // ... and so does an authenticated TCP client.
    let tcp = HttpDaemon::new(&format!("http://{addr}"))
        .unwrap()
        .with_token_file(&site.state_dir().join("api-token"))
        .unwrap()
        .with_timeout(Duration::from_secs(3));
    let started = Instant::now();
    tcp.health().await.unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
}

/// The token file a client is pointed at must exist.
#[test]
fn a_client_pointed_at_a_missing_token_file_fails_naming_it() {
    let missing = Path::new("/nonexistent/sarena-token");
    let err = HttpDaemon::new("http://127.0.0.1:1")
        .unwrap()
        .with_token_file(missing)
        .unwrap_err();
    assert!(
        err.to_string().contains("/nonexistent/sarena-token"),
        "{err}"
    );
}
