//! [`HttpDaemon`]: the [`Daemon`] trait spoken over HTTP/1.1 to `sarena-daemon`,
//! through its Unix socket (default) or a TCP listener.
//!
//! The plugin is a short-lived process whose ADD makes three calls in a row, so
//! the client is cheap to build (no DNS resolver, no TLS, no connection until the
//! first call), keeps one pooled connection that the following calls reuse, and
//! bounds every call with a timeout.

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;
use std::time::Duration;

use async_trait::async_trait;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Bytes;
use hyper::{Method, Request, StatusCode, Uri, header};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use hyperlocal::UnixConnector;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::API_BASE;
use super::bodies::{Deleted, Released, Unregistered};
use super::daemon::Daemon;
use super::endpoint::{Endpoint, EndpointCreate};
use super::error::{ApiErrorBody, ApiErrorKind, DaemonError};
use super::inspect::Inspect;
use super::path::{allocation_path, endpoint_path, endpoint_stats_path};
use super::status::{DaemonStatus, EndpointStats};
use super::types::*;

/// The daemon's well-known Unix socket, used when no endpoint is configured.
pub const DEFAULT_SOCKET: &str = "/run/sarena/sarena.sock";

/// How long one call may take, connection included, before it fails with
/// [`DaemonError::Transport`].
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// Largest response body the client reads (a full `GET /ipam` of a large node fits).
const MAX_RESPONSE_BYTES: usize = 256 * 1024 * 1024;

/// A [`Daemon`] reached over HTTP.
///
/// Calls must run inside a tokio runtime (any flavour). Clones share the
/// connection pool.
///
/// ```no_run
/// use sarena_plugin::api::{Daemon, HttpDaemon, DEFAULT_SOCKET};
/// # async fn demo() -> Result<(), sarena_plugin::api::DaemonError> {
/// let daemon = HttpDaemon::new(DEFAULT_SOCKET)?;
/// let config = daemon.config().await?;
/// println!("pod MTU {}", config.mtu);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct HttpDaemon {
    endpoint: String,
    transport: Transport,
    timeout: Duration,
    /// `Bearer <token>`, sent on TCP only ([`HttpDaemon::with_token_file`]).
    authorization: Option<header::HeaderValue>,
}

#[derive(Debug, Clone)]
enum Transport {
    /// `base` is `unix://<hex socket path>:0`, the URI form `UnixConnector` dials.
    Unix {
        client: Client<UnixConnector, Full<Bytes>>,
        base: String,
    },
    /// `base` is `http://<ip>:<port>`.
    Tcp {
        client: Client<HttpConnector, Full<Bytes>>,
        base: String,
    },
}

impl HttpDaemon {
    /// A client for `endpoint`: an absolute Unix socket path (`/run/sarena/sarena.sock`),
    /// `unix:///path`, or `http://host:port` where host is an IP address or
    /// `localhost` (no DNS, no TLS). Nothing is connected until the first call.
    pub fn new(endpoint: &str) -> Result<HttpDaemon, DaemonError> {
        let invalid = |reason: &str| DaemonError::InvalidEndpoint {
            endpoint: endpoint.to_owned(),
            reason: reason.to_owned(),
        };
        let transport = if let Some(path) = endpoint.strip_prefix("unix://") {
            unix_transport(path)
                .ok_or_else(|| invalid("unix:// must be followed by an absolute path"))?
        } else if endpoint.starts_with("http://") {
            let addr = parse_http_authority(endpoint).map_err(invalid)?;
            let mut connector = HttpConnector::new();
            connector.set_nodelay(true);
            connector.set_connect_timeout(Some(DEFAULT_TIMEOUT));
            Transport::Tcp {
                client: build_client(connector),
                base: format!("http://{addr}"),
            }
        } else if endpoint.contains("://") {
            return Err(invalid(
                "only unix:// and http:// endpoints are supported (no TLS)",
            ));
        } else {
            unix_transport(endpoint).ok_or_else(|| {
                invalid("expected an absolute socket path, unix:///path or http://host:port")
            })?
        };
        Ok(HttpDaemon {
            endpoint: endpoint.to_owned(),
            transport,
            timeout: DEFAULT_TIMEOUT,
            authorization: None,
        })
    }

    /// A client for `endpoint` as the plugin and the `sarena` command make
    /// it: over TCP with the token of `token_file` (or of
    /// [`super::DEFAULT_TOKEN_FILE`] when it exists, see
    /// [`super::token_file_for`]); over a Unix socket no token file is read.
    pub fn for_endpoint(
        endpoint: &str,
        token_file: Option<&Path>,
    ) -> Result<HttpDaemon, DaemonError> {
        let daemon = HttpDaemon::new(endpoint)?;
        match (&daemon.transport, super::token_file_for(token_file)) {
            (Transport::Tcp { .. }, Some(file)) => daemon.with_token_file(&file),
            _ => Ok(daemon),
        }
    }

    /// The same client sending the token of `file` (see
    /// [`super::read_token_file`]) with every request over TCP; over a Unix
    /// socket the file is not read and no token is sent.
    pub fn with_token_file(mut self, file: &Path) -> Result<HttpDaemon, DaemonError> {
        if matches!(self.transport, Transport::Tcp { .. }) {
            self.authorization = Some(super::read_token_file(file)?);
        }
        Ok(self)
    }

    /// The same client with another per-call timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> HttpDaemon {
        self.timeout = timeout;
        self
    }

    /// The endpoint as given to [`HttpDaemon::new`].
    pub fn daemon_endpoint(&self) -> &str {
        &self.endpoint
    }

    async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, DaemonError> {
        let body = self.call(Method::GET, path, None).await?;
        decode(path, &body)
    }

    async fn post<Q: Serialize, T: DeserializeOwned>(
        &self,
        path: &str,
        req: &Q,
    ) -> Result<T, DaemonError> {
        let json = serde_json::to_vec(req).map_err(|source| DaemonError::Decode {
            path: path.to_owned(),
            source,
        })?;
        let body = self.call(Method::POST, path, Some(json)).await?;
        decode(path, &body)
    }

    async fn delete<T: DeserializeOwned>(&self, path: &str) -> Result<T, DaemonError> {
        let body = self.call(Method::DELETE, path, None).await?;
        decode(path, &body)
    }

    /// One call; `Ok` carries a 2xx body, any other status becomes [`DaemonError::Api`].
    ///
    /// A call that fails mid-exchange (typically: a pooled connection the daemon
    /// closed when it restarted, found broken on write) is retried once on a fresh
    /// connection. Every route is idempotent, so a retry is safe even if the first
    /// attempt reached the daemon. A retry that finds the daemon unreachable reports
    /// the first failure rather than [`DaemonError::Unreachable`] (which promises the
    /// call had no effect), unless that failure proves the request never left:
    /// a broken pipe while writing it.
    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> Result<Bytes, DaemonError> {
        let _phase =
            crate::phases::start(|| format!("daemon {method} {}", super::path::route_of(path)));
        let body = body.map(Bytes::from);
        let exchange = async {
            match self.exchange(&method, path, body.clone()).await {
                Err(first @ DaemonError::Transport { .. }) => {
                    tracing::debug!("retrying on a fresh connection after: {first}");
                    match self.exchange(&method, path, body).await {
                        Err(e) if e.is_unreachable() && !never_sent(&first) => Err(first),
                        other => other,
                    }
                }
                other => other,
            }
        };
        let (status, bytes) = tokio::time::timeout(self.timeout, exchange)
            .await
            .map_err(|_| DaemonError::Transport {
                method: method.to_string(),
                path: path.to_owned(),
                source: Box::new(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("no answer within {:?}", self.timeout),
                )),
            })??;
        if status.is_success() {
            Ok(bytes)
        } else {
            Err(api_error(status, &bytes))
        }
    }

    /// One HTTP request and its whole answer.
    async fn exchange(
        &self,
        method: &Method,
        path: &str,
        body: Option<Bytes>,
    ) -> Result<(StatusCode, Bytes), DaemonError> {
        let transport_err =
            |source: Box<dyn std::error::Error + Send + Sync>| DaemonError::Transport {
                method: method.to_string(),
                path: path.to_owned(),
                source,
            };
        let resp = self.send(method, path, body).await?;
        let status = resp.status();
        let bytes = Limited::new(resp.into_body(), MAX_RESPONSE_BYTES)
            .collect()
            .await
            .map_err(transport_err)?
            .to_bytes();
        Ok((status, bytes))
    }

    /// One HTTP request; the answer's body still to be read.
    async fn send(
        &self,
        method: &Method,
        path: &str,
        body: Option<Bytes>,
    ) -> Result<hyper::Response<hyper::body::Incoming>, DaemonError> {
        let transport_err =
            |source: Box<dyn std::error::Error + Send + Sync>| DaemonError::Transport {
                method: method.to_string(),
                path: path.to_owned(),
                source,
            };
        let base = match &self.transport {
            Transport::Unix { base, .. } | Transport::Tcp { base, .. } => base,
        };
        let uri: Uri = format!("{base}{path}")
            .parse()
            .map_err(|e| transport_err(Box::new(e)))?;
        let mut builder = Request::builder().method(method.clone()).uri(uri);
        if body.is_some() {
            builder = builder.header(header::CONTENT_TYPE, "application/json");
        }
        if let Some(authorization) = &self.authorization {
            builder = builder.header(header::AUTHORIZATION, authorization.clone());
        }
        let req = builder
            .body(Full::new(body.unwrap_or_default()))
            .map_err(|e| transport_err(Box::new(e)))?;
        let resp = match &self.transport {
            Transport::Unix { client, .. } => client.request(req).await,
            Transport::Tcp { client, .. } => client.request(req).await,
        }
        .map_err(|e| self.request_error(e, &transport_err))?;
        Ok(resp)
    }

    fn request_error(
        &self,
        err: hyper_util::client::legacy::Error,
        transport_err: &dyn Fn(Box<dyn std::error::Error + Send + Sync>) -> DaemonError,
    ) -> DaemonError {
        if err.is_connect() {
            DaemonError::Unreachable {
                endpoint: self.endpoint.clone(),
                source: Box::new(root_io_error(&err)),
            }
        } else {
            transport_err(Box::new(err))
        }
    }
}

fn build_client<C>(connector: C) -> Client<C, Full<Bytes>>
where
    C: hyper_util::client::legacy::connect::Connect + Clone,
{
    Client::builder(TokioExecutor::new())
        .pool_timer(TokioTimer::new())
        .pool_idle_timeout(Duration::from_secs(30))
        .build(connector)
}

fn unix_transport(path: &str) -> Option<Transport> {
    if !path.starts_with('/') {
        return None;
    }
    let hex: String = path.bytes().map(|b| format!("{b:02x}")).collect();
    Some(Transport::Unix {
        client: build_client(UnixConnector),
        base: format!("unix://{hex}:0"),
    })
}

/// `http://ip:port[/]` or `http://localhost:port[/]` to a socket address (port defaults to 80).
fn parse_http_authority(endpoint: &str) -> Result<SocketAddr, &'static str> {
    let uri: Uri = endpoint.parse().map_err(|_| "not a valid URL")?;
    if !matches!(uri.path(), "" | "/") || uri.query().is_some() {
        return Err("http:// endpoints take no path or query");
    }
    let host = uri.host().ok_or("http:// endpoint has no host")?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let ip = if host.eq_ignore_ascii_case("localhost") {
        IpAddr::V4(Ipv4Addr::LOCALHOST)
    } else {
        host.parse::<IpAddr>()
            .map_err(|_| "host must be an IP address or localhost (no DNS)")?
    };
    Ok(SocketAddr::new(ip, uri.port_u16().unwrap_or(80)))
}

/// The innermost I/O error of a connect failure (e.g. "No such file or directory"),
/// which says more than the client's own wrapper.
fn root_io_error(err: &(dyn std::error::Error + 'static)) -> io::Error {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(err);
    let mut found: Option<&io::Error> = None;
    while let Some(e) = cur {
        if let Some(io_err) = e.downcast_ref::<io::Error>() {
            found = Some(io_err);
        }
        cur = e.source();
    }
    match found {
        Some(e) => io::Error::new(e.kind(), e.to_string()),
        None => io::Error::other(crate::error_chain(err)),
    }
}

/// True when a transport error is a broken pipe: the daemon had closed the
/// connection before the request was written, so it cannot have acted on it.
fn never_sent(err: &DaemonError) -> bool {
    let DaemonError::Transport { source, .. } = err else {
        return false;
    };
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(source.as_ref());
    while let Some(e) = cur {
        if e.downcast_ref::<io::Error>()
            .is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe)
        {
            return true;
        }
        cur = e.source();
    }
    false
}

fn decode<T: DeserializeOwned>(path: &str, body: &[u8]) -> Result<T, DaemonError> {
    serde_json::from_slice(body).map_err(|source| DaemonError::Decode {
        path: path.to_owned(),
        source,
    })
}

/// A non-2xx answer: its JSON error body, or failing that a kind guessed from the status.
fn api_error(status: StatusCode, body: &[u8]) -> DaemonError {
    if let Ok(ApiErrorBody { kind, message }) = serde_json::from_slice::<ApiErrorBody>(body) {
        return DaemonError::Api { kind, message };
    }
    let kind = match status.as_u16() {
        400 => ApiErrorKind::BadRequest,
        401 => ApiErrorKind::Unauthorized,
        404 => ApiErrorKind::NotFound,
        405 => ApiErrorKind::MethodNotAllowed,
        409 => ApiErrorKind::Conflict,
        413 => ApiErrorKind::PayloadTooLarge,
        503 => ApiErrorKind::Unavailable,
        _ => ApiErrorKind::Internal,
    };
    let text = String::from_utf8_lossy(body);
    let text: String = text.chars().take(200).collect();
    DaemonError::Api {
        kind,
        message: format!("HTTP {status}: {text}"),
    }
}

#[async_trait]
impl Daemon for HttpDaemon {
    async fn config(&self) -> Result<DaemonConfig, DaemonError> {
        self.get(&format!("{API_BASE}/daemon/config")).await
    }

    async fn health(&self) -> Result<Health, DaemonError> {
        self.get(&format!("{API_BASE}/daemon/health")).await
    }

    async fn allocate(&self, req: AllocateRequest) -> Result<Allocation, DaemonError> {
        self.post(&format!("{API_BASE}/ipam/allocate"), &req).await
    }

    async fn release(&self, owner: Attachment) -> Result<bool, DaemonError> {
        let r: Released = self.delete(&allocation_path(&owner)).await?;
        Ok(r.released)
    }

    async fn create_endpoint(&self, req: EndpointCreate) -> Result<Endpoint, DaemonError> {
        self.post(&format!("{API_BASE}/endpoint/create"), &req)
            .await
    }

    async fn delete_endpoint(&self, owner: Attachment) -> Result<bool, DaemonError> {
        let r: Deleted = self.delete(&endpoint_path(&owner)).await?;
        Ok(r.deleted)
    }

    async fn delete_endpoint_and_veth(&self, owner: Attachment) -> Result<Deleted, DaemonError> {
        self.delete(&format!("{}?veth=remove", endpoint_path(&owner)))
            .await
    }

    async fn unregister_endpoint(
        &self,
        owner: Attachment,
    ) -> Result<Option<Endpoint>, DaemonError> {
        let keep = self
            .delete::<Unregistered>(&format!("{}?allocation=keep", endpoint_path(&owner)))
            .await;
        match keep {
            Ok(r) => Ok(r.endpoint),
            // Release 0.1.0's daemon knows no `allocation=keep` (`400`, and
            // nothing done): its plain DELETE removes the endpoint with its
            // allocation, which the repeated ADD then allocates again for the
            // same owner. One version of skew, plugin ahead of the daemon.
            Err(DaemonError::Api {
                kind: ApiErrorKind::BadRequest,
                message,
            }) if message.contains("unknown query") => {
                tracing::debug!(%message, "the daemon predates allocation=keep; deleting the endpoint");
                let previous = self.endpoint(owner.clone()).await?;
                if previous.is_some() {
                    self.delete_endpoint(owner).await?;
                }
                Ok(previous)
            }
            Err(e) => Err(e),
        }
    }

    async fn endpoint(&self, owner: Attachment) -> Result<Option<Endpoint>, DaemonError> {
        match self.get(&endpoint_path(&owner)).await {
            Ok(ep) => Ok(Some(ep)),
            Err(DaemonError::Api {
                kind: ApiErrorKind::NotFound,
                ..
            }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn gc(&self, req: GcRequest) -> Result<GcReport, DaemonError> {
        self.post(&format!("{API_BASE}/gc"), &req).await
    }

    async fn endpoint_stats_of(
        &self,
        owner: Attachment,
    ) -> Result<Option<EndpointStats>, DaemonError> {
        match self.get(&endpoint_stats_path(&owner)).await {
            Ok(stats) => Ok(Some(stats)),
            Err(DaemonError::Api {
                kind: ApiErrorKind::NotFound,
                ..
            }) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

#[async_trait]
impl Inspect for HttpDaemon {
    async fn endpoints(&self) -> Result<Vec<Endpoint>, DaemonError> {
        self.get(&format!("{API_BASE}/endpoints")).await
    }

    async fn ipam_state(&self) -> Result<IpamState, DaemonError> {
        self.get(&format!("{API_BASE}/ipam")).await
    }

    async fn status(&self) -> Result<DaemonStatus, DaemonError> {
        self.get(&format!("{API_BASE}/daemon/status")).await
    }

    async fn endpoint_stats(&self) -> Result<Vec<EndpointStats>, DaemonError> {
        self.get(&format!("{API_BASE}/stats/endpoints")).await
    }

    async fn policy_endpoints(&self) -> Result<Vec<super::PolicyEndpoint>, DaemonError> {
        self.get(&format!("{API_BASE}/policy/endpoints")).await
    }

    async fn policy_explain(
        &self,
        query: super::PolicyQuery,
    ) -> Result<super::PolicyExplanation, DaemonError> {
        self.get(&format!("{API_BASE}/policy/explain?{}", query.to_query()))
            .await
    }
}

mod events;

#[cfg(test)]
mod tests;
