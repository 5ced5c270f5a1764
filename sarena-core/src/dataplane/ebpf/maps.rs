//! The two maps the programs share with the daemon, and what the daemon
//! writes into and removes from them.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;

use aya::Ebpf;
use aya::maps::{HashMap as BpfHashMap, Map, MapData, PerCpuHashMap, PerCpuValues};
use sarena_common::{COUNTERS_MAP, ENDPOINTS_MAP, EndpointCounters, EndpointInfo, EndpointKey};

use super::entries;
use super::error::{BpfError, is_not_found};
use crate::api::Endpoint;

/// `SARENA_ENDPOINTS` (pod address → endpoint) and `SARENA_COUNTERS`
/// (host ifindex → per-CPU counters), as pinned.
pub(super) struct Maps {
    endpoints: BpfHashMap<MapData, EndpointKey, EndpointInfo>,
    counters: PerCpuHashMap<MapData, u32, EndpointCounters>,
}

fn map_error(
    call: &'static str,
    object: impl ToString,
) -> impl FnOnce(aya::maps::MapError) -> BpfError {
    move |source| BpfError::Map {
        call,
        object: object.to_string(),
        source: Box::new(source),
    }
}

fn take(ebpf: &mut Ebpf, map: &'static str) -> Result<Map, BpfError> {
    ebpf.take_map(map).ok_or(BpfError::NoMap { map })
}

impl Maps {
    /// Takes both maps out of the loaded object.
    pub(super) fn take(ebpf: &mut Ebpf) -> Result<Self, BpfError> {
        let endpoints = BpfHashMap::try_from(take(ebpf, ENDPOINTS_MAP)?)
            .map_err(map_error("open map", ENDPOINTS_MAP))?;
        let counters = PerCpuHashMap::try_from(take(ebpf, COUNTERS_MAP)?)
            .map_err(map_error("open map", COUNTERS_MAP))?;
        Ok(Maps {
            endpoints,
            counters,
        })
    }

    /// The counters of `host_ifindex`, summed over CPUs; `None` when absent.
    pub(super) fn counters(&self, host_ifindex: u32) -> Result<Option<EndpointCounters>, BpfError> {
        match self.counters.get(&host_ifindex, 0) {
            Ok(values) => {
                let mut total = EndpointCounters::default();
                for v in values.iter() {
                    total.add(v);
                }
                Ok(Some(total))
            }
            Err(e) if is_not_found(&e) => Ok(None),
            Err(e) => Err(map_error("read counters", host_ifindex)(e)),
        }
    }

    /// Every endpoint entry, sorted by address.
    pub(super) fn entries(&self) -> Result<Vec<(Ipv4Addr, EndpointInfo)>, BpfError> {
        let mut out = Vec::new();
        for item in self.endpoints.iter() {
            let (k, v) = item.map_err(map_error("iterate", ENDPOINTS_MAP))?;
            out.push((Ipv4Addr::from(k.addr), v));
        }
        out.sort_by_key(|(a, _)| *a);
        Ok(out)
    }

    /// Counters first (kept when present), then the endpoint entries;
    /// `true` when something was missing or different.
    pub(super) fn write(&mut self, endpoint: &Endpoint) -> Result<bool, BpfError> {
        let ifname = &endpoint.host_ifname;
        let mut changed = false;
        if self.counters.get(&endpoint.host_ifindex, 0).is_err() {
            let cpus_error = |source| BpfError::Cpus {
                ifname: ifname.clone(),
                source,
            };
            let cpus = aya::util::nr_cpus().map_err(|(_, e)| cpus_error(e))?;
            let zero = PerCpuValues::try_from(vec![EndpointCounters::default(); cpus])
                .map_err(cpus_error)?;
            self.counters
                .insert(endpoint.host_ifindex, zero, 0)
                .map_err(map_error("insert counters", ifname))?;
            changed = true;
        }
        for (key, info) in entries::endpoint_entries(endpoint) {
            if self.endpoints.get(&key, 0).ok() != Some(info) {
                self.endpoints
                    .insert(key, info, 0)
                    .map_err(map_error("insert endpoint", Ipv4Addr::from(key.addr)))?;
                changed = true;
            }
        }
        Ok(changed)
    }

    /// Removes `endpoint`'s entries (only those still pointing at its
    /// ifindex: an address may already belong to a newer endpoint) and its
    /// counters; failures are added to `errors`.
    pub(super) fn remove(&mut self, endpoint: &Endpoint, errors: &mut Vec<BpfError>) {
        for addr in entries::ipv4_addresses(&endpoint.addresses) {
            let key = EndpointKey::new(addr.octets());
            if let Ok(info) = self.endpoints.get(&key, 0)
                && info.ifindex == endpoint.host_ifindex
                && let Err(e) = self.endpoints.remove(&key)
            {
                errors.push(map_error("remove endpoint", addr)(e));
            }
        }
        if let Err(e) = self.counters.remove(&endpoint.host_ifindex)
            && !is_not_found(&e)
        {
            errors.push(map_error("remove counters", &endpoint.host_ifname)(e));
        }
    }

    /// Removes every entry and counter that `endpoints` do not account for;
    /// returns the addresses of entries that belong to no endpoint.
    pub(super) fn remove_unknown(
        &mut self,
        endpoints: &[Endpoint],
    ) -> Result<BTreeSet<String>, BpfError> {
        let mut wanted_entries = BTreeMap::new();
        for endpoint in endpoints {
            for (key, info) in entries::endpoint_entries(endpoint) {
                wanted_entries.insert(key.addr, info);
            }
        }
        let wanted_ifindexes: BTreeSet<u32> = endpoints.iter().map(|e| e.host_ifindex).collect();

        let mut removed = BTreeSet::new();
        let keys: Vec<EndpointKey> = self.endpoints.keys().filter_map(Result::ok).collect();
        for key in keys {
            let current = self.endpoints.get(&key, 0).ok();
            if current.is_none() || wanted_entries.get(&key.addr) != current.as_ref() {
                // Wrong or unknown: removed here; attach writes the right one back.
                let addr = Ipv4Addr::from(key.addr);
                self.endpoints
                    .remove(&key)
                    .map_err(map_error("remove endpoint", addr))?;
                if !wanted_entries.contains_key(&key.addr) {
                    removed.insert(addr.to_string());
                }
            }
        }
        let ifindexes: Vec<u32> = self.counters.keys().filter_map(Result::ok).collect();
        for ifindex in ifindexes {
            if !wanted_ifindexes.contains(&ifindex) {
                let _ = self.counters.remove(&ifindex);
            }
        }
        Ok(removed)
    }
}
