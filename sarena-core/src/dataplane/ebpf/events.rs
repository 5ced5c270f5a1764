//! Drop and flow events' maps (see `sarena_common::events`): the ring
//! buffer a reader drains ([`EventReader`]), the configuration switched at
//! run time, the node-wide counts, and the watched endpoints.

use std::io;
use std::time::Duration;

use aya::Ebpf;
use aya::maps::{Array, HashMap, Map, MapData, PerCpuArray, RingBuf};
use sarena_common::events::{
    EVENT_STATS_MAP, EVENTS_CONFIG_MAP, EVENTS_F_DROPS, EVENTS_F_FLOW_WATCH, EVENTS_MAP,
    EVENTS_POLL_MS, Event, EventStats, EventsConfig, FLOW_MODE_NEW, FLOW_MODE_OFF,
    FLOW_MODE_SAMPLE, FLOW_WATCH_MAP,
};
use tokio::io::unix::AsyncFd;

use super::AyaDataplane;
use super::error::{BpfError, is_not_found};
use super::maps::map_error;
use crate::api::{EventsSettings, FlowMode};
use crate::dataplane::DataplaneError;

/// The maps, as pinned; the ring buffer until a reader takes it.
pub(super) struct EventMaps {
    ring: Option<RingBuf<MapData>>,
    config: Array<MapData, EventsConfig>,
    stats: PerCpuArray<MapData, EventStats>,
    watch: HashMap<MapData, u32, u32>,
}

fn take(ebpf: &mut Ebpf, name: &'static str) -> Result<Map, BpfError> {
    ebpf.take_map(name).ok_or(BpfError::NoMap { map: name })
}

impl EventMaps {
    /// Takes the maps out of the loaded object.
    pub(super) fn take(ebpf: &mut Ebpf) -> Result<Self, BpfError> {
        Ok(EventMaps {
            ring: Some(
                RingBuf::try_from(take(ebpf, EVENTS_MAP)?)
                    .map_err(map_error("open map", EVENTS_MAP))?,
            ),
            config: Array::try_from(take(ebpf, EVENTS_CONFIG_MAP)?)
                .map_err(map_error("open map", EVENTS_CONFIG_MAP))?,
            stats: PerCpuArray::try_from(take(ebpf, EVENT_STATS_MAP)?)
                .map_err(map_error("open map", EVENT_STATS_MAP))?,
            watch: HashMap::try_from(take(ebpf, FLOW_WATCH_MAP)?)
                .map_err(map_error("open map", FLOW_WATCH_MAP))?,
        })
    }
}

/// The programs' `FLOW_MODE_*` of `mode`.
pub fn flow_mode_code(mode: FlowMode) -> u32 {
    match mode {
        FlowMode::Off => FLOW_MODE_OFF,
        FlowMode::New => FLOW_MODE_NEW,
        FlowMode::Sample => FLOW_MODE_SAMPLE,
    }
}

/// What the programs read of `settings` (`watching`: some endpoint has a
/// mode of its own). A rate of 0 is no limit.
pub fn events_config(settings: &EventsSettings, watching: bool) -> EventsConfig {
    let interval_ns = match settings.rate_per_second {
        0 => 0,
        rate => 1_000_000_000 / u64::from(rate),
    };
    let mut flags = 0;
    if settings.drops {
        flags |= EVENTS_F_DROPS;
    }
    if watching {
        flags |= EVENTS_F_FLOW_WATCH;
    }
    EventsConfig {
        flags,
        flow_mode: flow_mode_code(settings.flows),
        flow_sample: settings.sample,
        _pad: 0,
        interval_ns,
        // `burst` events at once: the first is due now, the last
        // `burst - 1` intervals ahead
        burst_ns: interval_ns.saturating_mul(u64::from(settings.burst.saturating_sub(1))),
    }
}

/// The ring buffer, for the one task that drains it: waits until events
/// are there, then hands them out a batch at a time.
pub struct EventReader {
    ring: AsyncFd<RingBuf<MapData>>,
    /// Polls in a row that found nothing (the next one waits longer).
    quiet_polls: u32,
}

/// How many times the poll interval doubles while the ring stays empty:
/// [`EVENTS_POLL_MS`] while events flow, at most 16 times it (320 ms)
/// after 0.3 s without one, so an idle daemon looks 3 times a second,
/// not 50.
const QUIET_DOUBLINGS: u32 = 4;

impl std::fmt::Debug for EventReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventReader").finish_non_exhaustive()
    }
}

impl EventReader {
    /// Waits for events, then appends up to `max` of them to `out` (at
    /// least one). A record of another size than [`Event`]'s (none is
    /// written) is skipped.
    ///
    /// The programs wake the reader only once
    /// [`EVENTS_WAKEUP_BYTES`](sarena_common::events::EVENTS_WAKEUP_BYTES) wait
    /// (a wakeup per event would cost them more than the event), so the
    /// ring is also looked at every [`EVENTS_POLL_MS`] while events come,
    /// less often while none does (every 320 ms after 0.3 s without one).
    pub async fn read(&mut self, out: &mut Vec<Event>, max: usize) -> io::Result<()> {
        let max = max.max(1);
        loop {
            if take_events(self.ring.get_mut(), out, max) > 0 {
                self.quiet_polls = 0;
                return Ok(());
            }
            // Woken or not, the ring is looked at again (a wakeup cleared
            // first: one that comes after the look is not lost).
            let poll = poll_interval(self.quiet_polls);
            match tokio::time::timeout(poll, self.ring.readable_mut()).await {
                Ok(woken) => {
                    woken?.clear_ready();
                    self.quiet_polls = 0;
                }
                Err(_) => self.quiet_polls = self.quiet_polls.saturating_add(1),
            }
        }
    }

    /// [`EventReader::read`] with a time limit: `Ok(false)` when none came.
    pub async fn read_for(
        &mut self,
        out: &mut Vec<Event>,
        max: usize,
        wait: Duration,
    ) -> io::Result<bool> {
        match tokio::time::timeout(wait, self.read(out, max)).await {
            Ok(result) => result.map(|()| true),
            Err(_) => Ok(false),
        }
    }
}

/// How long the reader waits for a wakeup after `quiet` polls in a row
/// found nothing: [`EVENTS_POLL_MS`], doubling up to [`QUIET_DOUBLINGS`]
/// times.
fn poll_interval(quiet: u32) -> Duration {
    Duration::from_millis(EVENTS_POLL_MS << quiet.min(QUIET_DOUBLINGS))
}

/// Appends up to `max` events of `ring` to `out`; the records taken.
fn take_events(ring: &mut RingBuf<MapData>, out: &mut Vec<Event>, max: usize) -> usize {
    let mut taken = 0;
    while taken < max {
        let Some(item) = ring.next() else {
            break;
        };
        taken += 1;
        if let Some(event) = decode(&item) {
            out.push(event);
        }
    }
    taken
}

/// The event in a ring buffer record.
fn decode(bytes: &[u8]) -> Option<Event> {
    if bytes.len() != std::mem::size_of::<Event>() {
        return None;
    }
    // SAFETY: `Event` is plain `#[repr(C)]` data (`aya::Pod`), every bit
    // pattern valid; the size was checked, the read is unaligned.
    Some(unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<Event>()) })
}

impl AyaDataplane {
    /// The ring buffer's reader, once: the first call takes it (`None`
    /// after). Must be called within a Tokio runtime.
    pub fn take_event_reader(&self) -> Result<Option<EventReader>, DataplaneError> {
        let Some(ring) = self.lock().events.ring.take() else {
            return Ok(None);
        };
        // SAFETY: the ring buffer owns its map's descriptor, open until it
        // is dropped, and always answers `as_raw_fd` with that one; the
        // `AsyncFd` owns the ring buffer.
        let ring = unsafe { AsyncFd::register(ring) }.map_err(|e| DataplaneError::Io {
            call: "register the event ring buffer",
            path: self.pin_dir.clone(),
            source: e.into_parts().1,
        })?;
        Ok(Some(EventReader {
            ring,
            quiet_polls: 0,
        }))
    }

    /// Writes what the programs read of the events' settings.
    pub fn set_events_config(&self, config: EventsConfig) -> Result<(), DataplaneError> {
        self.lock()
            .events
            .config
            .set(0, config, 0)
            .map_err(map_error("write", EVENTS_CONFIG_MAP))?;
        Ok(())
    }

    /// The node-wide counts, summed over CPUs.
    pub fn event_stats(&self) -> Result<EventStats, DataplaneError> {
        let state = self.lock();
        let values = state
            .events
            .stats
            .get(&0, 0)
            .map_err(map_error("read", EVENT_STATS_MAP))?;
        let mut sum = EventStats::default();
        for v in values.iter() {
            sum.add(v);
        }
        Ok(sum)
    }

    /// Gives the endpoint behind `host_ifindex` a flow mode of its own
    /// (`None`: the node's again).
    pub fn set_flow_watch(
        &self,
        host_ifindex: u32,
        mode: Option<FlowMode>,
    ) -> Result<(), DataplaneError> {
        let mut state = self.lock();
        match mode {
            Some(mode) => state
                .events
                .watch
                .insert(host_ifindex, flow_mode_code(mode), 0)
                .map_err(map_error("insert", FLOW_WATCH_MAP))?,
            None => match state.events.watch.remove(&host_ifindex) {
                Ok(()) => {}
                Err(e) if is_not_found(&e) => {}
                Err(e) => return Err(map_error("remove", FLOW_WATCH_MAP)(e).into()),
            },
        }
        Ok(())
    }

    /// The endpoints with a flow mode of their own: host ifindex → mode.
    pub fn flow_watches(&self) -> Result<Vec<(u32, u32)>, DataplaneError> {
        let state = self.lock();
        let mut found = Vec::new();
        for entry in state.events.watch.iter() {
            found.push(entry.map_err(map_error("list", FLOW_WATCH_MAP))?);
        }
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_poll_backs_off_while_the_ring_stays_empty_and_is_capped() {
        let ms = |q| poll_interval(q).as_millis();
        assert_eq!(ms(0), u128::from(EVENTS_POLL_MS));
        assert_eq!(ms(1), 2 * u128::from(EVENTS_POLL_MS));
        assert_eq!(ms(4), 320);
        assert_eq!(ms(5), 320);
        assert_eq!(ms(u32::MAX), 320);
    }

    fn settings(rate: u32, burst: u32) -> EventsSettings {
        EventsSettings {
            drops: true,
            flows: FlowMode::Sample,
            sample: 50,
            rate_per_second: rate,
            burst,
            watched: Vec::new(),
        }
    }

    #[test]
    fn settings_become_the_programs_limits() {
        let c = events_config(&settings(100, 200), false);
        assert_eq!(c.flags, EVENTS_F_DROPS);
        assert_eq!((c.flow_mode, c.flow_sample), (FLOW_MODE_SAMPLE, 50));
        assert_eq!(c.interval_ns, 10_000_000);
        assert_eq!(c.burst_ns, 199 * 10_000_000);
        let c = events_config(&settings(0, 0), true);
        assert_eq!((c.interval_ns, c.burst_ns), (0, 0));
        assert_eq!(c.flags, EVENTS_F_DROPS | EVENTS_F_FLOW_WATCH);
    }

    #[test]
    fn only_records_of_an_events_size_decode() {
        assert!(decode(&[0u8; 10]).is_none());
        let mut bytes = vec![0u8; std::mem::size_of::<Event>()];
        bytes[8] = 7; // ifindex
        bytes[16] = 1; // kind
        let e = decode(&bytes).unwrap();
        assert_eq!((e.ifindex, e.kind), (7, 1));
    }
}
