//! On a graceful stop: the counters left where the previous release finds
//! them, so that a downgrade carries on from them (the way up: `upgrade.rs`).
//!
//! Generation 1 (release 0.1.0) reuses a pin named like its counters map
//! ([`COUNTERS_MAP_V1`]) and keeps the entries it finds there. So at every
//! graceful stop this release writes that map, in generation 1's layout,
//! with every endpoint's counters converted ([`EndpointCountersV1`]: the
//! fields generation 1 had). The frames counted between that copy and the
//! older daemon's swap of the programs (milliseconds) are not in it. When the
//! next daemon is this release again, the map is an earlier generation's pin
//! whose endpoints already run this release's programs: nothing is carried
//! from it, and it is removed once reconcile is done.
//!
//! A daemon killed (not stopped) leaves no such copy; an older release then
//! starts its counters from zero (docs/upgrade.md).

use aya::maps::{Map, MapData, PerCpuHashMap, PerCpuValues};
use sarena_common::MAX_ENDPOINTS;
use sarena_common::layouts::pinned_layout;
use sarena_common::v1::{COUNTERS_MAP_V1, EndpointCountersV1};

use super::AyaDataplane;
use super::error::BpfError;
use super::inspect::read_layout;
use super::pins;
use crate::dataplane::DataplaneError;

impl AyaDataplane {
    /// Writes every endpoint's counters into generation 1's counters map,
    /// pinned as [`COUNTERS_MAP_V1`] (see the module docs); the daemon calls
    /// it when it stops gracefully. Returns how many endpoints it wrote. A pin
    /// of that name with another layout is left alone and reported.
    pub fn hand_over(&self) -> Result<usize, DataplaneError> {
        let path = pins::maps_dir(&self.pin_dir).join(COUNTERS_MAP_V1);
        let error = |call: &'static str| {
            let path = path.clone();
            move |source| BpfError::Pin {
                call,
                path,
                source: Box::new(source),
            }
        };
        let counters = self.lock().maps.all_counters()?;
        let pinned = path.exists();
        let mut map: PerCpuHashMap<MapData, u32, EndpointCountersV1> = if pinned {
            let want = pinned_layout(COUNTERS_MAP_V1).map(|p| p.layout);
            let found = read_layout(&path)?;
            if let Some(expected) = want.filter(|w| *w != found) {
                return Err(BpfError::PinLayout {
                    pin: path,
                    found,
                    expected,
                    retired: true,
                }
                .into());
            }
            let data = MapData::from_pin(&path).map_err(error("open pin"))?;
            PerCpuHashMap::try_from(Map::PerCpuHashMap(data)).map_err(error("open pin"))?
        } else {
            PerCpuHashMap::create(MAX_ENDPOINTS, 0).map_err(error("create map"))?
        };
        let mut written = 0;
        for (ifindex, values) in &counters {
            let old: Vec<EndpointCountersV1> = values
                .iter()
                .map(|v| EndpointCountersV1::from(*v))
                .collect();
            let old = PerCpuValues::try_from(old).map_err(|source| BpfError::Cpus {
                ifname: ifindex.to_string(),
                source,
            })?;
            map.insert(ifindex, old, 0)
                .map_err(error("write counters"))?;
            written += 1;
        }
        if pinned {
            // Entries of endpoints gone since an earlier copy.
            let stale: Vec<u32> = map
                .keys()
                .filter_map(Result::ok)
                .filter(|k| !counters.iter().any(|(ifindex, _)| ifindex == k))
                .collect();
            for key in stale {
                map.remove(&key).map_err(error("remove counters"))?;
            }
        } else {
            map.pin(&path).map_err(|e| {
                error("pin map")(aya::maps::MapError::PinError {
                    name: Some(COUNTERS_MAP_V1.into()),
                    error: e,
                })
            })?;
        }
        tracing::info!(endpoints = written, pin = %path.display(),
            "eBPF: counters left for an older release (downgrade)");
        Ok(written)
    }
}
