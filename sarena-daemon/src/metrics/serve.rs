//! The metrics listener: `GET /metrics` over HTTP/1.1 on a TCP address,
//! loopback only unless `--allow-remote-metrics` is given.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode, header};
use hyper_util::rt::{TokioIo, TokioTimer};
use prometheus_client::encoding::prometheus_text::CONTENT_TYPE;
use sarena_core::api::NodeApi;
use tokio::net::TcpListener;

use super::Metrics;

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

/// Serves `GET /metrics` from `listener` until `shutdown` resolves. Each
/// scrape reads `daemon` (see [`Metrics::render`]).
pub async fn serve(
    listener: TcpListener,
    metrics: Arc<Metrics>,
    daemon: Arc<dyn NodeApi>,
    shutdown: impl Future<Output = ()>,
) {
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    tracing::warn!("metrics: accept failed: {}", sarena_core::error_chain(&e));
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let (metrics, daemon) = (metrics.clone(), daemon.clone());
        let service = service_fn(move |req: Request<Incoming>| {
            let (metrics, daemon) = (metrics.clone(), daemon.clone());
            async move { Ok::<_, Infallible>(answer(&metrics, &*daemon, &req).await) }
        });
        let conn = http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(Duration::from_secs(10))
            .serve_connection(TokioIo::new(stream), service);
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(
                    "metrics connection ended with error: {}",
                    sarena_core::error_chain(&e)
                );
            }
        });
    }
}

async fn answer<B>(
    metrics: &Metrics,
    daemon: &dyn NodeApi,
    req: &Request<B>,
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
    match metrics.render(daemon).await {
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
