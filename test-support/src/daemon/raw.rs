//! Raw HTTP/1.1 over the daemon's Unix socket (the API) or TCP (the metrics).

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpStream, UnixStream};

/// An HTTP answer read off the wire.
#[derive(Debug)]
pub struct RawAnswer {
    /// The status code (0 when the status line did not parse).
    pub status: u16,
    /// Status line and headers.
    pub head: String,
    /// Everything after the blank line.
    pub body: String,
}

impl RawAnswer {
    /// The body as JSON; panics with the whole answer when it is not.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {self:?}"))
    }

    /// Asserts an error answer of `status` and `kind` whose message contains `needle`.
    pub fn assert_error(&self, status: u16, kind: &str, needle: &str) {
        assert_eq!(self.status, status, "{self:?}");
        let v = self.json();
        assert_eq!(v["kind"], kind, "{self:?}");
        let msg = v["message"].as_str().unwrap();
        assert!(msg.contains(needle), "{msg:?} should contain {needle:?}");
    }
}

/// Sends `head` (request line and headers, without the blank line) and `body`
/// over a fresh connection with `Connection: close`; reads the whole answer.
pub async fn raw(socket: &Path, head: &str, body: &[u8]) -> RawAnswer {
    let mut request = format!("{head}\r\nHost: sarena\r\nConnection: close\r\n\r\n").into_bytes();
    request.extend_from_slice(body);
    raw_bytes(socket, request).await
}

/// Writes `request` verbatim (from a separate task, so a server that answers
/// before reading everything cannot deadlock the test) and reads until EOF.
pub async fn raw_bytes(socket: &Path, request: Vec<u8>) -> RawAnswer {
    exchange(UnixStream::connect(socket).await.unwrap(), request).await
}

/// [`raw`] over TCP to `addr` (the daemon's `--metrics-listen`).
pub async fn raw_tcp(addr: SocketAddr, head: &str) -> RawAnswer {
    raw_tcp_with(addr, head, b"").await
}

/// [`raw`] over TCP to `addr` (`--listen-tcp`), with a body.
pub async fn raw_tcp_with(addr: SocketAddr, head: &str, body: &[u8]) -> RawAnswer {
    let mut request = format!("{head}\r\nHost: sarena\r\nConnection: close\r\n\r\n").into_bytes();
    request.extend_from_slice(body);
    exchange(TcpStream::connect(addr).await.unwrap(), request).await
}

/// A loopback address whose port was free a moment ago (bound, then released).
pub fn free_loopback_addr() -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap()
}

async fn exchange<S>(stream: S, request: Vec<u8>) -> RawAnswer
where
    S: AsyncRead + AsyncWrite + Send + 'static,
{
    let (mut rd, mut wr) = tokio::io::split(stream);
    let writer = tokio::spawn(async move {
        let _ = wr.write_all(&request).await;
        wr
    });
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), rd.read_to_end(&mut buf))
        .await
        .expect("daemon did not answer")
        .unwrap();
    drop(writer.await);
    let text = String::from_utf8_lossy(&buf).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    RawAnswer {
        status,
        head: head.to_owned(),
        body: body.to_owned(),
    }
}
