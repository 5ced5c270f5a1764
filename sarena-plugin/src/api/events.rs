//! Drop and flow events as the daemon's API streams them (`GET
//! /v1/events`, `sarena monitor`), the filter a client asks with, and the
//! run-time settings (`GET`/`POST /v1/events/config`).
//!
//! The programs write a raw [`sarena_common::events::Event`]; the daemon
//! turns it into an [`EventRecord`]: the frame's summary read out of its
//! first bytes ([`PacketSummary::parse`]), the endpoint resolved to its pod,
//! and for a policy drop the decision that denied it.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use sarena_common::DropReason;
use sarena_common::events::{
    DIRECTION_EGRESS, EVENT_FLOW, Event as RawEvent, EventStats as RawEventStats,
};
use strum::IntoEnumIterator;

use super::path::decode_segment;
use super::policy::{PolicyDecision, PolicyVerdict};

pub use super::events_packet::PacketSummary;

/// What happened to the frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// A program dropped it.
    Drop,
    /// A program forwarded it (flow events).
    Flow,
}

impl EventKind {
    /// `drop` or `flow`.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Drop => "drop",
            EventKind::Flow => "flow",
        }
    }
}

/// The frame's direction from the endpoint's (the pod's) point of view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventDirection {
    /// Into the pod.
    Ingress,
    /// Out of the pod.
    Egress,
}

impl EventDirection {
    /// `ingress` or `egress`.
    pub fn as_str(self) -> &'static str {
        match self {
            EventDirection::Ingress => "ingress",
            EventDirection::Egress => "egress",
        }
    }
}

/// The path a forwarded frame took (`sarena_common::events::PATH_*`).
pub const FLOW_PATH_NAMES: [&str; sarena_common::events::FLOW_PATHS] =
    ["local_pod", "peer", "host_stack", "host_stack_flow"];

/// One event, resolved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventRecord {
    /// When it happened: nanoseconds since the Unix epoch.
    pub time_unix_ns: u64,
    /// A drop or a flow.
    pub kind: EventKind,
    /// Into or out of the endpoint.
    pub direction: EventDirection,
    /// A drop's reason (`sarena_common::DropReason` in snake case).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// A flow's path ([`FLOW_PATH_NAMES`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The endpoint: its pod (`namespace/name`, or the container id when
    /// the runtime named no pod); none when no endpoint of this node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<String>,
    /// The endpoint's pod namespace, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The endpoint's host-side interface.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interface: Option<String>,
    /// The endpoint's host-side ifindex (0: none).
    pub ifindex: u32,
    /// The other side's pod (`namespace/name`) when it is one of this
    /// node's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer_pod: Option<String>,
    /// The frame's length in bytes.
    pub packet_len: u32,
    /// What its first bytes say.
    pub packet: PacketSummary,
    /// A policy drop: the deciding pod's decision, as the policy engine
    /// makes it now. Denied: the policies isolating the pod, no rule
    /// allowing the packet. Anything else: the engine allows what the
    /// programs denied, so the maps lack the entry (a full map, or an
    /// update not yet applied).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<PolicyDecision>,
}

impl EventRecord {
    /// The drop reason or the flow path.
    pub fn code(&self) -> &str {
        self.reason
            .as_deref()
            .or(self.path.as_deref())
            .unwrap_or("")
    }
}

impl fmt::Display for EventRecord {
    /// One line: kind, code, pod and direction, then the packet.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.kind {
            EventKind::Drop => "DROP",
            EventKind::Flow => "FLOW",
        };
        let pod = self.pod.as_deref().unwrap_or("-");
        write!(
            f,
            "{kind:<4} {:<22} {pod} {} {}",
            self.code(),
            self.direction.as_str(),
            self.packet
        )?;
        if let Some(peer) = &self.peer_pod {
            write!(f, " peer={peer}")?;
        }
        if let Some(p) = &self.policy {
            if p.allowed() {
                // The engine allows what the programs denied: the entry is
                // not in the maps (a full map, or an update not yet applied).
                let why = p.rule.as_deref().unwrap_or(match p.verdict {
                    PolicyVerdict::NotIsolated => "not isolated",
                    PolicyVerdict::Host => "its node",
                    PolicyVerdict::Allowed | PolicyVerdict::Denied => "a rule",
                });
                write!(
                    f,
                    " policy: {} allows it ({why}) but the dataplane lacks the entry \
                     (a full policy map, see sarena_policy_map_full_total, or an update in flight)",
                    p.pod
                )?;
            } else if p.policies.is_empty() {
                write!(f, " policy: isolated, no rule allows it")?;
            } else {
                write!(
                    f,
                    " policy: {} isolated by {}, no rule allows it",
                    p.pod,
                    p.policies.join(",")
                )?;
            }
        }
        Ok(())
    }
}

/// A line of `GET /v1/events`: an event, or how many events this client
/// missed because it read too slowly (or, first, because the history held
/// no more).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum EventLine {
    /// An event.
    Event(Box<EventRecord>),
    /// Events this stream skipped.
    Lost {
        /// How many.
        lost: u64,
    },
}

/// What a client asks of `GET /v1/events` (all given conditions must hold).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventFilter {
    /// Only drops (`drops=1`).
    pub drops: bool,
    /// Only flows (`flows=1`); with `drops` too, both.
    pub flows: bool,
    /// The endpoint's pod: `namespace/name`, a bare name (any namespace),
    /// or a container id.
    pub pod: Option<String>,
    /// The endpoint's pod namespace.
    pub namespace: Option<String>,
    /// Drop reasons or flow paths (any of them).
    pub reasons: Vec<String>,
    /// Events of the recent history first: those of the last this long.
    pub since: Option<Duration>,
    /// Keep streaming new events (`follow=1`); without it the answer ends
    /// after the history.
    pub follow: bool,
}

/// Why a query string is no [`EventFilter`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("query parameter {parameter}: {problem}")]
pub struct EventFilterError {
    /// The parameter.
    pub parameter: String,
    /// What is wrong with it.
    pub problem: String,
}

impl EventFilter {
    /// Whether `event` passes.
    pub fn matches(&self, event: &EventRecord) -> bool {
        let kind_ok = match (self.drops, self.flows) {
            (true, false) => event.kind == EventKind::Drop,
            (false, true) => event.kind == EventKind::Flow,
            _ => true,
        };
        kind_ok
            && self
                .pod
                .as_deref()
                .is_none_or(|want| pod_matches(want, event))
            && self
                .namespace
                .as_deref()
                .is_none_or(|ns| event.namespace.as_deref() == Some(ns))
            && (self.reasons.is_empty() || self.reasons.iter().any(|r| r == event.code()))
    }

    /// The query string (percent-encoding what needs it).
    pub fn to_query(&self) -> String {
        let mut parts = Vec::new();
        if self.drops {
            parts.push("drops=1".to_owned());
        }
        if self.flows {
            parts.push("flows=1".to_owned());
        }
        if let Some(pod) = &self.pod {
            parts.push(format!("pod={}", super::path::encode_segment(pod)));
        }
        if let Some(ns) = &self.namespace {
            parts.push(format!("namespace={}", super::path::encode_segment(ns)));
        }
        for r in &self.reasons {
            parts.push(format!("reason={}", super::path::encode_segment(r)));
        }
        if let Some(since) = self.since {
            parts.push(format!("since={}", since.as_secs()));
        }
        if self.follow {
            parts.push("follow=1".to_owned());
        }
        parts.join("&")
    }

    /// Reads a query string; every problem names its parameter.
    pub fn from_query(query: &str) -> Result<EventFilter, EventFilterError> {
        let err = |parameter: &str, problem: String| EventFilterError {
            parameter: parameter.to_owned(),
            problem,
        };
        let flag = |key: &str, value: &str| match value {
            "" | "1" | "true" => Ok(true),
            "0" | "false" => Ok(false),
            other => Err(err(key, format!("{other:?} is not 1, true, 0 or false"))),
        };
        let mut filter = EventFilter::default();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (key, raw) = pair.split_once('=').unwrap_or((pair, ""));
            let value = decode_segment(raw).map_err(|e| err(key, e.to_string()))?;
            match key {
                "drops" => filter.drops = flag(key, &value)?,
                "flows" => filter.flows = flag(key, &value)?,
                "follow" => filter.follow = flag(key, &value)?,
                "pod" if !value.is_empty() => filter.pod = Some(value),
                "namespace" if !value.is_empty() => filter.namespace = Some(value),
                "reason" if !value.is_empty() => filter.reasons.push(value),
                "since" => {
                    let secs: u64 = value
                        .parse()
                        .map_err(|_| err(key, format!("{value:?} is not a number of seconds")))?;
                    filter.since = Some(Duration::from_secs(secs));
                }
                "pod" | "namespace" | "reason" => {
                    return Err(err(key, "is empty".to_owned()));
                }
                other => return Err(err(other, "unknown parameter".to_owned())),
            }
        }
        Ok(filter)
    }
}

/// Whether the pod filter `want` names the event's endpoint.
fn pod_matches(want: &str, event: &EventRecord) -> bool {
    let Some(pod) = event.pod.as_deref() else {
        return false;
    };
    if pod == want {
        return true;
    }
    // a bare name matches that name in any namespace
    !want.contains('/') && pod.rsplit_once('/').is_some_and(|(_, name)| name == want)
}

/// Flow events' mode, node-wide or for one pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FlowMode {
    /// None.
    Off,
    /// Each new connection (a TCP SYN, an echo request).
    New,
    /// One forwarded frame in [`EventsSettings::sample`].
    Sample,
}

/// The run-time settings of events: what `GET /v1/events/config` answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventsSettings {
    /// Drop events on.
    pub drops: bool,
    /// The node-wide flow mode.
    pub flows: FlowMode,
    /// [`FlowMode::Sample`]: one frame in this many.
    pub sample: u32,
    /// The per-endpoint limit: events per second, on average.
    pub rate_per_second: u32,
    /// The per-endpoint limit: events in a burst.
    pub burst: u32,
    /// Pods whose flows are watched whatever the node-wide mode.
    #[serde(default)]
    pub watched: Vec<WatchedPod>,
}

/// A pod with a flow mode of its own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WatchedPod {
    /// `namespace/name` (or the container id).
    pub pod: String,
    /// Its mode.
    pub flows: FlowMode,
}

/// `POST /v1/events/config`: what to change (absent: unchanged).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventsChange {
    /// Drop events on or off (node-wide).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drops: Option<bool>,
    /// The flow mode: node-wide, or of [`EventsChange::pod`] alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flows: Option<FlowMode>,
    /// [`FlowMode::Sample`]'s one-in-N (node-wide; 1 to 1,000,000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample: Option<u32>,
    /// The pod (`namespace/name` or container id) `flows` applies to; its
    /// [`FlowMode::Off`] removes its own mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<String>,
}

/// What the event machinery saw on this node (`GET /v1/daemon/status`'s
/// `dataplane.events`; the metrics read it).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventsStatus {
    /// Every drop by direction and reason, events on or off.
    pub drops: Vec<CountBy>,
    /// Frames flow events selected, by direction and path.
    pub flows: Vec<CountBy>,
    /// Drop events the programs wrote.
    pub drop_events: u64,
    /// Flow events the programs wrote.
    pub flow_events: u64,
    /// Events the per-endpoint limit held back.
    pub lost_rate_limited: u64,
    /// Events lost to a full ring buffer.
    pub lost_buffer_full: u64,
    /// Events clients missed because they read too slowly.
    pub lost_slow_client: u64,
    /// Clients streaming events now.
    pub subscribers: u64,
}

/// One count of [`EventsStatus`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CountBy {
    /// `ingress` or `egress`.
    pub direction: String,
    /// The drop reason or flow path.
    pub code: String,
    /// How many.
    pub count: u64,
}

/// The API's record of the raw event `raw`, which happened at
/// `time_unix_ns`: kind, direction, reason or path by name, the packet's
/// summary; the parties are named by the caller (the registry's).
pub fn event_record(raw: &RawEvent, time_unix_ns: u64) -> EventRecord {
    let kind = if raw.kind == EVENT_FLOW {
        EventKind::Flow
    } else {
        EventKind::Drop
    };
    let code = usize::from(raw.code);
    let captured = usize::from(raw.captured).min(raw.head.len());
    EventRecord {
        time_unix_ns,
        kind,
        direction: if raw.direction == DIRECTION_EGRESS {
            EventDirection::Egress
        } else {
            EventDirection::Ingress
        },
        reason: (kind == EventKind::Drop).then(|| {
            DropReason::iter()
                .nth(code)
                .map_or_else(|| format!("reason_{code}"), |r| <&str>::from(r).to_owned())
        }),
        path: (kind == EventKind::Flow).then(|| {
            FLOW_PATH_NAMES
                .get(code)
                .map_or_else(|| format!("path_{code}"), |p| (*p).to_owned())
        }),
        pod: None,
        namespace: None,
        interface: None,
        ifindex: raw.ifindex,
        peer_pod: None,
        packet_len: raw.packet_len,
        packet: PacketSummary::parse(&raw.head[..captured]),
        policy: None,
    }
}

/// The API's view of the programs' counts: every drop reason and flow
/// path in both directions (zeroes included, so series exist from the
/// start).
pub fn events_status(stats: &RawEventStats) -> EventsStatus {
    let direction = |i: usize| if i == 1 { "egress" } else { "ingress" };
    let mut status = EventsStatus {
        drop_events: stats.drop_events,
        flow_events: stats.flow_events,
        lost_rate_limited: stats.lost_rate_limited,
        lost_buffer_full: stats.lost_buffer_full,
        ..EventsStatus::default()
    };
    for (i, row) in stats.drops.iter().enumerate() {
        for reason in DropReason::iter() {
            status.drops.push(CountBy {
                direction: direction(i).to_owned(),
                code: <&str>::from(reason).to_owned(),
                count: row.get(reason as usize).copied().unwrap_or(0),
            });
        }
    }
    for (i, row) in stats.flows.iter().enumerate() {
        for (p, name) in FLOW_PATH_NAMES.iter().enumerate() {
            status.flows.push(CountBy {
                direction: direction(i).to_owned(),
                code: (*name).to_owned(),
                count: row.get(p).copied().unwrap_or(0),
            });
        }
    }
    status
}

#[cfg(test)]
#[path = "events_tests.rs"]
mod tests;
