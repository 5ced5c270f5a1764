//! The maps the programs share with the daemon, and what the daemon writes
//! into and removes from them.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use aya::Ebpf;
use aya::maps::{HashMap as BpfHashMap, Map, MapData, PerCpuHashMap, PerCpuValues};
use sarena_common::{
    COUNTERS_MAP, ENDPOINTS_MAP, ENDPOINTS6_MAP, Endpoint6Key, EndpointCounters, EndpointInfo,
    EndpointKey, VETHS_MAP,
};

use super::entries::{self, AddressKey};
use super::error::{BpfError, is_not_found};
use super::flow_keeper::TableKeeper;
use super::flows::FlowTables;
use super::policy_maps::PolicyMaps;
use crate::api::Endpoint;

/// `SARENA_ENDPOINTS` and `SARENA_ENDPOINTS6` (pod address → endpoint),
/// `SARENA_VETHS` (host ifindex → endpoint), `SARENA_COUNTERS_V2` (host
/// ifindex → per-CPU counters) and `SARENA_HOST_FLOWS_V2` (host ifindex →
/// the endpoint's flows table), as pinned.
pub(super) struct Maps {
    endpoints: AddressMap<EndpointKey>,
    endpoints6: AddressMap<Endpoint6Key>,
    veths: BpfHashMap<MapData, u32, EndpointInfo>,
    counters: PerCpuHashMap<MapData, u32, EndpointCounters>,
    /// Each endpoint's flows table.
    pub(super) flows: FlowTables,
    /// Puts the flows tables in and takes them out off the lock.
    keeper: Arc<TableKeeper>,
    /// NetworkPolicy's maps (each endpoint's answerable-flows table among them).
    pub(super) policy: PolicyMaps,
    /// Isolation bits by host ifindex, as the policy loader decided them
    /// (`policy.rs`); an endpoint it has not decided keeps the bits its
    /// entry has (a restart).
    pub(super) isolation: BTreeMap<u32, u32>,
}

/// One endpoint map: pod addresses of one family → endpoint.
struct AddressMap<K> {
    name: &'static str,
    map: BpfHashMap<MapData, K, EndpointInfo>,
}

/// Turns an aya map error of `call` on `object` into a [`BpfError::Map`].
pub(super) fn map_error(
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

fn hash_map<K: aya::Pod>(
    ebpf: &mut Ebpf,
    name: &'static str,
) -> Result<BpfHashMap<MapData, K, EndpointInfo>, BpfError> {
    BpfHashMap::try_from(take(ebpf, name)?).map_err(map_error("open map", name))
}

impl<K: AddressKey> AddressMap<K> {
    fn take(ebpf: &mut Ebpf, name: &'static str) -> Result<Self, BpfError> {
        Ok(AddressMap {
            name,
            map: hash_map(ebpf, name)?,
        })
    }

    /// Every entry, sorted by key.
    fn entries(&self) -> Result<Vec<(K, EndpointInfo)>, BpfError> {
        let mut out = Vec::new();
        for item in self.map.iter() {
            out.push(item.map_err(map_error("iterate", self.name))?);
        }
        out.sort_by_key(|(k, _)| *k);
        Ok(out)
    }

    /// Writes `wanted`; `true` when an entry was missing or different.
    fn write(&mut self, wanted: Vec<(K, EndpointInfo)>) -> Result<bool, BpfError> {
        let mut changed = false;
        for (key, info) in wanted {
            if self.map.get(&key, 0).ok() != Some(info) {
                self.map
                    .insert(key, info, 0)
                    .map_err(map_error("insert endpoint", key.ip()))?;
                changed = true;
            }
        }
        Ok(changed)
    }

    /// Removes the entries of `keys` that still point at `ifindex` (an
    /// address may already belong to a newer endpoint); failures are added
    /// to `errors`.
    fn remove(&mut self, keys: impl Iterator<Item = K>, ifindex: u32, errors: &mut Vec<BpfError>) {
        for key in keys {
            if let Ok(info) = self.map.get(&key, 0)
                && info.ifindex == ifindex
                && let Err(e) = self.map.remove(&key)
            {
                errors.push(map_error("remove endpoint", key.ip())(e));
            }
        }
    }

    /// Removes every entry that is not `wanted`; returns the addresses of
    /// the entries that belong to no endpoint.
    fn remove_unknown(
        &mut self,
        wanted: &BTreeMap<K, EndpointInfo>,
    ) -> Result<BTreeSet<String>, BpfError> {
        let mut removed = BTreeSet::new();
        let keys: Vec<K> = self.map.keys().filter_map(Result::ok).collect();
        for key in keys {
            let current = self.map.get(&key, 0).ok();
            if current.is_none() || wanted.get(&key) != current.as_ref() {
                // Wrong or unknown: removed here; attach writes the right one back.
                self.map
                    .remove(&key)
                    .map_err(map_error("remove endpoint", key.ip()))?;
                if !wanted.contains_key(&key) {
                    removed.insert(key.ip().to_string());
                }
            }
        }
        Ok(removed)
    }
}

impl Maps {
    /// Takes the maps out of the loaded object.
    pub(super) fn take(ebpf: &mut Ebpf, keeper: Arc<TableKeeper>) -> Result<Self, BpfError> {
        let endpoints = AddressMap::take(ebpf, ENDPOINTS_MAP)?;
        let endpoints6 = AddressMap::take(ebpf, ENDPOINTS6_MAP)?;
        let veths = hash_map(ebpf, VETHS_MAP)?;
        let counters = PerCpuHashMap::try_from(take(ebpf, COUNTERS_MAP)?)
            .map_err(map_error("open map", COUNTERS_MAP))?;
        let flows = FlowTables::take(ebpf)?;
        let policy = PolicyMaps::take(ebpf)?;
        Ok(Maps {
            endpoints,
            endpoints6,
            veths,
            counters,
            flows,
            keeper,
            policy,
            isolation: BTreeMap::new(),
        })
    }

    /// The isolation bits of `ifindex`'s entries: the loader's, else
    /// what its veth entry holds.
    fn isolation_of(&self, ifindex: u32) -> u32 {
        match self.isolation.get(&ifindex) {
            Some(bits) => *bits,
            None => self
                .veth(ifindex)
                .map_or(0, |v| v.flags & super::policy::POLICY_BITS),
        }
    }

    /// The isolation bits every veth entry holds, by host ifindex.
    pub(super) fn pinned_isolation(&self) -> BTreeMap<u32, u32> {
        self.veths
            .iter()
            .filter_map(Result::ok)
            .map(|(ifindex, info)| (ifindex, info.flags & super::policy::POLICY_BITS))
            .collect()
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

    /// Sets the counters of `endpoint` (an upgrade carrying them over).
    pub(super) fn set_counters(
        &mut self,
        endpoint: &Endpoint,
        values: PerCpuValues<EndpointCounters>,
    ) -> Result<(), BpfError> {
        self.counters
            .insert(endpoint.spec.host_ifindex, values, 0)
            .map_err(map_error("carry counters", &endpoint.spec.host_ifname))
    }

    /// Every endpoint's counters, per CPU, by host ifindex.
    pub(super) fn all_counters(
        &self,
    ) -> Result<Vec<(u32, PerCpuValues<EndpointCounters>)>, BpfError> {
        self.counters
            .iter()
            .collect::<Result<_, _>>()
            .map_err(map_error("list counters", COUNTERS_MAP))
    }

    /// Every IPv4 endpoint entry, sorted by address.
    pub(super) fn entries(&self) -> Result<Vec<(EndpointKey, EndpointInfo)>, BpfError> {
        self.endpoints.entries()
    }

    /// Every IPv6 endpoint entry, sorted by address.
    pub(super) fn entries6(&self) -> Result<Vec<(Endpoint6Key, EndpointInfo)>, BpfError> {
        self.endpoints6.entries()
    }

    /// The veth entry of `host_ifindex`, if any.
    pub(super) fn veth(&self, host_ifindex: u32) -> Option<EndpointInfo> {
        self.veths.get(&host_ifindex, 0).ok()
    }

    /// The flows table first and counters (both kept when present), then
    /// the veth's entry, then the address entries; `true` when something was
    /// missing or different.
    pub(super) fn write(&mut self, endpoint: &Endpoint) -> Result<bool, BpfError> {
        let ifname = &endpoint.spec.host_ifname;
        let ifindex = endpoint.spec.host_ifindex;
        self.keeper.claim(ifindex);
        let mut changed = self.flows.ensure(ifindex, ifname)?;
        changed |= self.policy.flows.ensure(ifindex, ifname)?;
        if self.counters.get(&ifindex, 0).is_err() {
            let cpus_error = |source| BpfError::Cpus {
                ifname: ifname.clone(),
                source,
            };
            let cpus = aya::util::nr_cpus().map_err(|(_, e)| cpus_error(e))?;
            let zero = PerCpuValues::try_from(vec![EndpointCounters::default(); cpus])
                .map_err(cpus_error)?;
            self.counters
                .insert(ifindex, zero, 0)
                .map_err(map_error("insert counters", ifname))?;
            changed = true;
        }
        let isolation = self.isolation_of(ifindex);
        let info = entries::endpoint_info(endpoint, isolation);
        if self.veth(ifindex) != Some(info) {
            self.veths
                .insert(ifindex, info, 0)
                .map_err(map_error("insert veth", ifname))?;
            changed = true;
        }
        changed |= self
            .endpoints
            .write(entries::ipv4_entries(endpoint, isolation))?;
        changed |= self
            .endpoints6
            .write(entries::ipv6_entries(endpoint, isolation))?;
        Ok(changed)
    }

    /// Removes `endpoint`'s address entries (only those still pointing at
    /// its ifindex), its veth's entry and its counters, and queues the
    /// removal of its flows tables; failures are added to `errors`.
    pub(super) fn remove(&mut self, endpoint: &Endpoint, errors: &mut Vec<BpfError>) {
        let ifindex = endpoint.spec.host_ifindex;
        let v4 =
            entries::ipv4_addresses(&endpoint.spec.addresses).map(|a| EndpointKey::new(a.octets()));
        self.endpoints.remove(v4, ifindex, errors);
        let v6 = entries::ipv6_addresses(&endpoint.spec.addresses)
            .map(|a| Endpoint6Key::new(a.octets()));
        self.endpoints6.remove(v6, ifindex, errors);
        let ifname = &endpoint.spec.host_ifname;
        if let Err(e) = self.veths.remove(&ifindex)
            && !is_not_found(&e)
        {
            errors.push(map_error("remove veth", ifname)(e));
        }
        if let Err(e) = self.counters.remove(&ifindex)
            && !is_not_found(&e)
        {
            errors.push(map_error("remove counters", ifname)(e));
        }
        self.keeper.queue_removal(ifindex);
        self.isolation.remove(&ifindex);
    }

    /// Sets the `mask` bits of the flags of every entry of the endpoint
    /// behind `ifindex` (address entries of both families, veth entry) to
    /// `bits`.
    pub(super) fn set_flags(&mut self, ifindex: u32, mask: u32, bits: u32) -> Result<(), BpfError> {
        let update = |info: EndpointInfo| EndpointInfo {
            flags: (info.flags & !mask) | (bits & mask),
            ..info
        };
        let v4: Vec<_> = self
            .entries()?
            .into_iter()
            .filter(|(_, i)| i.ifindex == ifindex)
            .collect();
        self.endpoints
            .write(v4.into_iter().map(|(k, i)| (k, update(i))).collect())?;
        let v6: Vec<_> = self
            .entries6()?
            .into_iter()
            .filter(|(_, i)| i.ifindex == ifindex)
            .collect();
        self.endpoints6
            .write(v6.into_iter().map(|(k, i)| (k, update(i))).collect())?;
        if let Some(info) = self.veth(ifindex) {
            self.veths
                .insert(ifindex, update(info), 0)
                .map_err(map_error("update veth", ifindex))?;
        }
        Ok(())
    }

    /// Removes every entry, counter and flows table that `endpoints` do not
    /// account for;
    /// returns the addresses of entries that belong to no endpoint.
    pub(super) fn remove_unknown(
        &mut self,
        endpoints: &[Endpoint],
    ) -> Result<BTreeSet<String>, BpfError> {
        let bits: BTreeMap<u32, u32> = endpoints
            .iter()
            .map(|e| (e.spec.host_ifindex, self.isolation_of(e.spec.host_ifindex)))
            .collect();
        let isolation = |e: &Endpoint| bits.get(&e.spec.host_ifindex).copied().unwrap_or(0);
        let v4: BTreeMap<_, _> = endpoints
            .iter()
            .flat_map(|e| entries::ipv4_entries(e, isolation(e)))
            .collect();
        let v6: BTreeMap<_, _> = endpoints
            .iter()
            .flat_map(|e| entries::ipv6_entries(e, isolation(e)))
            .collect();
        let mut removed = self.endpoints.remove_unknown(&v4)?;
        removed.extend(self.endpoints6.remove_unknown(&v6)?);

        let wanted: BTreeMap<u32, EndpointInfo> = endpoints
            .iter()
            .map(|e| (e.spec.host_ifindex, entries::endpoint_info(e, isolation(e))))
            .collect();
        let veths: Vec<u32> = self.veths.keys().filter_map(Result::ok).collect();
        for ifindex in veths {
            if wanted.get(&ifindex) != self.veth(ifindex).as_ref() {
                // Unknown or outdated: attach writes the right one back.
                let _ = self.veths.remove(&ifindex);
            }
        }
        let ifindexes: Vec<u32> = self.counters.keys().filter_map(Result::ok).collect();
        for ifindex in ifindexes {
            if !wanted.contains_key(&ifindex) {
                let _ = self.counters.remove(&ifindex);
            }
        }
        let ifindexes = wanted.keys().copied().collect();
        self.flows.remove_unknown(&ifindexes);
        self.policy.flows.remove_unknown(&ifindexes);
        Ok(removed)
    }
}
