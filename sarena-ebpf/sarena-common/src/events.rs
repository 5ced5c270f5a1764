//! Drop and flow events (issue 28): what the programs tell user space about
//! single packets, through a ring buffer the daemon reads.
//!
//! - [`EVENTS_MAP`]: a BPF ring buffer of [`Event`]s. A drop event is
//!   written for a frame a program drops, a flow event for a frame it
//!   forwards when flow events select it ([`EventsConfig::flow_mode`]).
//! - [`EVENTS_CONFIG_MAP`]: an array of one [`EventsConfig`], what user space
//!   switches at run time. All zeroes (a map just created) is "no events";
//!   the programs then pay one array lookup per drop and one per forwarded
//!   frame.
//! - [`EVENT_LIMITS_MAP`]: an LRU hash, host ifindex → [`EventLimiter`]: the
//!   per-endpoint rate limit of events (a generic cell rate algorithm, see
//!   [`EventsConfig::interval_ns`]), so one pod's flood cannot fill the ring
//!   buffer before another pod's events get in. Entries are made by the
//!   programs on an endpoint's first event; the LRU evicts the idle ones.
//! - [`EVENT_STATS_MAP`]: a per-CPU array of one [`EventStats`]: every drop
//!   by direction and reason (events on or off), flow events by direction
//!   and path, and the events lost to the limit or to a full buffer.
//! - [`FLOW_WATCH_MAP`]: a hash, host ifindex → flow mode: endpoints whose
//!   flows are watched whatever the node-wide mode (looked up only while
//!   [`EVENTS_F_FLOW_WATCH`] is set).
//!
//! An event carries the first [`EVENT_HEAD_BYTES`] of the frame (from the
//! Ethernet header on): user space reads addresses, protocol, ports and
//! ICMP type out of them, so the programs copy bytes and parse nothing more
//! for an event.

/// Name of the ring buffer of [`Event`]s (pinned).
pub const EVENTS_MAP: &str = "SARENA_EVENTS";
/// Name of the configuration array: key 0 → [`EventsConfig`] (pinned).
pub const EVENTS_CONFIG_MAP: &str = "SARENA_EVENTS_CONFIG";
/// Name of the per-endpoint event limiters: host ifindex → [`EventLimiter`]
/// (LRU hash, pinned).
pub const EVENT_LIMITS_MAP: &str = "SARENA_EVENT_LIMITS";
/// Name of the node-wide event statistics: key 0 → [`EventStats`] (per-CPU
/// array, pinned).
pub const EVENT_STATS_MAP: &str = "SARENA_EVENT_STATS";
/// Name of the watched endpoints: host ifindex → `u32` flow mode
/// ([`FLOW_MODE_NEW`], [`FLOW_MODE_SAMPLE`]; hash, pinned, not preallocated).
pub const FLOW_WATCH_MAP: &str = "SARENA_FLOW_WATCH";

/// Size of [`EVENTS_MAP`] in bytes (a power of two, a multiple of the page
/// size): about 6,000 events waiting for the daemon.
pub const EVENTS_RING_BYTES: u32 = 1 << 20;
/// Bytes waiting in [`EVENTS_MAP`] from which an event wakes its reader
/// (an eighth of it). Below, the programs write without a wakeup and the
/// reader finds the events on its next poll ([`EVENTS_POLL_MS`]): a wakeup
/// is the costly part of an event (about 14 µs of the writing program's
/// time when the reader waits, measured in a 2-vCPU VM, against 0.1 µs for
/// the rest), and a waiting reader would take one per event.
pub const EVENTS_WAKEUP_BYTES: u64 = (EVENTS_RING_BYTES / 8) as u64;
/// How often the reader looks for events written without a wakeup while
/// events come, in milliseconds: the most such an event waits for it. After
/// 0.3 s without one the reader backs off to 16 times this (an idle
/// daemon wakes 3 times a second, not 50); the next event brings it back.
pub const EVENTS_POLL_MS: u64 = 20;
/// Bytes of the frame an event carries at most: Ethernet, the largest IPv4
/// header and the first bytes of its L4 header, or the IPv6 header and a
/// few extension headers.
pub const EVENT_HEAD_BYTES: usize = 128;

/// [`EventsConfig::flags`]: drop events on.
pub const EVENTS_F_DROPS: u32 = 1;
/// [`EventsConfig::flags`]: some endpoints have a [`FLOW_WATCH_MAP`] entry.
pub const EVENTS_F_FLOW_WATCH: u32 = 1 << 1;

/// Flow mode: no flow events.
pub const FLOW_MODE_OFF: u32 = 0;
/// Flow mode: an event for each new connection, i.e. a TCP SYN (without
/// ACK) or an ICMP or ICMPv6 echo request. UDP has no such packet: use
/// [`FLOW_MODE_SAMPLE`] for it.
pub const FLOW_MODE_NEW: u32 = 1;
/// Flow mode: an event for one forwarded frame in
/// [`EventsConfig::flow_sample`], chosen at random.
pub const FLOW_MODE_SAMPLE: u32 = 2;

/// [`Event::kind`]: a frame a program dropped.
pub const EVENT_DROP: u8 = 1;
/// [`Event::kind`]: a frame a program forwarded.
pub const EVENT_FLOW: u8 = 2;

/// [`Event::direction`]: into the endpoint (the pod's ingress) or out of it
/// (its egress), as NetworkPolicy's entries name them.
pub use crate::policy::{DIRECTION_EGRESS, DIRECTION_INGRESS};

/// Flow path: straight into another pod of this node (redirect).
pub const PATH_LOCAL_POD: u8 = 0;
/// Flow path: straight to or from another node's pod (eBPF host routing).
pub const PATH_PEER: u8 = 1;
/// Flow path: through the host stack (Services, the node, the world,
/// another node without host routing).
pub const PATH_HOST_STACK: u8 = 2;
/// Flow path: to another pod of this node or a peer's pod through the host
/// stack, because the host stack handled the flow (a Service's flow).
pub const PATH_HOST_STACK_FLOW: u8 = 3;
/// Number of flow paths in use.
pub const FLOW_PATHS: usize = 4;
/// Slots per direction in [`EventStats::flows`].
pub const FLOW_PATH_SLOTS: usize = 8;
const _: () = assert!(FLOW_PATHS <= FLOW_PATH_SLOTS);

/// What user space switches at run time (value of [`EVENTS_CONFIG_MAP`]).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EventsConfig {
    /// `EVENTS_F_*` bits.
    pub flags: u32,
    /// The node-wide flow mode (`FLOW_MODE_*`).
    pub flow_mode: u32,
    /// [`FLOW_MODE_SAMPLE`]: one frame in this many (0 and 1: every frame).
    pub flow_sample: u32,
    /// Zero.
    pub _pad: u32,
    /// The per-endpoint limit: at most one event per this many nanoseconds
    /// on average, in bursts of up to [`EventsConfig::burst_ns`] worth (0:
    /// no limit).
    pub interval_ns: u64,
    /// How far ahead of now an endpoint's limiter may run: the burst is
    /// `burst_ns / interval_ns` events.
    pub burst_ns: u64,
}

/// An endpoint's event limiter (value of [`EVENT_LIMITS_MAP`]).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EventLimiter {
    /// When the endpoint's next event is due, in `bpf_ktime_get_ns` time:
    /// an event is let through while this is at most `burst_ns` ahead of
    /// now, and moves it `interval_ns` further.
    pub next_ns: u64,
    /// Events of this endpoint the limit held back.
    pub lost: u64,
}

/// What the event machinery saw on this node (per CPU; user space sums).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventStats {
    /// Every frame dropped by direction (`DIRECTION_*`) and
    /// [`crate::DropReason`], events on or off.
    pub drops: [[u64; crate::DROP_SLOTS]; 2],
    /// Frames flow events selected, by direction and path (`PATH_*`),
    /// before the limit.
    pub flows: [[u64; FLOW_PATH_SLOTS]; 2],
    /// Drop events written to the ring buffer.
    pub drop_events: u64,
    /// Flow events written to the ring buffer.
    pub flow_events: u64,
    /// Events the per-endpoint limit held back.
    pub lost_rate_limited: u64,
    /// Events lost because the ring buffer was full (the daemon too slow or
    /// not reading).
    pub lost_buffer_full: u64,
}

impl Default for EventStats {
    fn default() -> Self {
        EventStats {
            drops: [[0; crate::DROP_SLOTS]; 2],
            flows: [[0; FLOW_PATH_SLOTS]; 2],
            drop_events: 0,
            flow_events: 0,
            lost_rate_limited: 0,
            lost_buffer_full: 0,
        }
    }
}

impl EventStats {
    /// Adds `other` field by field (summing per-CPU values).
    pub fn add(&mut self, other: &EventStats) {
        for (d, o) in self.drops.iter_mut().zip(other.drops.iter()) {
            for (d, o) in d.iter_mut().zip(o.iter()) {
                *d += *o;
            }
        }
        for (d, o) in self.flows.iter_mut().zip(other.flows.iter()) {
            for (d, o) in d.iter_mut().zip(o.iter()) {
                *d += *o;
            }
        }
        self.drop_events += other.drop_events;
        self.flow_events += other.flow_events;
        self.lost_rate_limited += other.lost_rate_limited;
        self.lost_buffer_full += other.lost_buffer_full;
    }
}

/// One event in [`EVENTS_MAP`].
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    /// `bpf_ktime_get_ns()` when it happened (CLOCK_MONOTONIC).
    pub time_ns: u64,
    /// The endpoint's host veth ifindex (0: no endpoint of this node).
    pub ifindex: u32,
    /// The frame's length (all of it, not just [`Event::head`]).
    pub packet_len: u32,
    /// [`EVENT_DROP`] or [`EVENT_FLOW`].
    pub kind: u8,
    /// `DIRECTION_*`, from the endpoint's point of view.
    pub direction: u8,
    /// A drop's [`crate::DropReason`], a flow's `PATH_*`.
    pub code: u8,
    /// Zero.
    pub _pad: u8,
    /// Bytes of [`Event::head`] filled.
    pub captured: u16,
    /// Zero.
    pub _pad2: u16,
    /// The frame's first bytes, from its Ethernet header.
    pub head: [u8; EVENT_HEAD_BYTES],
}

// The layout user space parses: 152 bytes, `head` at 24.
const _: () = assert!(core::mem::size_of::<Event>() == 24 + EVENT_HEAD_BYTES);
const _: () = assert!(core::mem::size_of::<EventsConfig>() == 32);
const _: () = assert!(core::mem::size_of::<EventStats>() == 8 * (2 * 16 + 2 * 8 + 4));

#[cfg(feature = "user")]
mod pod {
    // SAFETY: #[repr(C)], integers and arrays of them only, padding
    // explicit: every bit pattern is a valid value.
    unsafe impl aya::Pod for super::EventsConfig {}
    // SAFETY: as above.
    unsafe impl aya::Pod for super::EventLimiter {}
    // SAFETY: as above.
    unsafe impl aya::Pod for super::EventStats {}
    // SAFETY: as above.
    unsafe impl aya::Pod for super::Event {}
}
