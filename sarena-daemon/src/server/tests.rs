//! Listener tests: socket creation rules and graceful shutdown, in process.

use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use sarena_core::api::*;
use tokio::sync::{Notify, oneshot};

use super::*;

#[test]
fn bind_creates_parent_and_mode_0600_socket() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a/b/sarena.sock");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let sock = rt.block_on(async { UnixSocket::bind(&path) }).unwrap();
    let meta = fs::symlink_metadata(&path).unwrap();
    assert!(meta.file_type().is_socket());
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    // The private staging directory is gone.
    let names: Vec<_> = fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["sarena.sock"]);
    // A live socket is not stolen.
    let err = rt.block_on(async { UnixSocket::bind(&path) }).unwrap_err();
    assert!(matches!(err, ServerError::InUse { .. }), "{err}");
    sock.remove_file();
    assert!(!path.exists());
}

#[tokio::test]
async fn stale_socket_is_replaced_other_files_are_not() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.sock");
    drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
    let sock = UnixSocket::bind(&path).unwrap();
    assert_eq!(fs::symlink_metadata(&path).unwrap().ino(), sock.ino);

    let file = dir.path().join("not-a-socket");
    fs::write(&file, "precious").unwrap();
    let err = UnixSocket::bind(&file).unwrap_err();
    assert!(matches!(err, ServerError::NotASocket { .. }), "{err}");
    assert_eq!(fs::read_to_string(&file).unwrap(), "precious");
}

#[tokio::test]
async fn shutdown_leaves_a_replaced_socket_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.sock");
    let sock = UnixSocket::bind(&path).unwrap();
    fs::remove_file(&path).unwrap();
    let _other = std::os::unix::net::UnixListener::bind(&path).unwrap();
    sock.remove_file();
    assert!(path.exists());
}

#[test]
fn tcp_is_loopback_only_unless_allowed() {
    for ok in [
        "127.0.0.1:80",
        "127.1.2.3:0",
        "[::1]:80",
        "[::ffff:127.0.0.1]:80",
    ] {
        assert!(check_tcp_addr(ok.parse().unwrap(), false).is_ok(), "{ok}");
    }
    for remote in ["0.0.0.0:80", "10.0.0.1:80", "[::]:80", "[fd00::1]:80"] {
        let addr = remote.parse().unwrap();
        let err = check_tcp_addr(addr, false).unwrap_err();
        assert!(err.to_string().contains("--allow-remote-tcp"), "{err}");
        assert!(check_tcp_addr(addr, true).is_ok());
    }
}

/// A daemon whose `config` waits until released, to hold a request in flight.
struct Slow {
    started: Notify,
    release: Notify,
    finished: AtomicBool,
}

#[async_trait]
impl Daemon for Slow {
    async fn config(&self) -> Result<DaemonConfig, DaemonError> {
        self.started.notify_one();
        self.release.notified().await;
        self.finished.store(true, Ordering::SeqCst);
        Ok(DaemonConfig {
            mtu: 1400,
            dataplane: "kernel".into(),
        })
    }
    async fn health(&self) -> Result<Health, DaemonError> {
        Ok(Health {
            ready: true,
            message: String::new(),
        })
    }
    async fn allocate(&self, _: AllocateRequest) -> Result<Allocation, DaemonError> {
        Err(DaemonError::api(ApiErrorKind::Internal, "unused"))
    }
    async fn release(&self, _: Attachment) -> Result<bool, DaemonError> {
        Ok(false)
    }
    async fn create_endpoint(&self, _: EndpointCreate) -> Result<Endpoint, DaemonError> {
        Err(DaemonError::api(ApiErrorKind::Internal, "unused"))
    }
    async fn delete_endpoint(&self, _: Attachment) -> Result<bool, DaemonError> {
        Ok(false)
    }
    async fn unregister_endpoint(&self, _: Attachment) -> Result<Option<Endpoint>, DaemonError> {
        Ok(None)
    }
    async fn endpoint(&self, _: Attachment) -> Result<Option<Endpoint>, DaemonError> {
        Ok(None)
    }
    async fn delete_endpoint_and_veth(&self, _: Attachment) -> Result<Deleted, DaemonError> {
        Err(DaemonError::api(ApiErrorKind::Internal, "unused"))
    }
    async fn endpoint_stats_of(&self, _: Attachment) -> Result<Option<EndpointStats>, DaemonError> {
        Ok(None)
    }
    async fn gc(&self, _: GcRequest) -> Result<GcReport, DaemonError> {
        Ok(GcReport::default())
    }
}

#[async_trait]
impl Inspect for Slow {
    async fn endpoints(&self) -> Result<Vec<Endpoint>, DaemonError> {
        Ok(vec![])
    }
    async fn ipam_state(&self) -> Result<IpamState, DaemonError> {
        Ok(IpamState::default())
    }
    async fn status(&self) -> Result<DaemonStatus, DaemonError> {
        Err(DaemonError::api(ApiErrorKind::Internal, "unused"))
    }
    async fn endpoint_stats(&self) -> Result<Vec<EndpointStats>, DaemonError> {
        Ok(vec![])
    }

    async fn policy_endpoints(&self) -> Result<Vec<sarena_core::api::PolicyEndpoint>, DaemonError> {
        Err(sarena_core::api::no_policy())
    }

    async fn policy_explain(
        &self,
        _: sarena_core::api::PolicyQuery,
    ) -> Result<sarena_core::api::PolicyExplanation, DaemonError> {
        Err(sarena_core::api::no_policy())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_finishes_in_flight_requests_then_removes_the_socket() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d.sock");
    let slow = Arc::new(Slow {
        started: Notify::new(),
        release: Notify::new(),
        finished: AtomicBool::new(false),
    });
    let tcp = bind_tcp("127.0.0.1:0".parse().unwrap(), false)
        .await
        .unwrap();
    let tcp_addr = tcp.local_addr().unwrap();
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let server = tokio::spawn(serve(
        slow.clone(),
        UnixSocket::bind(&path).unwrap(),
        Some(TcpApi::new(tcp, ApiToken::new(&"t".repeat(32)))),
        async {
            let _ = stop_rx.await;
        },
        Duration::from_secs(5),
    ));

    let tcp_client = HttpDaemon::new(&format!("http://{tcp_addr}")).unwrap();
    assert!(tcp_client.health().await.unwrap().ready);

    let client = HttpDaemon::new(path.to_str().unwrap()).unwrap();
    let in_flight = tokio::spawn(async move { client.config().await });
    slow.started.notified().await;
    stop_tx.send(()).unwrap();
    // Accepting stops and the socket goes away while the request is still in flight.
    for _ in 0..100 {
        if !path.exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(!path.exists());
    assert!(!server.is_finished());
    let late = HttpDaemon::new(path.to_str().unwrap()).unwrap();
    assert!(late.health().await.unwrap_err().is_unreachable());

    slow.release.notify_one();
    let answer = in_flight.await.unwrap().unwrap();
    assert_eq!(answer.mtu, 1400);
    assert!(slow.finished.load(Ordering::SeqCst));
    tokio::time::timeout(Duration::from_secs(5), server)
        .await
        .unwrap()
        .unwrap();
    assert!(tcp_client.health().await.unwrap_err().is_unreachable());
}

/// A server with `limits` on a fresh socket, over a daemon whose health
/// answers at once; stopped when the returned sender is dropped.
async fn limited_server(limits: Limits) -> (tempfile::TempDir, PathBuf, oneshot::Sender<()>) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("l.sock");
    let daemon = Arc::new(Slow {
        started: Notify::new(),
        release: Notify::new(),
        finished: AtomicBool::new(false),
    });
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(serve_with_limits(
        daemon,
        UnixSocket::bind(&path).unwrap(),
        None,
        async {
            let _ = stopped.await;
        },
        Duration::from_secs(1),
        limits,
    ));
    (dir, path, stop)
}

/// Opens a connection and sends the start of a request line, never the rest.
async fn slow_loris(path: &Path) -> tokio::net::UnixStream {
    use tokio::io::AsyncWriteExt;
    let mut stream = tokio::net::UnixStream::connect(path).await.unwrap();
    stream.write_all(b"GET /v1/daemon/hea").await.unwrap();
    stream
}

/// Reads until EOF; `true` when the peer closed the connection within `within`.
async fn closed_within(stream: &mut tokio::net::UnixStream, within: Duration) -> bool {
    use tokio::io::AsyncReadExt;
    let mut buf = Vec::new();
    matches!(
        tokio::time::timeout(within, stream.read_to_end(&mut buf)).await,
        Ok(Ok(_)) | Ok(Err(_))
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_loris_clients_are_cut_off_at_the_header_timeout() {
    let limits = unix_limits(64, Duration::from_millis(300));
    let (_dir, path, _stop) = limited_server(limits).await;
    let mut slow = Vec::new();
    for _ in 0..8 {
        slow.push(slow_loris(&path).await);
    }
    // An idle connection that never sends a byte is cut off as well.
    let mut idle = tokio::net::UnixStream::connect(&path).await.unwrap();
    // Meanwhile a well-behaved client is served at once.
    let started = std::time::Instant::now();
    let client = HttpDaemon::new(path.to_str().unwrap()).unwrap();
    assert!(client.health().await.unwrap().ready);
    assert!(started.elapsed() < Duration::from_millis(250));
    for stream in slow.iter_mut().chain(std::iter::once(&mut idle)) {
        assert!(
            closed_within(stream, Duration::from_secs(3)).await,
            "a slow client was not cut off"
        );
    }
}

/// [`Limits`] whose Unix socket serves `max` connections, with `header_timeout`.
fn unix_limits(max: usize, header_timeout: Duration) -> Limits {
    Limits {
        unix: crate::conn::ConnLimits {
            max_connections: max,
            header_timeout,
            write_timeout: Duration::from_secs(10),
        },
        ..Limits::DEFAULT
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_the_connection_cap_idle_clients_give_way_to_new_ones() {
    let limits = unix_limits(2, Duration::from_secs(30));
    let (_dir, path, _stop) = limited_server(limits).await;
    let mut held = [slow_loris(&path).await, slow_loris(&path).await];
    let started = std::time::Instant::now();
    let client = HttpDaemon::new(path.to_str().unwrap()).unwrap();
    assert!(client.health().await.unwrap().ready);
    // Served at once, long before the header timeout: the oldest idle
    // connection was closed to make room, and the cap held.
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    assert!(closed_within(&mut held[0], Duration::from_secs(1)).await);
}
