//! Issue 28: what drop and flow events cost the programs, per run, on the
//! embedded path ([`PathKind::SarenaEbpfEmbedded`]) after its rounds. Four
//! settings, switched at run time as `sarena monitor config` switches them
//! ([`SETTINGS`]): events off, drop events at the default limit, drop and
//! flow events (every new connection) at the default limit, and both
//! without a limit (every dropped frame and every connection written). Under
//! each, in interleaved rounds and with BPF run-time statistics on
//! ([`prog_stats`]), three loads: request/response over one connection (the
//! forwarded common path, no drop, one flow), new connections (a flow event
//! each when flow events are on), and a flood of spoofed frames from the
//! client (a drop each). The ring buffer is drained meanwhile, as the
//! daemon drains it.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::time::Duration;

use sarena_core::api::{EventsSettings, FlowMode};
use serde::{Deserialize, Serialize};

use super::embedded::EmbeddedNode;
use super::paths::{Endpoints, PreparedPath};
use super::prog_stats::{self, NodePrograms, ProgramRuns};
use super::results::PathKind;
use super::{DataplaneOptions, crr, netns, rr};
use crate::BenchError;
use crate::node::netns::run_cmd;

/// A setting measured: its label and the events' settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setting {
    /// What the report calls it.
    pub label: &'static str,
    /// Drop events on.
    pub drops: bool,
    /// Flow events for every new connection.
    pub flows: bool,
    /// Events per second per endpoint (0: no limit).
    pub rate: u32,
}

/// The daemon's default limit: 100 events a second per endpoint, bursts of 200.
const DEFAULT_RATE: u32 = 100;
const DEFAULT_BURST: u32 = 200;

/// The settings, in report order.
pub const SETTINGS: [Setting; 4] = [
    Setting {
        label: "events off",
        drops: false,
        flows: false,
        rate: DEFAULT_RATE,
    },
    Setting {
        label: "drop events (100/s per endpoint)",
        drops: true,
        flows: false,
        rate: DEFAULT_RATE,
    },
    Setting {
        label: "drop + flow events, new connections (100/s per endpoint)",
        drops: true,
        flows: true,
        rate: DEFAULT_RATE,
    },
    Setting {
        label: "drop + flow events, new connections, no limit",
        drops: true,
        flows: true,
        rate: 0,
    },
];

impl Setting {
    fn settings(self) -> EventsSettings {
        EventsSettings {
            drops: self.drops,
            flows: if self.flows {
                FlowMode::New
            } else {
                FlowMode::Off
            },
            sample: 0,
            rate_per_second: self.rate,
            burst: DEFAULT_BURST,
            watched: Vec::new(),
        }
    }
}

/// Spoofed frames sent per flood (full run; the quick run sends 2,000).
pub const FLOOD_FRAMES: u64 = 200_000;

/// The source address of the flood: not the client's (anti-spoofing drops
/// every frame, `spoofed_source`), added to its `eth0` for the flood only.
const SPOOFED: Ipv4Addr = Ipv4Addr::new(198, 18, 250, 1);

/// One setting's totals over every round.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct SettingCost {
    /// [`Setting::label`].
    pub label: String,
    /// Request/response: the programs' runs, and round trips.
    pub rr: ProgramRuns,
    /// New connections: the programs' runs, and connections made.
    pub crr: ProgramRuns,
    /// The spoofed flood: the programs' runs (every frame dropped by
    /// `from_container`), and frames sent.
    pub flood: ProgramRuns,
    /// Drop events written meanwhile (all three loads).
    pub drop_events: u64,
    /// Flow events written.
    pub flow_events: u64,
    /// Events the limit held back.
    pub lost_rate_limited: u64,
    /// Events lost to a full ring buffer.
    pub lost_buffer_full: u64,
    /// Events the drain read.
    pub read: u64,
}

/// The measurement: each setting's totals, and the run's shape.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct EventCost {
    /// Interleaved rounds.
    pub rounds: u32,
    /// Seconds of each request/response and connection run.
    pub seconds: u64,
    /// Per setting, in [`SETTINGS`] order.
    pub settings: Vec<SettingCost>,
}

/// Measures [`SETTINGS`] on the embedded path of `prepared`, if measured;
/// `None` when there is none. Leaves the events off.
pub fn measure(
    prepared: &[PreparedPath],
    opts: &DataplaneOptions,
) -> Option<Result<EventCost, BenchError>> {
    let path = prepared
        .iter()
        .find(|p| p.kind == PathKind::SarenaEbpfEmbedded)?;
    let embedded = path.embedded()?;
    let frames = if opts.quick { 2_000 } else { FLOOD_FRAMES };
    let result = measure_on(&embedded.node, &path.endpoints, opts, frames);
    let off = embedded.node.set_events(&SETTINGS[0].settings());
    Some(result.and_then(|cost| off.map(|()| cost)))
}

fn measure_on(
    node: &EmbeddedNode,
    e: &Endpoints,
    opts: &DataplaneOptions,
    frames: u64,
) -> Result<EventCost, BenchError> {
    let programs = NodePrograms::find(node.pin_dir())?;
    let client_ns = node
        .pods()
        .first()
        .map(|p| p.netns.name().to_owned())
        .ok_or_else(|| BenchError::Input {
            what: "event cost: the embedded node has no client pod".into(),
        })?;
    let drain = node.drain_events()?;
    let mut totals: Vec<SettingCost> = SETTINGS
        .iter()
        .map(|s| SettingCost {
            label: s.label.to_owned(),
            ..SettingCost::default()
        })
        .collect();
    let secs = Duration::from_secs(opts.rr_seconds);
    for round in 0..opts.rounds {
        for k in 0..SETTINGS.len() {
            // each round starts with another setting
            let i = (k + round as usize) % SETTINGS.len();
            node.set_events(&SETTINGS[i].settings())?;
            // the previous setting's events drained and its bucket refilled
            std::thread::sleep(Duration::from_millis(200));
            let before = node.event_stats()?;
            let t = &mut totals[i];
            t.rr.add(prog_stats::measure(&programs, || {
                rr::measure(e, secs, opts.pinning).map(|r| r.transactions)
            })?);
            t.crr.add(prog_stats::measure(&programs, || {
                crr::measure(e, secs, opts.pinning).map(|r| r.transactions)
            })?);
            t.flood.add(prog_stats::measure(&programs, || {
                flood(&client_ns, e, frames)
            })?);
            let after = node.event_stats()?;
            t.drop_events += after.drop_events - before.drop_events;
            t.flow_events += after.flow_events - before.flow_events;
            t.lost_rate_limited += after.lost_rate_limited - before.lost_rate_limited;
            t.lost_buffer_full += after.lost_buffer_full - before.lost_buffer_full;
        }
    }
    let read = drain.finish()?;
    // what was read cannot be told apart per setting: the total goes on
    // the first, and the report shows the sum
    if let Some(first) = totals.first_mut() {
        first.read = read;
    }
    Ok(EventCost {
        rounds: opts.rounds,
        seconds: opts.rr_seconds,
        settings: totals,
    })
}

/// Sends `frames` UDP datagrams from the client (netns `client_ns`) to the
/// server with a source that is not the client's; the frames sent.
fn flood(client_ns: &str, e: &Endpoints, frames: u64) -> Result<u64, BenchError> {
    let IpAddr::V4(_) = e.server_ip else {
        return Err(BenchError::Input {
            what: "event cost: the flood needs an IPv4 server".into(),
        });
    };
    let spoofed = format!("{SPOOFED}/32");
    run_cmd(
        "ip",
        &["-n", client_ns, "addr", "add", &spoofed, "dev", "eth0"],
    )?;
    let target = SocketAddr::new(e.server_ip, 9);
    let sent = netns::spawn_in(&e.client_ns, move || {
        let from = SocketAddr::from((SPOOFED, 0));
        let socket = UdpSocket::bind(from).map_err(|source| BenchError::Socket {
            call: "bind",
            addr: from,
            source,
        })?;
        let payload = [0u8; 18];
        let mut sent = 0;
        for _ in 0..frames {
            // a full socket buffer (ENOBUFS) only loses that frame
            if socket.send_to(&payload, target).is_ok() {
                sent += 1;
            }
        }
        Ok(sent)
    })
    .and_then(|h| netns::join(h, "spoofed flood"));
    let removed = run_cmd(
        "ip",
        &["-n", client_ns, "addr", "del", &spoofed, "dev", "eth0"],
    );
    let sent = sent?;
    removed?;
    Ok(sent)
}
