//! The metrics listener: `GET /metrics` over HTTP/1.1 on a TCP address,
//! loopback only unless `--allow-remote-metrics` is given; its connections
//! bounded like the API's ([`crate::conn`], [`DEFAULT_LIMITS`]).

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode, header};
use hyper_util::rt::TokioIo;
use prometheus_client::encoding::prometheus_text::CONTENT_TYPE;
use sarena_core::api::NodeApi;
use tokio::net::TcpListener;

use super::{Metrics, PodNames};
use crate::conn::{self, Budget, ConnLimits};

/// Errors setting up the metrics listener.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    /// `--metrics-listen` names a non-loopback address without `--allow-remote-metrics`.
    #[error(
        "refusing to serve metrics on non-loopback address {addr}: pass --allow-remote-metrics to do it anyway"
    )]
    RemoteRefused {
        /// The address.
        addr: SocketAddr,
    },
    /// Binding the listener failed.
    #[error("bind metrics listener {addr}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Cause.
        #[source]
        source: io::Error,
    },
}

/// Checks that `addr` is loopback unless remote scrapes are allowed.
pub fn check_addr(addr: SocketAddr, allow_remote: bool) -> Result<(), MetricsError> {
    if allow_remote || addr.ip().to_canonical().is_loopback() {
        Ok(())
    } else {
        Err(MetricsError::RemoteRefused { addr })
    }
}

/// Binds the metrics listener after [`check_addr`].
pub async fn bind(addr: SocketAddr, allow_remote: bool) -> Result<TcpListener, MetricsError> {
    check_addr(addr, allow_remote)?;
    TcpListener::bind(addr)
        .await
        .map_err(|source| MetricsError::Bind { addr, source })
}

/// The metrics listener's limits: 16 connections (the oldest idle one
/// gives way to a new client), 10 s for a request's headers, 5 s for a
/// blocked write (see [`crate::conn`]).
pub const DEFAULT_LIMITS: ConnLimits = ConnLimits {
    max_connections: 16,
    header_timeout: Duration::from_secs(10),
    write_timeout: Duration::from_secs(5),
};

/// How the metrics are served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServeOptions {
    /// The listener's limits.
    pub limits: ConnLimits,
    /// Show pod names and namespaces to non-loopback scrapers too
    /// (`--allow-remote-pod-names`).
    pub remote_pod_names: bool,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            limits: DEFAULT_LIMITS,
            remote_pod_names: false,
        }
    }
}

/// Serves `GET /metrics` from `listener` until `shutdown` resolves. Each
/// scrape reads `daemon` (see [`Metrics::render_for`]); pod names are shown
/// to loopback scrapers, and to others only with
/// [`ServeOptions::remote_pod_names`].
pub async fn serve(
    listener: TcpListener,
    metrics: Arc<Metrics>,
    daemon: Arc<dyn NodeApi>,
    options: ServeOptions,
    shutdown: impl Future<Output = ()>,
) {
    let budget = Budget::new(&options.limits);
    let accepting = conn::accept_loop(&listener, &budget, |stream, peer, admitted| {
        let local = peer.is_none_or(|p| p.ip().to_canonical().is_loopback());
        let names = if local || options.remote_pod_names {
            PodNames::Shown
        } else {
            PodNames::Hidden
        };
        let (metrics, daemon, slot) = (metrics.clone(), daemon.clone(), admitted.slot());
        let service = service_fn(move |req: Request<Incoming>| {
            let (metrics, daemon, busy) = (metrics.clone(), daemon.clone(), slot.busy());
            async move {
                let answer = answer(&metrics, &*daemon, &req, names).await;
                drop(busy);
                Ok::<_, Infallible>(answer)
            }
        });
        let conn = conn::http1(&options.limits).serve_connection(TokioIo::new(stream), service);
        tokio::spawn(admitted.run(conn));
    });
    tokio::select! {
        () = shutdown => {}
        () = accepting => {}
    }
}

async fn answer<B>(
    metrics: &Metrics,
    daemon: &dyn NodeApi,
    req: &Request<B>,
    names: PodNames,
) -> Response<Full<Bytes>> {
    if req.uri().path() != "/metrics" {
        return text(
            StatusCode::NOT_FOUND,
            "text/plain",
            "only /metrics is served here\n".into(),
        );
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return text(
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain",
            "GET /metrics\n".into(),
        );
    }
    match metrics.render_for(daemon, names).await {
        Ok(body) => text(StatusCode::OK, CONTENT_TYPE, body),
        Err(_) => text(
            StatusCode::INTERNAL_SERVER_ERROR,
            "text/plain",
            "cannot encode the metrics\n".into(),
        ),
    }
}

fn text(status: StatusCode, content_type: &'static str, body: String) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(Bytes::from(body)));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(content_type),
    );
    resp
}
