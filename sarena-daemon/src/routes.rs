//! Routing and handlers: one HTTP request in, one JSON response out, over any
//! [`NodeApi`] backend. Nothing here panics on input: every failure becomes a
//! JSON [`ApiErrorBody`] with the status of its [`ApiErrorKind`].
//!
//! Every answered request is reported to the [`RequestObserver`] installed
//! with [`set_observer`] (the metrics, when `--metrics-listen` is on), by
//! route template, so the observer never sees container ids.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::{Body, Bytes};
use hyper::http::request::Parts;
use hyper::{Method, Request, Response, StatusCode, header};
use sarena_core::api::{
    API_BASE, ApiErrorBody, ApiErrorKind, Attachment, DaemonError, Deleted, MAX_BODY_BYTES,
    NodeApi, Released, Unregistered, decode_segment, validate_attachment,
};
use serde::Serialize;
use serde::de::DeserializeOwned;

pub use crate::api_token::Caller;

/// A routed request.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Route {
    Config,
    Health,
    Allocate,
    Release(Attachment),
    Ipam,
    CreateEndpoint,
    Endpoints,
    GetEndpoint(Attachment),
    /// The owner, and whether the daemon removes the veth pair too (`?veth=remove`).
    DeleteEndpoint(Attachment, bool),
    /// `?allocation=keep`: the endpoint goes, its allocation stays.
    UnregisterEndpoint(Attachment),
    Gc,
    Status,
    EndpointStats,
    EndpointStatsOf(Attachment),
    PolicyEndpoints,
    PolicyExplain(sarena_core::api::PolicyQuery),
}

impl Route {
    /// The route's template (`:name` for a path segment): bounded, free of
    /// container ids, and without braces, which some scrapers mis-parse.
    fn template(&self) -> &'static str {
        match self {
            Route::Config => "/v1/daemon/config",
            Route::Health => "/v1/daemon/health",
            Route::Status => "/v1/daemon/status",
            Route::Allocate => "/v1/ipam/allocate",
            Route::Release(_) => "/v1/ipam/allocations/:container_id/:ifname",
            Route::Ipam => "/v1/ipam",
            Route::CreateEndpoint => "/v1/endpoint/create",
            Route::Endpoints => "/v1/endpoints",
            Route::GetEndpoint(_) | Route::DeleteEndpoint(..) | Route::UnregisterEndpoint(_) => {
                "/v1/endpoints/:container_id/:ifname"
            }
            Route::Gc => "/v1/gc",
            Route::EndpointStats => "/v1/stats/endpoints",
            Route::EndpointStatsOf(_) => "/v1/stats/endpoints/:container_id/:ifname",
            Route::PolicyEndpoints => "/v1/policy/endpoints",
            Route::PolicyExplain(_) => "/v1/policy/explain",
        }
    }
}

/// The template reported for requests that match no route.
pub const UNMATCHED_ROUTE: &str = "unmatched";

/// Sees every answered request: its method, route template (or
/// [`UNMATCHED_ROUTE`]), status and how long the answer took.
pub trait RequestObserver: Send + Sync {
    /// One answered request.
    fn observe(&self, method: &Method, route: &'static str, status: StatusCode, elapsed: Duration);
}

static OBSERVER: OnceLock<Arc<dyn RequestObserver>> = OnceLock::new();

/// Installs the process's request observer (once; later calls are ignored
/// and return `false`).
pub fn set_observer(observer: Arc<dyn RequestObserver>) -> bool {
    OBSERVER.set(observer).is_ok()
}

/// An error answer, before it is serialized.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ApiError {
    kind: ApiErrorKind,
    message: String,
    /// The `Allow` header of a 405.
    allow: Option<&'static str>,
}

impl ApiError {
    fn new(kind: ApiErrorKind, message: impl Into<String>) -> Self {
        ApiError {
            kind,
            message: message.into(),
            allow: None,
        }
    }

    fn bad_request(message: impl Into<String>) -> Self {
        Self::new(ApiErrorKind::BadRequest, message)
    }
}

impl From<DaemonError> for ApiError {
    fn from(err: DaemonError) -> Self {
        let ApiErrorBody { kind, message } = err.to_body();
        ApiError::new(kind, message)
    }
}

/// Serves one request of a trusted caller (the Unix socket's) against
/// `daemon`. Never fails: errors become JSON error answers.
pub async fn handle<B>(daemon: &dyn NodeApi, req: Request<B>) -> Response<Full<Bytes>>
where
    B: Body<Data = Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    handle_as(daemon, &Caller::Trusted, req).await
}

/// [`handle`] for `caller`: a TCP caller without the token gets `401
/// unauthorized` (and nothing is done) on every route but the health check.
pub async fn handle_as<B>(
    daemon: &dyn NodeApi,
    caller: &Caller,
    req: Request<B>,
) -> Response<Full<Bytes>>
where
    B: Body<Data = Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    answer(daemon, OBSERVER.get().map(|o| &**o), caller, req).await
}

/// [`handle`] reporting to `observer` instead of the installed one.
pub async fn handle_observed<B>(
    daemon: &dyn NodeApi,
    observer: Option<&dyn RequestObserver>,
    req: Request<B>,
) -> Response<Full<Bytes>>
where
    B: Body<Data = Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    answer(daemon, observer, &Caller::Trusted, req).await
}

async fn answer<B>(
    daemon: &dyn NodeApi,
    observer: Option<&dyn RequestObserver>,
    caller: &Caller,
    req: Request<B>,
) -> Response<Full<Bytes>>
where
    B: Body<Data = Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let started = Instant::now();
    let (parts, body) = req.into_parts();
    let routed = route(&parts.method, parts.uri.path(), parts.uri.query());
    let template = routed.as_ref().map_or(UNMATCHED_ROUTE, Route::template);
    let open = matches!(routed, Ok(Route::Health));
    let answer = match (caller.refusal(open, &parts.headers), routed) {
        (Some(why), _) => Err(ApiError::new(ApiErrorKind::Unauthorized, why)),
        (None, Ok(route)) => dispatch(daemon, route, &parts, body).await,
        (None, Err(err)) => Err(err),
    };
    let resp = match answer {
        Ok(resp) => resp,
        Err(err) => error_response(&err),
    };
    let status = resp.status();
    let elapsed = started.elapsed();
    if let Some(observer) = observer {
        observer.observe(&parts.method, template, status, elapsed);
    }
    let elapsed_us = elapsed.as_micros();
    if status.is_server_error() {
        tracing::warn!(method = %parts.method, path = %parts.uri.path(), %status, elapsed_us, "request failed");
    } else {
        tracing::debug!(method = %parts.method, path = %parts.uri.path(), %status, elapsed_us, "request");
    }
    resp
}

async fn dispatch<B>(
    daemon: &dyn NodeApi,
    route: Route,
    parts: &Parts,
    body: B,
) -> Result<Response<Full<Bytes>>, ApiError>
where
    B: Body<Data = Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    match route {
        Route::Config => json(StatusCode::OK, &daemon.config().await?),
        Route::Health => json(StatusCode::OK, &daemon.health().await?),
        Route::Allocate => {
            let req: sarena_core::api::AllocateRequest = read_json(parts, body).await?;
            check_owner("owner", &req.owner)?;
            json(StatusCode::OK, &daemon.allocate(req).await?)
        }
        Route::Release(owner) => json(
            StatusCode::OK,
            &Released {
                released: daemon.release(owner).await?,
            },
        ),
        Route::Ipam => json(StatusCode::OK, &daemon.ipam_state().await?),
        Route::CreateEndpoint => {
            let req: sarena_core::api::EndpointCreate = read_json(parts, body).await?;
            check_owner("owner", &req.spec.owner)?;
            json(StatusCode::OK, &daemon.create_endpoint(req).await?)
        }
        Route::Endpoints => json(StatusCode::OK, &daemon.endpoints().await?),
        Route::GetEndpoint(owner) => match daemon.endpoint(owner.clone()).await? {
            Some(ep) => json(StatusCode::OK, &ep),
            None => Err(no_endpoint(&owner)),
        },
        Route::DeleteEndpoint(owner, false) => json(
            StatusCode::OK,
            &Deleted {
                deleted: daemon.delete_endpoint(owner).await?,
                veth_removal: false,
            },
        ),
        Route::DeleteEndpoint(owner, true) => json(
            StatusCode::OK,
            &daemon.delete_endpoint_and_veth(owner).await?,
        ),
        Route::UnregisterEndpoint(owner) => json(
            StatusCode::OK,
            &Unregistered {
                endpoint: daemon.unregister_endpoint(owner).await?,
            },
        ),
        Route::Gc => {
            let req: sarena_core::api::GcRequest = read_json(parts, body).await?;
            for (i, owner) in req.valid.iter().enumerate() {
                check_owner(&format!("valid[{i}]"), owner)?;
            }
            json(StatusCode::OK, &daemon.gc(req).await?)
        }
        Route::Status => json(StatusCode::OK, &daemon.status().await?),
        Route::EndpointStats => json(StatusCode::OK, &daemon.endpoint_stats().await?),
        Route::EndpointStatsOf(owner) => match daemon.endpoint_stats_of(owner.clone()).await? {
            Some(stats) => json(StatusCode::OK, &stats),
            None => Err(no_endpoint(&owner)),
        },
        Route::PolicyEndpoints => json(StatusCode::OK, &daemon.policy_endpoints().await?),
        Route::PolicyExplain(query) => json(StatusCode::OK, &daemon.policy_explain(query).await?),
    }
}

fn no_endpoint(owner: &Attachment) -> ApiError {
    ApiError::new(
        ApiErrorKind::NotFound,
        format!(
            "no endpoint for container {} ifname {}",
            owner.container_id, owner.ifname
        ),
    )
}

/// Maps method and path to a [`Route`]: 404 for unknown paths, 405 for a known
/// path with the wrong method, 400 for invalid `{container_id}`/`{ifname}` segments.
fn route(method: &Method, path: &str, query: Option<&str>) -> Result<Route, ApiError> {
    let not_found = || ApiError::new(ApiErrorKind::NotFound, format!("no route {method} {path}"));
    let not_allowed = |allow: &'static str| ApiError {
        kind: ApiErrorKind::MethodNotAllowed,
        message: format!("{method} not allowed on {path}; allowed: {allow}"),
        allow: Some(allow),
    };
    let rest = path
        .strip_prefix(API_BASE)
        .and_then(|r| r.strip_prefix('/'))
        .ok_or_else(not_found)?;
    let segments: Vec<&str> = rest.split('/').collect();
    let (get, post, delete) = (
        method == Method::GET,
        method == Method::POST,
        method == Method::DELETE,
    );
    match segments.as_slice() {
        ["daemon", "config"] if get => Ok(Route::Config),
        ["daemon", "health"] if get => Ok(Route::Health),
        ["daemon", "status"] if get => Ok(Route::Status),
        ["stats", "endpoints"] if get => Ok(Route::EndpointStats),
        ["stats", "endpoints", cid, ifname] if get => {
            Ok(Route::EndpointStatsOf(owner_from_segments(cid, ifname)?))
        }
        ["ipam"] if get => Ok(Route::Ipam),
        ["policy", "endpoints"] if get => Ok(Route::PolicyEndpoints),
        ["policy", "explain"] if get => {
            sarena_core::api::PolicyQuery::from_query(query.unwrap_or_default())
                .map(Route::PolicyExplain)
                .map_err(|e| ApiError::bad_request(e.to_string()))
        }
        ["endpoints"] if get => Ok(Route::Endpoints),
        ["ipam", "allocate"] if post => Ok(Route::Allocate),
        ["endpoint", "create"] if post => Ok(Route::CreateEndpoint),
        ["gc"] if post => Ok(Route::Gc),
        ["ipam", "allocations", cid, ifname] if delete => {
            Ok(Route::Release(owner_from_segments(cid, ifname)?))
        }
        ["endpoints", cid, ifname] if get => {
            Ok(Route::GetEndpoint(owner_from_segments(cid, ifname)?))
        }
        ["endpoints", cid, ifname] if delete => {
            let remove_veth = match query {
                None | Some("") => false,
                Some("veth=remove") => true,
                Some("allocation=keep") => {
                    return Ok(Route::UnregisterEndpoint(owner_from_segments(cid, ifname)?));
                }
                Some(other) => {
                    return Err(ApiError::new(
                        ApiErrorKind::BadRequest,
                        format!(
                            "unknown query {other:?}; the only ones are veth=remove and allocation=keep"
                        ),
                    ));
                }
            };
            Ok(Route::DeleteEndpoint(
                owner_from_segments(cid, ifname)?,
                remove_veth,
            ))
        }
        ["daemon", "config"]
        | ["daemon", "health"]
        | ["daemon", "status"]
        | ["ipam"]
        | ["endpoints"]
        | ["stats", "endpoints"]
        | ["stats", "endpoints", _, _]
        | ["policy", "endpoints"]
        | ["policy", "explain"] => Err(not_allowed("GET")),
        ["ipam", "allocate"] | ["endpoint", "create"] | ["gc"] => Err(not_allowed("POST")),
        ["ipam", "allocations", _, _] => Err(not_allowed("DELETE")),
        ["endpoints", _, _] => Err(not_allowed("GET, DELETE")),
        _ => Err(not_found()),
    }
}

fn owner_from_segments(cid: &str, ifname: &str) -> Result<Attachment, ApiError> {
    let decode = |s: &str| decode_segment(s).map_err(|e| ApiError::bad_request(e.to_string()));
    let owner = Attachment {
        container_id: decode(cid)?,
        ifname: decode(ifname)?,
    };
    validate_attachment(&owner).map_err(|e| ApiError::bad_request(e.to_string()))?;
    Ok(owner)
}

fn check_owner(field: &str, owner: &Attachment) -> Result<(), ApiError> {
    validate_attachment(owner)
        .map_err(|e| ApiError::bad_request(format!("{field}: {}", sarena_core::error_chain(&e))))
}

/// Reads at most [`MAX_BODY_BYTES`] and decodes them; 413 past the limit, 400 on bad JSON.
async fn read_json<T, B>(parts: &Parts, body: B) -> Result<T, ApiError>
where
    T: DeserializeOwned,
    B: Body<Data = Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let too_large = || {
        ApiError::new(
            ApiErrorKind::PayloadTooLarge,
            format!("request body larger than {MAX_BODY_BYTES} bytes"),
        )
    };
    let declared = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok());
    let declared = declared.and_then(|v| v.parse::<u64>().ok());
    let mut body = std::pin::pin!(Limited::new(body, MAX_BODY_BYTES));
    if declared.is_some_and(|n| n > MAX_BODY_BYTES as u64) {
        if declared.is_some_and(|n| n <= DRAIN_BYTES) {
            drain(body).await;
        }
        return Err(too_large());
    }
    let mut bytes = Vec::new();
    let deadline = tokio::time::Instant::now() + BODY_TIMEOUT;
    let timed_out =
        || ApiError::bad_request(format!("request body not received within {BODY_TIMEOUT:?}"));
    while let Some(frame) = tokio::time::timeout_at(deadline, body.as_mut().frame())
        .await
        .map_err(|_| timed_out())?
    {
        match frame {
            Ok(frame) => {
                if let Ok(data) = frame.into_data() {
                    bytes.extend_from_slice(&data);
                }
            }
            Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => {
                drain(body).await;
                return Err(too_large());
            }
            Err(e) => {
                return Err(ApiError::bad_request(format!(
                    "cannot read request body: {}",
                    sarena_core::error_chain(&*e)
                )));
            }
        }
    }
    serde_json::from_slice(&bytes).map_err(|e| {
        ApiError::bad_request(format!(
            "invalid JSON body: {}",
            sarena_core::error_chain(&e)
        ))
    })
}

/// How long a client may take to send a request body.
const BODY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// An oversize body below this is read and discarded before the 413 goes out, so
/// the client sees the answer instead of a reset connection.
const DRAIN_BYTES: u64 = 1024 * 1024;

/// Reads and discards what is left of a rejected body, bounded in frames and time.
async fn drain<B>(mut body: std::pin::Pin<&mut Limited<B>>)
where
    B: Body<Data = Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let discard = async {
        for _ in 0..256 {
            match body.as_mut().frame().await {
                None => break,
                Some(Ok(_)) => {}
                // Past the limit every data frame is an error; a read error ends it.
                Some(Err(e)) if e.downcast_ref::<LengthLimitError>().is_some() => {}
                Some(Err(_)) => break,
            }
        }
    };
    let _ = tokio::time::timeout(std::time::Duration::from_millis(500), discard).await;
}

fn json<T: Serialize>(status: StatusCode, value: &T) -> Result<Response<Full<Bytes>>, ApiError> {
    let body = serde_json::to_vec(value).map_err(|e| {
        ApiError::new(
            ApiErrorKind::Internal,
            format!("cannot encode answer: {}", sarena_core::error_chain(&e)),
        )
    })?;
    Ok(response(status, body, None))
}

fn error_response(err: &ApiError) -> Response<Full<Bytes>> {
    let status =
        StatusCode::from_u16(err.kind.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let body = ApiErrorBody {
        kind: err.kind,
        message: err.message.clone(),
    };
    let bytes = serde_json::to_vec(&body)
        .unwrap_or_else(|_| br#"{"kind":"internal","message":"cannot encode error"}"#.to_vec());
    let mut resp = response(status, bytes, err.allow);
    if err.kind == ApiErrorKind::Unauthorized {
        let headers = resp.headers_mut();
        let value = header::HeaderValue::from_static;
        headers.insert(header::WWW_AUTHENTICATE, value("Bearer realm=\"sarena\""));
        // Whoever has no token gets nothing more from this connection.
        headers.insert(header::CONNECTION, value("close"));
    }
    resp
}

fn response(
    status: StatusCode,
    body: Vec<u8>,
    allow: Option<&'static str>,
) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(Bytes::from(body)));
    *resp.status_mut() = status;
    let headers = resp.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    if let Some(allow) = allow {
        headers.insert(header::ALLOW, header::HeaderValue::from_static(allow));
    }
    resp
}

#[cfg(test)]
mod operator_tests;
#[cfg(test)]
mod policy_tests;
#[cfg(test)]
mod tests;
