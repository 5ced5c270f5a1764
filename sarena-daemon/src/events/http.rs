//! The events' routes: `GET /v1/events` (newline-delimited JSON, streamed
//! while `follow=1`), `GET` and `POST /v1/events/config`. Served beside
//! [`crate::routes`], whose answers are whole bodies; these stream.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;

use futures_util::stream;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, Limited, StreamBody};
use hyper::body::{Body, Bytes, Frame};
use hyper::{Method, Request, Response, StatusCode, header};
use sarena_core::api::{
    API_BASE, ApiErrorBody, ApiErrorKind, EventFilter, EventLine, EventRecord, EventsChange,
    MAX_BODY_BYTES,
};
use serde::Serialize;
use tokio::sync::{broadcast, watch};

use super::{Events, EventsError};
use crate::routes::Caller;

/// Clients streaming events at once, at most: each holds a connection of
/// its listener's budget, which the plugin's ADDs and DELs need too.
pub const MAX_STREAMS: usize = 16;

/// The daemon's answer body: whole, or streamed.
pub type AnswerBody = UnsyncBoxBody<Bytes, Infallible>;

/// An events route.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventsRoute {
    /// `GET /v1/events?…`.
    Stream(Option<String>),
    /// `GET /v1/events/config`.
    Settings,
    /// `POST /v1/events/config`.
    Change,
    /// An events path with another method: 405.
    NotAllowed(&'static str),
}

/// The events route `method` and `path` name, if any.
pub fn route(method: &Method, path: &str, query: Option<&str>) -> Option<EventsRoute> {
    let rest = path.strip_prefix(API_BASE)?;
    match rest {
        "/events" if method == Method::GET => Some(EventsRoute::Stream(query.map(str::to_owned))),
        "/events" => Some(EventsRoute::NotAllowed("GET")),
        "/events/config" if method == Method::GET => Some(EventsRoute::Settings),
        "/events/config" if method == Method::POST => Some(EventsRoute::Change),
        "/events/config" => Some(EventsRoute::NotAllowed("GET, POST")),
        _ => None,
    }
}

/// A whole body.
pub fn whole(body: Full<Bytes>) -> AnswerBody {
    body.boxed_unsync()
}

fn error(kind: ApiErrorKind, message: String) -> Response<AnswerBody> {
    let status = StatusCode::from_u16(kind.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let body = serde_json::to_vec(&ApiErrorBody { kind, message })
        .unwrap_or_else(|_| br#"{"kind":"internal","message":"cannot encode error"}"#.to_vec());
    let mut resp = Response::new(whole(Full::new(Bytes::from(body))));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    resp
}

fn json<T: Serialize>(value: &T) -> Response<AnswerBody> {
    match serde_json::to_vec(value) {
        Ok(body) => {
            let mut resp = Response::new(whole(Full::new(Bytes::from(body))));
            resp.headers_mut().insert(
                header::CONTENT_TYPE,
                header::HeaderValue::from_static("application/json"),
            );
            resp
        }
        Err(e) => error(ApiErrorKind::Internal, format!("cannot encode answer: {e}")),
    }
}

fn events_error(err: &EventsError) -> Response<AnswerBody> {
    let kind = match err {
        EventsError::BadRequest { .. } => ApiErrorKind::BadRequest,
        EventsError::NoPod { .. } => ApiErrorKind::NotFound,
        EventsError::Endpoints(_) | EventsError::Dataplane(_) => ApiErrorKind::Internal,
    };
    error(kind, sarena_core::error_chain(err))
}

/// Answers `route` for `caller`; `held` (the connection's busy mark) is
/// kept until the answer ends, streamed or not.
pub async fn answer<B, H>(
    events: Option<&Arc<Events>>,
    route: EventsRoute,
    caller: &Caller,
    req: Request<B>,
    held: H,
) -> Response<AnswerBody>
where
    B: Body<Data = Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    H: Send + 'static,
{
    if let Some(why) = caller.refusal(false, req.headers()) {
        return error(ApiErrorKind::Unauthorized, why.to_owned());
    }
    let Some(events) = events else {
        return error(
            ApiErrorKind::Unavailable,
            "events come from the eBPF programs: this daemon runs the kernel dataplane".to_owned(),
        );
    };
    match route {
        EventsRoute::NotAllowed(allow) => error(
            ApiErrorKind::MethodNotAllowed,
            format!("{} not allowed here; allowed: {allow}", req.method()),
        ),
        EventsRoute::Settings => json(&events.settings()),
        EventsRoute::Change => {
            let body = match Limited::new(req.into_body(), MAX_BODY_BYTES)
                .collect()
                .await
            {
                Ok(b) => b.to_bytes(),
                Err(e) => {
                    return error(
                        ApiErrorKind::BadRequest,
                        format!("cannot read the body: {e}"),
                    );
                }
            };
            let change: EventsChange = match serde_json::from_slice(&body) {
                Ok(c) => c,
                Err(e) => return error(ApiErrorKind::BadRequest, format!("invalid body: {e}")),
            };
            match events.change(change).await {
                Ok(settings) => json(&settings),
                Err(e) => events_error(&e),
            }
        }
        EventsRoute::Stream(query) => match EventFilter::from_query(query.as_deref().unwrap_or(""))
        {
            Ok(filter) if filter.follow && events.hub().subscribers() >= MAX_STREAMS => error(
                ApiErrorKind::Unavailable,
                format!("{MAX_STREAMS} clients stream events already; try again later"),
            ),
            Ok(filter) => stream_events(events, filter, held),
            Err(e) => error(ApiErrorKind::BadRequest, e.to_string()),
        },
    }
}

/// What a streaming answer still has to send.
struct Streaming<H> {
    past: VecDeque<Arc<EventRecord>>,
    live: broadcast::Receiver<Arc<EventRecord>>,
    filter: EventFilter,
    events: Arc<Events>,
    closed: watch::Receiver<bool>,
    _held: H,
}

fn line<T: Serialize>(value: &T) -> Frame<Bytes> {
    let mut bytes = serde_json::to_vec(value).unwrap_or_default();
    bytes.push(b'\n');
    Frame::data(Bytes::from(bytes))
}

fn stream_events<H: Send + 'static>(
    events: &Arc<Events>,
    filter: EventFilter,
    held: H,
) -> Response<AnswerBody> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    let (past, live) = events.hub().subscribe(filter.since, now);
    let state = Streaming {
        past: past.into(),
        live,
        filter,
        events: events.clone(),
        closed: events.closed(),
        _held: held,
    };
    let frames = stream::unfold(state, |mut st| async move {
        while let Some(e) = st.past.pop_front() {
            if st.filter.matches(&e) {
                return Some((Ok(line(&*e)), st));
            }
        }
        if !st.filter.follow {
            return None;
        }
        loop {
            let next = tokio::select! {
                next = st.live.recv() => next,
                () = super::until_closed(&mut st.closed) => return None,
            };
            match next {
                Ok(e) if st.filter.matches(&e) => return Some((Ok(line(&*e)), st)),
                Ok(_) => {}
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    st.events.hub().missed(n);
                    return Some((Ok(line(&EventLine::Lost { lost: n })), st));
                }
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    });
    let body: AnswerBody = BodyExt::boxed_unsync(StreamBody::new(frames));
    let mut resp = Response::new(body);
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/x-ndjson"),
    );
    resp
}
