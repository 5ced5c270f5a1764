//! The events' calls: the settings, and the stream of `GET /v1/events`
//! read line by line as the daemon sends it.

use std::io;
use std::ops::ControlFlow;

use http_body_util::BodyExt;
use hyper::Method;
use hyper::body::Bytes;

use super::{API_BASE, HttpDaemon, api_error, decode};
use crate::api::error::DaemonError;
use crate::api::events::{EventFilter, EventLine, EventsChange, EventsSettings};

/// The longest line the stream may send (an event is well under 4 KiB).
const MAX_LINE: usize = 64 * 1024;

impl HttpDaemon {
    /// `GET /v1/events/config`.
    pub async fn events_settings(&self) -> Result<EventsSettings, DaemonError> {
        self.get(&format!("{API_BASE}/events/config")).await
    }

    /// `POST /v1/events/config`.
    pub async fn change_events(
        &self,
        change: &EventsChange,
    ) -> Result<EventsSettings, DaemonError> {
        self.post(&format!("{API_BASE}/events/config"), change)
            .await
    }

    /// `GET /v1/events` with `filter`: each line to `on_line` as it comes,
    /// until the daemon ends the stream (it stopped, or the history was
    /// all without `follow`) or `on_line` breaks. Only the answer's head
    /// has the client's timeout; the stream has none.
    pub async fn stream_events(
        &self,
        filter: &EventFilter,
        mut on_line: impl FnMut(EventLine) -> ControlFlow<()>,
    ) -> Result<(), DaemonError> {
        let path = format!("{API_BASE}/events?{}", filter.to_query());
        let transport_err =
            |source: Box<dyn std::error::Error + Send + Sync>| DaemonError::Transport {
                method: "GET".to_owned(),
                path: path.clone(),
                source,
            };
        let resp = tokio::time::timeout(self.timeout, self.send(&Method::GET, &path, None))
            .await
            .map_err(|_| {
                transport_err(Box::new(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("no answer within {:?}", self.timeout),
                )))
            })??;
        let status = resp.status();
        let mut body = resp.into_body();
        if !status.is_success() {
            let bytes = body
                .collect()
                .await
                .map_err(|e| transport_err(Box::new(e)))?;
            return Err(api_error(status, &bytes.to_bytes()));
        }
        let mut pending: Vec<u8> = Vec::new();
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| transport_err(Box::new(e)))?;
            let Ok(data) = frame.into_data() else {
                continue;
            };
            pending.extend_from_slice(&data);
            while let Some(end) = pending.iter().position(|&b| b == b'\n') {
                let line: Bytes = Bytes::from(pending.drain(..=end).collect::<Vec<u8>>());
                let line = &line[..line.len() - 1];
                if line.is_empty() {
                    continue;
                }
                let parsed: EventLine = decode(&path, line)?;
                if on_line(parsed).is_break() {
                    return Ok(());
                }
            }
            if pending.len() > MAX_LINE {
                return Err(transport_err(
                    format!("a line longer than {MAX_LINE} bytes").into(),
                ));
            }
        }
        Ok(())
    }
}
