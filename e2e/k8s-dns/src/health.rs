//! The probes' HTTP endpoint: `GET /healthz` answers 200 while the process
//! serves (liveness), `GET /readyz` 200 once the watches have listed every
//! Service and Endpoints object (readiness), 503 before. A minimal HTTP/1.x
//! responder: the kubelet's probe is its only client.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The longest request head read; a longer one is dropped (a probe never
/// sends one).
const MAX_HEAD: usize = 8192;
/// A client slower than this is dropped.
const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// Why the health endpoint could not start.
#[derive(Debug, thiserror::Error)]
pub enum HealthError {
    /// The listener could not be bound.
    #[error("cannot listen on TCP {addr} (health endpoint)")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
}

/// Binds the health endpoint's listener.
pub async fn bind(addr: SocketAddr) -> Result<TcpListener, HealthError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| HealthError::Bind { addr, source })
}

/// Serves the probes on `listener` forever; `ready` is the readiness.
pub async fn serve(listener: TcpListener, ready: Arc<AtomicBool>) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let ready = Arc::clone(&ready);
                tokio::spawn(async move {
                    if let Err(e) = respond(stream, &ready).await {
                        tracing::debug!("health endpoint: {e}");
                    }
                });
            }
            Err(e) => {
                tracing::warn!("health endpoint accept: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// The status line and body for `path`.
fn route(path: &str, ready: bool) -> (&'static str, &'static str) {
    match path {
        "/healthz" => ("200 OK", "ok\n"),
        "/readyz" if ready => ("200 OK", "ok\n"),
        "/readyz" => ("503 Service Unavailable", "watches not synced\n"),
        _ => ("404 Not Found", "not found\n"),
    }
}

async fn respond(mut stream: TcpStream, ready: &AtomicBool) -> std::io::Result<()> {
    let mut head = Vec::with_capacity(512);
    let mut chunk = [0u8; 512];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = match tokio::time::timeout(READ_TIMEOUT, stream.read(&mut chunk)).await {
            Ok(read) => read?,
            Err(_) => return Ok(()),
        };
        if n == 0 || head.len() + n > MAX_HEAD {
            return Ok(());
        }
        head.extend_from_slice(chunk.get(..n).unwrap_or_default());
    }
    let text = String::from_utf8_lossy(&head);
    let mut request_line = text.lines().next().unwrap_or_default().split_whitespace();
    let (status, body) = match (request_line.next(), request_line.next()) {
        (Some("GET" | "HEAD"), Some(path)) => route(path, ready.load(Ordering::Acquire)),
        _ => ("400 Bad Request", "bad request\n"),
    };
    let reply = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(reply.as_bytes()).await?;
    stream.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readiness_follows_the_sync_and_liveness_does_not() {
        assert_eq!(route("/healthz", false).0, "200 OK");
        assert_eq!(route("/readyz", false).0, "503 Service Unavailable");
        assert_eq!(route("/readyz", true).0, "200 OK");
        assert_eq!(route("/other", true).0, "404 Not Found");
    }

    #[tokio::test]
    async fn a_probe_gets_an_http_reply() {
        let listener = bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let ready = Arc::new(AtomicBool::new(false));
        tokio::spawn(serve(listener, Arc::clone(&ready)));
        let get = |path: &'static str| async move {
            let mut s = TcpStream::connect(addr).await.unwrap();
            let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\nUser-Agent: kube-probe\r\n\r\n");
            s.write_all(req.as_bytes()).await.unwrap();
            let mut out = String::new();
            s.read_to_string(&mut out).await.unwrap();
            out
        };
        assert!(get("/readyz").await.starts_with("HTTP/1.1 503"));
        ready.store(true, Ordering::Release);
        let reply = get("/readyz").await;
        assert!(reply.starts_with("HTTP/1.1 200 OK\r\n"), "{reply}");
        assert!(reply.ends_with("\r\n\r\nok\n"));
    }
}
