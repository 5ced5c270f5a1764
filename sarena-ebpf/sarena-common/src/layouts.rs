//! The layout of every map any release of Sarena pinned, and the rule that
//! keeps upgrades and downgrades safe: **a pin's name names its layout**.
//!
//! A map whose layout changes (type, key or value size, capacity, flags, or
//! the meaning of its bytes) is pinned under a new name (`<NAME>_V<n>`), and
//! the old name keeps its old layout forever. So a release always finds, or
//! can create, maps of the layouts it knows under the names it knows, and
//! never reuses a same-named map of another layout. That matters because
//! aya reuses a pin by name without comparing layouts (its typed maps check
//! the object's definition, not the kernel's): an older daemon on a
//! same-named map with larger values would have the kernel copy those
//! values into its smaller buffers.
//!
//! A *generation* is the set of layouts one release pins: 1 is release 0.1.0
//! (commit 86d6440), 2 the development tree that introduced this table (never
//! released), 3 the one that split the host-stack flows map per endpoint. A daemon
//! writes a [`PinsMark`] (pinned as [`MARK_MAP`]) once its pins are all of its
//! generation, saying which older generations may still open them; the
//! loader in sarena-core reads it before it touches anything.

use core::fmt;

/// `BPF_MAP_TYPE_HASH`.
pub const MAP_TYPE_HASH: u32 = 1;
/// `BPF_MAP_TYPE_ARRAY`.
pub const MAP_TYPE_ARRAY: u32 = 2;
/// `BPF_MAP_TYPE_PERCPU_HASH`.
pub const MAP_TYPE_PERCPU_HASH: u32 = 5;
/// `BPF_MAP_TYPE_PERCPU_ARRAY`.
pub const MAP_TYPE_PERCPU_ARRAY: u32 = 6;
/// `BPF_MAP_TYPE_LRU_HASH`.
pub const MAP_TYPE_LRU_HASH: u32 = 9;
/// `BPF_MAP_TYPE_LPM_TRIE`.
pub const MAP_TYPE_LPM_TRIE: u32 = 11;
/// `BPF_MAP_TYPE_HASH_OF_MAPS`.
pub const MAP_TYPE_HASH_OF_MAPS: u32 = 13;
/// `BPF_MAP_TYPE_RINGBUF`.
pub const MAP_TYPE_RINGBUF: u32 = 27;
/// `BPF_F_NO_PREALLOC`: a hash map's entries are allocated on insert.
pub const NO_PREALLOC: u32 = 1;

/// The layout generation of this release's pins.
pub const GENERATION: u32 = 3;
/// The oldest generation whose daemon can run on pins this release leaves:
/// generation 1 (0.1.0) finds its endpoint map as it left it and recreates
/// its counters map, which this release migrated from and unpinned;
/// generation 2 recreates its node-wide flows map likewise.
pub const OLDEST_READER: u32 = 1;

/// Generation 2's host-stack flows map: one node-wide LRU hash
/// [`crate::FlowKey`] → [`crate::FlowState`] of [`HOST_FLOWS_G2_ENTRIES`]
/// entries, which one pod could fill and so evict every other pod's
/// entries. Generation 3 splits it per endpoint ([`crate::HOST_FLOWS_MAP`]);
/// its entries are not carried over (generation 2 was never released).
pub const HOST_FLOWS_MAP_G2: &str = "SARENA_HOST_FLOWS";
/// Capacity of [`HOST_FLOWS_MAP_G2`].
pub const HOST_FLOWS_G2_ENTRIES: u32 = 65536;

/// The layout of each endpoint's own flows table, an inner map of
/// [`crate::HOST_FLOWS_MAP`]: what user space creates at attach (and what
/// the kernel insists every inner map matches).
pub const HOST_FLOWS_TABLE: MapLayout = layout(
    MAP_TYPE_LRU_HASH,
    core::mem::size_of::<crate::FlowKey>(),
    core::mem::size_of::<crate::FlowState>(),
    crate::MAX_HOST_FLOWS_PER_ENDPOINT,
    0,
);

// A release can always open its own pins.
const _: () = assert!(OLDEST_READER <= GENERATION);

/// Name of the pinned mark: an array of one [`PinsMark`].
pub const MARK_MAP: &str = "SARENA_LAYOUT";

/// Which generation's daemon last took the pins over, and which generations
/// may open them after it. Value of [`MARK_MAP`] (key 0); its own layout
/// never changes.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PinsMark {
    /// The generation of the daemon that wrote it.
    pub generation: u32,
    /// The oldest generation that may open these pins.
    pub oldest_reader: u32,
}

impl PinsMark {
    /// The mark this release writes.
    pub const CURRENT: PinsMark = PinsMark {
        generation: GENERATION,
        oldest_reader: OLDEST_READER,
    };
}

/// What the kernel reports of a map (`bpf_map_info`), and what a layout is
/// compared by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MapLayout {
    /// `BPF_MAP_TYPE_*`.
    pub map_type: u32,
    /// Key size in bytes.
    pub key_size: u32,
    /// Value size in bytes (per CPU for per-CPU maps).
    pub value_size: u32,
    /// Capacity.
    pub max_entries: u32,
    /// `BPF_F_*` flags the map was created with.
    pub flags: u32,
}

impl fmt::Display for MapLayout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.map_type {
            MAP_TYPE_HASH => f.write_str("hash")?,
            MAP_TYPE_ARRAY => f.write_str("array")?,
            MAP_TYPE_PERCPU_HASH => f.write_str("per-CPU hash")?,
            MAP_TYPE_PERCPU_ARRAY => f.write_str("per-CPU array")?,
            MAP_TYPE_LRU_HASH => f.write_str("LRU hash")?,
            MAP_TYPE_HASH_OF_MAPS => f.write_str("hash of maps")?,
            MAP_TYPE_LPM_TRIE => f.write_str("LPM trie")?,
            MAP_TYPE_RINGBUF => f.write_str("ring buffer")?,
            other => write!(f, "map type {other}")?,
        }
        write!(
            f,
            ", {}-byte keys, {}-byte values, {} entries, flags {:#x}",
            self.key_size, self.value_size, self.max_entries, self.flags
        )
    }
}

/// One name → layout of [`PINNED`], and the generations that pin it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PinnedLayout {
    /// The pin's (and the object's map's) name.
    pub name: &'static str,
    /// Its layout, for good.
    pub layout: MapLayout,
    /// The first generation that pins it.
    pub since: u32,
    /// The last generation that pins it; `None` while releases still do.
    pub until: Option<u32>,
}

impl PinnedLayout {
    /// Whether generation `generation` pins it.
    pub const fn pinned_by(&self, generation: u32) -> bool {
        self.since <= generation
            && match self.until {
                Some(until) => generation <= until,
                None => true,
            }
    }
}

const fn layout(map_type: u32, key: usize, value: usize, entries: u32, flags: u32) -> MapLayout {
    MapLayout {
        map_type,
        key_size: key as u32,
        value_size: value as u32,
        max_entries: entries,
        flags,
    }
}

const fn pinned(
    name: &'static str,
    layout: MapLayout,
    since: u32,
    until: Option<u32>,
) -> PinnedLayout {
    PinnedLayout {
        name,
        layout,
        since,
        until,
    }
}

/// Every name → layout any release pinned. Entries are only ever added, or
/// closed (`until`): a name never gets another layout. sarena-core's tests
/// check that the programs' object matches the entries of [`GENERATION`].
///
/// `SARENA_ENDPOINTS` kept its layout from generation 1 on; generation 2
/// gave its `flags` a bit (`ENDPOINT_F_INGRESS_PACED`) that generation 1's
/// programs ignore (they test `ENDPOINT_F_ACTIVE` only) and its daemon
/// rewrites away at start, so both share the map.
pub const PINNED: &[PinnedLayout] = &[
    pinned(
        crate::ENDPOINTS_MAP,
        layout(MAP_TYPE_HASH, 4, 20, crate::MAX_ENDPOINTS, 0),
        1,
        None,
    ),
    pinned(
        crate::v1::COUNTERS_MAP_V1,
        layout(MAP_TYPE_PERCPU_HASH, 4, 80, crate::MAX_ENDPOINTS, 0),
        1,
        Some(1),
    ),
    pinned(
        crate::COUNTERS_MAP,
        layout(
            MAP_TYPE_PERCPU_HASH,
            4,
            224,
            crate::MAX_ENDPOINTS,
            NO_PREALLOC,
        ),
        2,
        None,
    ),
    pinned(
        crate::ENDPOINTS6_MAP,
        layout(MAP_TYPE_HASH, 16, 20, crate::MAX_ENDPOINTS, 0),
        2,
        None,
    ),
    pinned(
        crate::VETHS_MAP,
        layout(MAP_TYPE_HASH, 4, 20, crate::MAX_ENDPOINTS, NO_PREALLOC),
        2,
        None,
    ),
    pinned(
        HOST_FLOWS_MAP_G2,
        layout(MAP_TYPE_LRU_HASH, 40, 16, HOST_FLOWS_G2_ENTRIES, 0),
        2,
        Some(2),
    ),
    pinned(
        crate::HOST_FLOWS_MAP,
        layout(
            MAP_TYPE_HASH_OF_MAPS,
            4,
            4,
            crate::MAX_ENDPOINTS,
            NO_PREALLOC,
        ),
        3,
        None,
    ),
    pinned(
        crate::BANDWIDTH_MAP,
        layout(
            MAP_TYPE_HASH,
            4,
            core::mem::size_of::<crate::BandwidthState>(),
            crate::MAX_PACED_ENDPOINTS,
            NO_PREALLOC,
        ),
        2,
        None,
    ),
    pinned(MARK_MAP, layout(MAP_TYPE_ARRAY, 4, 8, 1, 0), 2, None),
    // NetworkPolicy (issue 26): new names, so generation 3 keeps its number
    // (a daemon without them leaves them alone as unknown pins).
    pinned(
        crate::policy::IPCACHE_MAP,
        layout(
            MAP_TYPE_LPM_TRIE,
            core::mem::size_of::<crate::policy::IpcacheKey>(),
            core::mem::size_of::<crate::policy::IpcacheValue>(),
            crate::policy::MAX_IPCACHE_ENTRIES,
            NO_PREALLOC,
        ),
        3,
        None,
    ),
    pinned(
        crate::policy::POLICY_MAP,
        layout(
            MAP_TYPE_LPM_TRIE,
            core::mem::size_of::<crate::policy::PolicyKey>(),
            core::mem::size_of::<crate::policy::PolicyValue>(),
            crate::policy::MAX_POLICY_ENTRIES,
            NO_PREALLOC,
        ),
        3,
        None,
    ),
    pinned(
        crate::policy::POLICY_FLOWS_MAP,
        layout(
            MAP_TYPE_HASH_OF_MAPS,
            4,
            4,
            crate::MAX_ENDPOINTS,
            NO_PREALLOC,
        ),
        3,
        None,
    ),
    // eBPF host routing (issue 27): new names, generation 3 again.
    pinned(
        crate::peers::PEER_PODS_MAP,
        layout(
            MAP_TYPE_LPM_TRIE,
            core::mem::size_of::<crate::policy::IpcacheKey>(),
            core::mem::size_of::<crate::peers::PeerPodsValue>(),
            crate::peers::MAX_PEER_POD_CIDRS,
            NO_PREALLOC,
        ),
        3,
        None,
    ),
    pinned(
        crate::peers::NODE_COUNTERS_MAP,
        layout(
            MAP_TYPE_PERCPU_ARRAY,
            4,
            core::mem::size_of::<crate::peers::NodeCounters>(),
            1,
            0,
        ),
        3,
        None,
    ),
    // Drop and flow events (issue 28): new names, generation 3 again.
    pinned(
        crate::events::EVENTS_MAP,
        layout(MAP_TYPE_RINGBUF, 0, 0, crate::events::EVENTS_RING_BYTES, 0),
        3,
        None,
    ),
    pinned(
        crate::events::EVENTS_CONFIG_MAP,
        layout(
            MAP_TYPE_ARRAY,
            4,
            core::mem::size_of::<crate::events::EventsConfig>(),
            1,
            0,
        ),
        3,
        None,
    ),
    pinned(
        crate::events::EVENT_LIMITS_MAP,
        layout(
            MAP_TYPE_LRU_HASH,
            4,
            core::mem::size_of::<crate::events::EventLimiter>(),
            crate::MAX_ENDPOINTS,
            0,
        ),
        3,
        None,
    ),
    pinned(
        crate::events::EVENT_STATS_MAP,
        layout(
            MAP_TYPE_PERCPU_ARRAY,
            4,
            core::mem::size_of::<crate::events::EventStats>(),
            1,
            0,
        ),
        3,
        None,
    ),
    pinned(
        crate::events::FLOW_WATCH_MAP,
        layout(MAP_TYPE_HASH, 4, 4, crate::MAX_ENDPOINTS, NO_PREALLOC),
        3,
        None,
    ),
];

/// The entry of `name` in [`PINNED`].
pub fn pinned_layout(name: &str) -> Option<&'static PinnedLayout> {
    PINNED.iter().find(|p| p.name.as_bytes() == name.as_bytes())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    extern crate std;

    use super::*;
    use crate::v1::EndpointCountersV1;
    use crate::{EndpointCounters, EndpointInfo, EndpointKey, FlowKey, FlowState};
    use core::mem::size_of;

    #[test]
    fn a_name_has_one_layout() {
        for (i, a) in PINNED.iter().enumerate() {
            for b in &PINNED[i + 1..] {
                assert_ne!(a.name, b.name, "{} listed twice", a.name);
            }
            assert!(a.until.is_none_or(|u| u >= a.since), "{}", a.name);
            // bpffs refuses dots; the kernel's map names stop at 15 bytes,
            // which is why nothing relies on them (pins are found by path).
            assert!(!a.name.contains('.'), "{}", a.name);
        }
    }

    #[test]
    fn the_current_entries_are_the_rust_layouts() {
        let size = |name| pinned_layout(name).unwrap().layout;
        assert_eq!(
            size(crate::ENDPOINTS_MAP).key_size as usize,
            size_of::<EndpointKey>()
        );
        assert_eq!(
            size(crate::ENDPOINTS_MAP).value_size as usize,
            size_of::<EndpointInfo>()
        );
        assert_eq!(
            size(crate::COUNTERS_MAP).value_size as usize,
            size_of::<EndpointCounters>()
        );
        assert_eq!(
            size(crate::v1::COUNTERS_MAP_V1).value_size as usize,
            size_of::<EndpointCountersV1>()
        );
        assert_eq!(
            size(HOST_FLOWS_MAP_G2).key_size as usize,
            size_of::<FlowKey>()
        );
        assert_eq!(
            size(HOST_FLOWS_MAP_G2).value_size as usize,
            size_of::<FlowState>()
        );
        assert_eq!(HOST_FLOWS_TABLE.key_size, size(HOST_FLOWS_MAP_G2).key_size);
        assert_eq!(
            HOST_FLOWS_TABLE.value_size,
            size(HOST_FLOWS_MAP_G2).value_size
        );
        // The outer map: host ifindex → inner map (its id, read back).
        assert_eq!(size(crate::HOST_FLOWS_MAP).key_size, 4);
        assert_eq!(size(MARK_MAP).value_size as usize, size_of::<PinsMark>());
        assert_eq!(size(crate::BANDWIDTH_MAP).value_size, 64);
    }

    #[test]
    fn generations_pin_what_the_table_says() {
        let names = |g| {
            PINNED
                .iter()
                .filter(move |p| p.pinned_by(g))
                .map(|p| p.name)
        };
        assert!(names(1).eq(["SARENA_ENDPOINTS", "SARENA_COUNTERS"]));
        assert!(names(GENERATION).any(|n| n == "SARENA_COUNTERS_V2"));
        assert!(!names(GENERATION).any(|n| n == "SARENA_COUNTERS"));
        assert!(names(2).any(|n| n == "SARENA_HOST_FLOWS"));
        assert!(!names(GENERATION).any(|n| n == "SARENA_HOST_FLOWS"));
        assert!(names(GENERATION).any(|n| n == "SARENA_HOST_FLOWS_V2"));
    }

    #[test]
    fn layouts_read_as_text() {
        let text = std::format!("{}", pinned_layout(crate::COUNTERS_MAP).unwrap().layout);
        assert_eq!(
            text,
            "per-CPU hash, 4-byte keys, 224-byte values, 16384 entries, flags 0x1"
        );
    }
}
