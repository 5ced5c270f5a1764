//! The events' series (eBPF dataplane): every drop and selected flow by
//! direction and reason or path, node-wide (the programs count them, events
//! on or off), the events written and lost, and the streaming clients.
//! Bounded: 2 directions × the drop reasons (16) and flow paths (4). The
//! families are there without the eBPF dataplane too, with no samples.

use std::fmt;

use prometheus_client::encoding::DescriptorEncoder;
use sarena_core::api::{CountBy, EventsStatus};

use super::Labels;
use super::cluster::counters;
use super::snapshot::gauges;

fn by(rows: &[CountBy], code: &'static str) -> Vec<(Labels, u64)> {
    rows.iter()
        .map(|r| {
            (
                vec![("direction", r.direction.clone()), (code, r.code.clone())],
                r.count,
            )
        })
        .collect()
}

/// Encodes `status` (none: families without samples).
pub(super) fn encode(
    status: Option<&EventsStatus>,
    encoder: &mut DescriptorEncoder,
) -> fmt::Result {
    let empty = EventsStatus::default();
    let (s, on) = match status {
        Some(s) => (s, true),
        None => (&empty, false),
    };
    counters(
        encoder,
        "sarena_drops",
        "Frames the eBPF programs dropped on this node, by direction (from the pod's point of view) and reason; counted whether drop events are on or off",
        by(&s.drops, "reason"),
    )?;
    counters(
        encoder,
        "sarena_flow_events",
        "Forwarded frames flow events selected (new connections or samples), by direction and path, before the per-pod limit",
        by(&s.flows, "path"),
    )?;
    let kinds = [("drop", s.drop_events), ("flow", s.flow_events)];
    counters(
        encoder,
        "sarena_monitor_events",
        "Events the eBPF programs wrote to the ring buffer, by kind",
        kinds
            .into_iter()
            .filter(|_| on)
            .map(|(k, v)| (vec![("kind", k.to_owned())], v)),
    )?;
    let causes = [
        ("rate_limited", s.lost_rate_limited),
        ("buffer_full", s.lost_buffer_full),
        ("slow_client", s.lost_slow_client),
    ];
    counters(
        encoder,
        "sarena_monitor_events_lost",
        "Events lost: held back by the per-pod limit, to a full ring buffer, or missed by a client reading too slowly",
        causes
            .into_iter()
            .filter(|_| on)
            .map(|(c, v)| (vec![("cause", c.to_owned())], v)),
    )?;
    gauges(
        encoder,
        "sarena_monitor_subscribers",
        "Clients streaming events now (sarena monitor)",
        on.then(|| (Labels::new(), s.subscribers)),
    )
}
