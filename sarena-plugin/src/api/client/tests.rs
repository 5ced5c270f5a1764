//! Client tests against small in-test HTTP servers on temp Unix sockets.

use std::convert::Infallible;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::UnixListener;

use super::*;

type Handler = fn(&str, &str, &[u8]) -> (u16, String);

/// What the test server saw: `(method, path, body)`.
type Seen = Arc<Mutex<Vec<(String, String, String)>>>;

struct TestServer {
    socket: PathBuf,
    connections: Arc<AtomicUsize>,
    seen: Seen,
    _dir: tempfile::TempDir,
}

impl TestServer {
    fn start(handler: Handler) -> TestServer {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("d.sock");
        let listener = UnixListener::bind(&socket).unwrap();
        let connections = Arc::new(AtomicUsize::new(0));
        let seen: Seen = Arc::default();
        let (conns, seen2) = (connections.clone(), seen.clone());
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                conns.fetch_add(1, Ordering::SeqCst);
                let seen = seen2.clone();
                let svc = service_fn(move |req: Request<Incoming>| {
                    let seen = seen.clone();
                    async move {
                        let method = req.method().to_string();
                        let path = req.uri().path().to_owned();
                        let body = req.into_body().collect().await.unwrap().to_bytes();
                        let (status, answer) = handler(&method, &path, &body);
                        let text = String::from_utf8_lossy(&body).into_owned();
                        seen.lock().unwrap().push((method, path, text));
                        let resp = Response::builder()
                            .status(status)
                            .body(Full::new(Bytes::from(answer)))
                            .unwrap();
                        Ok::<_, Infallible>(resp)
                    }
                });
                tokio::spawn(http1::Builder::new().serve_connection(TokioIo::new(stream), svc));
            }
        });
        TestServer {
            socket,
            connections,
            seen,
            _dir: dir,
        }
    }

    fn client(&self) -> HttpDaemon {
        HttpDaemon::new(self.socket.to_str().unwrap()).unwrap()
    }
}

fn owner() -> Attachment {
    Attachment {
        container_id: "c0ffee".into(),
        ifname: "eth0".into(),
    }
}

fn happy(method: &str, path: &str, _body: &[u8]) -> (u16, String) {
    let ep = r#"{"owner":{"container_id":"c0ffee","ifname":"eth0"},"host_ifname":"lxc1",
        "host_ifindex":7,"host_mac":"aa:bb:cc:dd:ee:01","pod_mac":"aa:bb:cc:dd:ee:02",
        "addresses":["10.0.0.2/24"],"netns":"/run/netns/x","created_at":5}"#;
    let body = match (method, path) {
        ("GET", "/v1/daemon/config") => r#"{"mtu":1450,"dataplane":"ebpf"}"#.to_owned(),
        ("GET", "/v1/daemon/health") => r#"{"ready":true,"message":"ok"}"#.to_owned(),
        ("POST", "/v1/ipam/allocate") => r#"{"owner":{"container_id":"c0ffee","ifname":"eth0"},
            "addresses":[{"address":"10.0.0.2/24","gateway":"10.0.0.1","pool":"default"}],
            "routes":[{"dst":"0.0.0.0/0","gw":"10.0.0.1"}]}"#
            .to_owned(),
        ("DELETE", "/v1/ipam/allocations/c0ffee/eth0") => r#"{"released":true}"#.to_owned(),
        ("DELETE", "/v1/endpoints/c0ffee/eth0") => r#"{"deleted":false}"#.to_owned(),
        ("POST", "/v1/endpoint/create") | ("GET", "/v1/endpoints/c0ffee/eth0") => ep.to_owned(),
        ("GET", "/v1/endpoints") => format!("[{ep}]"),
        ("GET", "/v1/ipam") => r#"{"pools":[],"allocations":[]}"#.to_owned(),
        ("POST", "/v1/gc") => {
            r#"{"endpoints_removed":[],"allocations_released":[{"container_id":"x","ifname":"eth0"}]}"#
                .to_owned()
        }
        _ => return (404, r#"{"kind":"not_found","message":"no such thing"}"#.to_owned()),
    };
    (200, body)
}

#[test]
fn endpoints_parse() {
    for ok in [
        "/run/sarena/sarena.sock",
        "unix:///run/sarena/sarena.sock",
        "http://127.0.0.1:8080",
        "http://[::1]:8080/",
        "http://localhost:1234",
        "http://10.1.2.3",
    ] {
        let d = HttpDaemon::new(ok).unwrap_or_else(|e| panic!("{ok}: {e}"));
        assert_eq!(d.daemon_endpoint(), ok);
    }
    for bad in [
        "",
        "run/sarena.sock",
        "unix://relative.sock",
        "https://127.0.0.1:8080",
        "http://daemon.example:8080",
        "http://127.0.0.1:8080/v1",
        "http://127.0.0.1:8080/?x=1",
        "tcp://127.0.0.1:1",
    ] {
        let err = HttpDaemon::new(bad).unwrap_err();
        assert!(
            matches!(err, DaemonError::InvalidEndpoint { .. }),
            "{bad}: {err}"
        );
    }
    assert_eq!(
        parse_http_authority("http://[::1]:9/").unwrap(),
        "[::1]:9".parse().unwrap()
    );
    assert_eq!(
        parse_http_authority("http://localhost").unwrap(),
        "127.0.0.1:80".parse().unwrap()
    );
}

#[tokio::test]
async fn every_call_hits_its_route_and_decodes() {
    let server = TestServer::start(happy);
    let d = server.client();
    assert_eq!(
        d.config().await.unwrap(),
        DaemonConfig {
            mtu: 1450,
            dataplane: "ebpf".into()
        }
    );
    assert!(d.health().await.unwrap().ready);
    let req = AllocateRequest {
        owner: owner(),
        pod: PodRef {
            namespace: Some("ns".into()),
            ..PodRef::default()
        },
        requested: vec![],
        pool: None,
    };
    let alloc = d.allocate(req.clone()).await.unwrap();
    assert_eq!(alloc.addresses[0].address.to_string(), "10.0.0.2/24");
    assert!(d.release(owner()).await.unwrap());
    assert!(!d.delete_endpoint(owner()).await.unwrap());
    let ep = d.endpoint(owner()).await.unwrap().unwrap();
    assert_eq!(ep.spec.host_ifindex, 7);
    assert_eq!(d.endpoints().await.unwrap(), vec![ep]);
    assert_eq!(d.ipam_state().await.unwrap(), IpamState::default());
    let report = d
        .gc(GcRequest {
            valid: vec![owner()],
        })
        .await
        .unwrap();
    assert_eq!(report.allocations_released.len(), 1);

    let seen = server.seen.lock().unwrap().clone();
    let routes: Vec<(&str, &str)> = seen
        .iter()
        .map(|(m, p, _)| (m.as_str(), p.as_str()))
        .collect();
    assert_eq!(
        routes,
        [
            ("GET", "/v1/daemon/config"),
            ("GET", "/v1/daemon/health"),
            ("POST", "/v1/ipam/allocate"),
            ("DELETE", "/v1/ipam/allocations/c0ffee/eth0"),
            ("DELETE", "/v1/endpoints/c0ffee/eth0"),
            ("GET", "/v1/endpoints/c0ffee/eth0"),
            ("GET", "/v1/endpoints"),
            ("GET", "/v1/ipam"),
            ("POST", "/v1/gc"),
        ]
    );
    let sent: AllocateRequest = serde_json::from_str(&seen[2].2).unwrap();
    assert_eq!(sent, req);
    // One connection served every call.
    assert_eq!(server.connections.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn error_bodies_become_api_errors() {
    let server = TestServer::start(|_, path, _| match path {
        "/v1/ipam/allocate" => (
            409,
            r#"{"kind":"pool_exhausted","message":"pool default is full"}"#.into(),
        ),
        "/v1/daemon/health" => (502, "<html>bad gateway</html>".into()),
        _ => (
            404,
            r#"{"kind":"not_found","message":"no endpoint"}"#.into(),
        ),
    });
    let d = server.client();
    let req = AllocateRequest {
        owner: owner(),
        pod: PodRef::default(),
        requested: vec![],
        pool: None,
    };
    match d.allocate(req).await.unwrap_err() {
        DaemonError::Api { kind, message } => {
            assert_eq!(kind, ApiErrorKind::PoolExhausted);
            assert_eq!(message, "pool default is full");
        }
        e => panic!("unexpected {e}"),
    }
    match d.health().await.unwrap_err() {
        DaemonError::Api { kind, message } => {
            assert_eq!(kind, ApiErrorKind::Internal);
            assert!(
                message.contains("502") && message.contains("bad gateway"),
                "{message}"
            );
        }
        e => panic!("unexpected {e}"),
    }
    // 404 not_found on GET of one endpoint is "no such endpoint", not an error.
    assert_eq!(d.endpoint(owner()).await.unwrap(), None);
    // ...but it is an error everywhere else.
    assert_eq!(
        d.endpoints().await.unwrap_err().kind(),
        Some(ApiErrorKind::NotFound)
    );
}

#[tokio::test]
async fn undecodable_success_is_a_decode_error() {
    let server = TestServer::start(|_, _, _| (200, r#"{"mtu":"big"}"#.into()));
    let err = server.client().config().await.unwrap_err();
    assert!(
        matches!(err, DaemonError::Decode { ref path, .. } if path == "/v1/daemon/config"),
        "{err}"
    );
}

#[tokio::test]
async fn path_segments_are_percent_encoded() {
    let server = TestServer::start(|_, _, _| (200, r#"{"released":false}"#.into()));
    let odd = Attachment {
        container_id: "c1".into(),
        ifname: "a/b c".into(),
    };
    assert!(!server.client().release(odd).await.unwrap());
    let seen = server.seen.lock().unwrap().clone();
    assert_eq!(seen[0].1, "/v1/ipam/allocations/c1/a%2Fb%20c");
}

#[tokio::test]
async fn missing_socket_is_unreachable() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("absent.sock");
    let d = HttpDaemon::new(path.to_str().unwrap()).unwrap();
    let err = d.config().await.unwrap_err();
    assert!(err.is_unreachable(), "{err}");
    let text = crate::error_chain(&err);
    assert!(
        text.contains("absent.sock") && text.contains("No such file"),
        "{text}"
    );
}

#[tokio::test]
async fn stale_socket_is_unreachable() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stale.sock");
    drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
    assert!(path.exists());
    let d = HttpDaemon::new(&format!("unix://{}", path.display())).unwrap();
    let err = d.health().await.unwrap_err();
    assert!(err.is_unreachable(), "{err}");
    assert!(crate::error_chain(&err).contains("refused"), "{err}");
}

#[tokio::test]
async fn closed_tcp_port_is_unreachable() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let d = HttpDaemon::new(&format!("http://127.0.0.1:{port}")).unwrap();
    assert!(d.health().await.unwrap_err().is_unreachable());
}

#[tokio::test]
async fn silent_daemon_times_out_as_transport_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("silent.sock");
    let listener = UnixListener::bind(&path).unwrap();
    let holder = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((s, _)) = listener.accept().await {
            held.push(s);
        }
    });
    let d = HttpDaemon::new(path.to_str().unwrap())
        .unwrap()
        .with_timeout(Duration::from_millis(200));
    let err = d.config().await.unwrap_err();
    match &err {
        DaemonError::Transport { method, path, .. } => {
            assert_eq!(
                (method.as_str(), path.as_str()),
                ("GET", "/v1/daemon/config")
            );
        }
        e => panic!("unexpected {e}"),
    }
    assert!(
        format!("{:?}", std::error::Error::source(&err)).contains("TimedOut"),
        "{err:?}"
    );
    holder.abort();
}

/// Accepts one connection, reads the request and hangs up without answering;
/// then, unless `vanish`, serves the next connections normally; if `vanish`,
/// removes the socket first so the retry finds nobody.
async fn hang_up_once(vanish: bool) -> (tempfile::TempDir, PathBuf, Arc<AtomicUsize>) {
    use tokio::io::AsyncReadExt;
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("d.sock");
    let listener = UnixListener::bind(&socket).unwrap();
    let conns = Arc::new(AtomicUsize::new(0));
    let (count, path) = (conns.clone(), socket.clone());
    tokio::spawn(async move {
        let (mut first, _) = listener.accept().await.unwrap();
        count.fetch_add(1, Ordering::SeqCst);
        let mut buf = [0u8; 1024];
        let _ = first.read(&mut buf).await;
        if vanish {
            std::fs::remove_file(&path).unwrap();
            drop(listener);
            drop(first);
            return;
        }
        drop(first);
        while let Ok((stream, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            let svc = service_fn(|req: Request<Incoming>| async move {
                let (s, body) = happy(req.method().as_str(), req.uri().path(), b"");
                Ok::<_, Infallible>(
                    Response::builder()
                        .status(s)
                        .body(Full::new(Bytes::from(body)))
                        .unwrap(),
                )
            });
            tokio::spawn(http1::Builder::new().serve_connection(TokioIo::new(stream), svc));
        }
    });
    (dir, socket, conns)
}

#[tokio::test]
async fn a_broken_exchange_is_retried_once_on_a_fresh_connection() {
    let (_dir, socket, conns) = hang_up_once(false).await;
    let d = HttpDaemon::new(socket.to_str().unwrap()).unwrap();
    assert_eq!(d.config().await.unwrap().mtu, 1450);
    assert_eq!(conns.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_request_that_may_have_arrived_is_never_reported_unreachable() {
    let (_dir, socket, _) = hang_up_once(true).await;
    let d = HttpDaemon::new(socket.to_str().unwrap()).unwrap();
    let err = d
        .allocate(AllocateRequest {
            owner: owner(),
            pod: PodRef::default(),
            requested: vec![],
            pool: None,
        })
        .await
        .unwrap_err();
    assert!(matches!(err, DaemonError::Transport { .. }), "{err}");
}

/// Release 0.1.0's daemon: `?allocation=keep` is an unknown query (`400`),
/// then a plain DELETE works.
fn predates_allocation_keep(method: &str, path: &str, body: &[u8]) -> (u16, String) {
    static DELETES: AtomicUsize = AtomicUsize::new(0);
    if (method, path) == ("DELETE", "/v1/endpoints/c0ffee/eth0") {
        if DELETES.fetch_add(1, Ordering::SeqCst) == 0 {
            let refused = r#"{"kind":"bad_request","message":"unknown query \"allocation=keep\"; the only one is veth=remove"}"#;
            return (400, refused.to_owned());
        }
        return (200, r#"{"deleted":true}"#.to_owned());
    }
    happy(method, path, body)
}

#[tokio::test]
async fn unregistering_on_a_daemon_without_allocation_keep_deletes_the_endpoint() {
    let server = TestServer::start(predates_allocation_keep);
    let previous = server.client().unregister_endpoint(owner()).await.unwrap();
    assert_eq!(previous.map(|e| e.spec.host_ifindex), Some(7));
    let seen: Vec<(String, String)> = server
        .seen
        .lock()
        .unwrap()
        .iter()
        .map(|(m, p, _)| (m.clone(), p.clone()))
        .collect();
    let path = "/v1/endpoints/c0ffee/eth0".to_string();
    assert_eq!(
        seen,
        vec![
            ("DELETE".into(), path.clone()),
            ("GET".into(), path.clone()),
            ("DELETE".into(), path)
        ]
    );
}
