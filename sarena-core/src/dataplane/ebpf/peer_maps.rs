//! eBPF host routing's maps (see `sarena_common::peers`): the other nodes'
//! pod CIDRs the programs route to and from directly
//! (`SARENA_PEER_PODS`), and what those paths did (`SARENA_NODE_COUNTERS`).

use std::collections::BTreeSet;

use aya::Ebpf;
use aya::maps::lpm_trie::LpmTrie;
use aya::maps::{Map, MapData, PerCpuArray};
use ipnet::IpNet;
use sarena_common::peers::{NODE_COUNTERS_MAP, NodeCounters, PEER_PODS_MAP, PeerPodsValue};

use super::AyaDataplane;
use super::error::{BpfError, is_not_found};
use super::maps::map_error;
use super::policy_maps::{IpcacheData, insert_error, ipcache_key, ipcache_prefix};
use crate::dataplane::DataplaneError;

/// The two maps, as pinned.
pub(super) struct PeerMaps {
    pods: LpmTrie<MapData, IpcacheData, PeerPodsValue>,
    counters: PerCpuArray<MapData, NodeCounters>,
}

/// What [`AyaDataplane::set_peer_pods`] changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PeerPodsChange {
    /// Prefixes added.
    pub added: Vec<IpNet>,
    /// Prefixes removed.
    pub removed: Vec<IpNet>,
}

impl PeerMaps {
    /// Takes both maps out of the loaded object.
    pub(super) fn take(ebpf: &mut Ebpf) -> Result<Self, BpfError> {
        let pods: Map = ebpf
            .take_map(PEER_PODS_MAP)
            .ok_or(BpfError::NoMap { map: PEER_PODS_MAP })?;
        let counters: Map = ebpf.take_map(NODE_COUNTERS_MAP).ok_or(BpfError::NoMap {
            map: NODE_COUNTERS_MAP,
        })?;
        Ok(PeerMaps {
            pods: LpmTrie::try_from(pods).map_err(map_error("open map", PEER_PODS_MAP))?,
            counters: PerCpuArray::try_from(counters)
                .map_err(map_error("open map", NODE_COUNTERS_MAP))?,
        })
    }

    /// The prefixes in the map (keys no user space wrote are skipped).
    fn current(&self) -> Result<BTreeSet<IpNet>, BpfError> {
        let mut found = BTreeSet::new();
        for key in self.pods.keys() {
            let key = key.map_err(map_error("list", PEER_PODS_MAP))?;
            if let Some(prefix) = ipcache_prefix(&key) {
                found.insert(prefix);
            }
        }
        Ok(found)
    }

    /// Makes the map hold exactly `cidrs` (host bits ignored): new ones
    /// first, then the ones gone.
    fn set(&mut self, cidrs: &[IpNet]) -> Result<PeerPodsChange, BpfError> {
        let want: BTreeSet<IpNet> = cidrs.iter().map(IpNet::trunc).collect();
        let have = self.current()?;
        let mut change = PeerPodsChange::default();
        for prefix in want.difference(&have) {
            self.pods
                .insert(&ipcache_key(*prefix), PeerPodsValue::default(), 0)
                .map_err(insert_error("insert", PEER_PODS_MAP, prefix))?;
            change.added.push(*prefix);
        }
        for prefix in have.difference(&want) {
            match self.pods.remove(&ipcache_key(*prefix)) {
                Ok(()) => change.removed.push(*prefix),
                Err(e) if is_not_found(&e) => {}
                Err(e) => return Err(map_error("remove", prefix)(e)),
            }
        }
        Ok(change)
    }

    /// The counters, summed over CPUs.
    fn counters(&self) -> Result<NodeCounters, BpfError> {
        let values = self
            .counters
            .get(&0, 0)
            .map_err(map_error("read", NODE_COUNTERS_MAP))?;
        let mut sum = NodeCounters::default();
        for v in values.iter() {
            sum.add(v);
        }
        Ok(sum)
    }
}

impl AyaDataplane {
    /// Makes `cidrs` the other nodes' pod CIDRs that `from_container` sends
    /// straight to the network and `from_network` delivers from. The
    /// devices they are reached by must have `from_network` and
    /// `to_network` first ([`AyaDataplane::attach_network_hook`]), so the
    /// host stack's flows to those pods are recorded before any packet
    /// takes the direct path. Never this node's own pod networks: a packet
    /// from the network claiming a local pod's address is left to the host
    /// stack.
    pub fn set_peer_pods(&self, cidrs: &[IpNet]) -> Result<PeerPodsChange, DataplaneError> {
        Ok(self.lock().peers.set(cidrs)?)
    }

    /// The other nodes' pod CIDRs the programs route to directly.
    pub fn peer_pods(&self) -> Result<Vec<IpNet>, DataplaneError> {
        Ok(self.lock().peers.current()?.into_iter().collect())
    }

    /// What eBPF host routing did on this node since the map was created.
    pub fn node_counters(&self) -> Result<NodeCounters, DataplaneError> {
        Ok(self.lock().peers.counters()?)
    }
}
