//! Taking the pins of an older generation over, in place and without a gap
//! (how they are recognised: `inspect.rs`; the rule: [`sarena_common::layouts`]).
//!
//! Every step is idempotent, so a daemon killed anywhere in between and
//! started again finishes the job, and until the last step an older daemon
//! can still take the node back:
//!
//! 1. [`AyaDataplane::open`](super::AyaDataplane::open): the maps this
//!    generation pins are created beside the old ones (or reused: the
//!    endpoint map kept its layout); the old pins stay, untouched.
//! 2. Reconcile writes the entries (and flows tables) of every endpoint
//!    whose filters do not run this release's programs yet; then, endpoint
//!    by endpoint, for each of them: its counters are copied from the old
//!    generation's map, converted ([`EndpointCountersV1`] → the current
//!    layout, per CPU, overwriting whatever a run before a downgrade left);
//!    then its entries are checked and each hook's filter is *replaced* in
//!    one netlink request (see [`super::tc`]), so the hook always runs exactly
//!    one program, the old one until the kernel swaps in the new. An
//!    endpoint already running this release's programs (a killed run swapped
//!    it) keeps its counters: they are live in the new map. The frames the old
//!    programs count between the copy and the swap (microseconds) are lost.
//! 3. Once every endpoint runs this release's programs, the old pins are
//!    removed (the old maps go with the last program using them) and the
//!    mark is written: these pins are now this generation's.
//!
//! Flow state is not migrated: generation 1 had no host-stack flows map, so
//! the endpoints' flows tables start empty, which only matters for pod ↔ pod
//! flows the host stack translates, and those did not work with generation
//! 1's programs anyway (see sarena-ebpf/README.md). Generation 2's node-wide
//! table (never released) is retired like any older pin: removed at step 3.
//!
//! # Fault injection (tests only)
//!
//! A build with the `fault-injection` feature SIGKILLs itself at a named
//! point of the steps above when `SARENA_TEST_KILL_AT` names it, for the
//! upgrade test's kills in the middle of a migration (see `fault.rs`); in
//! default and release builds the kill points compile to nothing.

use std::path::Path;

use aya::maps::{Array, Map, MapData, PerCpuHashMap, PerCpuValues};
use sarena_common::EndpointCounters;
use sarena_common::layouts::{MARK_MAP, PinsMark};
use sarena_common::v1::{COUNTERS_MAP_V1, EndpointCountersV1};

use super::error::{BpfError, is_not_found};
use super::fault::{KillAt, KillPoint};
use super::inspect::{Inspection, RetiredPin};
use super::maps::Maps;
use super::pins;
use crate::api::Endpoint;

/// The older generation's maps being taken over, and what is left to do.
pub(super) struct Upgrade {
    /// Generation 1's counters, while endpoints may still count into them.
    counters_v1: Option<PerCpuHashMap<MapData, u32, EndpointCountersV1>>,
    /// The older generation's pins, removed at [`Upgrade::finish`].
    retired: Vec<RetiredPin>,
    /// The mark found says this release's generation already.
    marked: bool,
}

impl Upgrade {
    /// Opens the older generation's maps that [`inspect`](super::inspect)
    /// found (their layouts are checked).
    pub(super) fn open(inspection: Inspection) -> Result<Self, BpfError> {
        let mut counters_v1 = None;
        for pin in &inspection.retired {
            if pin.name == COUNTERS_MAP_V1 {
                let open_error = |source| BpfError::Pin {
                    call: "open old counters",
                    path: pin.path.clone(),
                    source: Box::new(source),
                };
                let data = MapData::from_pin(&pin.path).map_err(open_error)?;
                counters_v1 =
                    Some(PerCpuHashMap::try_from(Map::PerCpuHashMap(data)).map_err(open_error)?);
            }
        }
        for name in &inspection.unknown {
            tracing::info!(pin = %name, "eBPF: a pin this release does not know (a newer release's map?); left alone");
        }
        Ok(Upgrade {
            counters_v1,
            marked: inspection.mark == Some(PinsMark::CURRENT),
            retired: inspection.retired,
        })
    }

    /// Whether older-generation pins are being taken over.
    pub(super) fn migrating(&self) -> bool {
        !self.retired.is_empty()
    }

    /// Step 2 for `endpoint`, before its filters are replaced: copies its
    /// generation-1 counters, if any, into `maps`. `true` when it did.
    pub(super) fn carry_counters(
        &self,
        maps: &mut Maps,
        endpoint: &Endpoint,
    ) -> Result<bool, BpfError> {
        let Some(old) = &self.counters_v1 else {
            return Ok(false);
        };
        let ifindex = endpoint.spec.host_ifindex;
        let values = match old.get(&ifindex, 0) {
            Ok(values) => values,
            Err(e) if is_not_found(&e) => return Ok(false),
            Err(source) => {
                return Err(BpfError::Map {
                    call: "read old counters",
                    object: endpoint.spec.host_ifname.clone(),
                    source: Box::new(source),
                });
            }
        };
        let converted: Vec<EndpointCounters> =
            values.iter().map(|v| EndpointCounters::from(*v)).collect();
        let converted = PerCpuValues::try_from(converted).map_err(|source| BpfError::Cpus {
            ifname: endpoint.spec.host_ifname.clone(),
            source,
        })?;
        maps.set_counters(endpoint, converted)?;
        Ok(true)
    }

    /// Step 3, once every endpoint runs this release's programs: removes the
    /// older generation's pins, then writes the mark (when it is not this
    /// generation's already). A daemon under test may die in between
    /// (`kill_at`, see `fault.rs`).
    pub(super) fn finish(&mut self, pin_dir: &Path, kill_at: KillAt) -> Result<(), BpfError> {
        if self.migrating() {
            self.counters_v1 = None;
            for pin in &self.retired {
                match std::fs::remove_file(&pin.path) {
                    Ok(()) => {
                        tracing::info!(pin = %pin.path.display(), "eBPF upgrade: removed an earlier generation's pin")
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(source) => {
                        return Err(BpfError::PinDir {
                            dir: pin.path.clone(),
                            source,
                        });
                    }
                }
            }
            self.retired.clear();
            kill_at.kill_if(KillPoint::Retired);
        }
        if !self.marked {
            write_mark(pin_dir, PinsMark::CURRENT)?;
            self.marked = true;
        }
        Ok(())
    }
}

/// Writes `mark` into the pinned mark, creating and pinning it (value first)
/// when it is missing.
fn write_mark(pin_dir: &Path, mark: PinsMark) -> Result<(), BpfError> {
    let path = pins::maps_dir(pin_dir).join(MARK_MAP);
    let error = |call| {
        let path = path.clone();
        move |source| BpfError::Pin {
            call,
            path,
            source: Box::new(source),
        }
    };
    let mut map: Array<MapData, PinsMark> = match MapData::from_pin(&path) {
        Ok(data) => Array::try_from(Map::Array(data)).map_err(error("open mark"))?,
        Err(_) => {
            let mut map = Array::create(1, 0).map_err(error("create mark"))?;
            map.set(0, mark, 0).map_err(error("write mark"))?;
            map.pin(&path).map_err(|e| {
                error("pin mark")(aya::maps::MapError::PinError {
                    name: Some(MARK_MAP.into()),
                    error: e,
                })
            })?;
            return Ok(());
        }
    };
    map.set(0, mark, 0).map_err(error("write mark"))
}
