//! The host-stack flows map (`SARENA_HOST_FLOWS_V2`): host ifindex → that
//! endpoint's own flows table, an LRU hash of
//! [`MAX_HOST_FLOWS_PER_ENDPOINT`](sarena_common::MAX_HOST_FLOWS_PER_ENDPOINT)
//! entries that the programs fill with the flows the endpoint started (see
//! `sarena_common::FlowKey`).
//!
//! The tables are created here, one per endpoint before its programs are
//! attached, and put into the pinned outer map, which holds them across
//! daemon restarts; removing an endpoint removes its table, which the kernel
//! frees with the last program using it. Both happen off the dataplane's
//! lock (`flow_keeper.rs`).
//! Being one LRU per endpoint is what bounds a pod to its own table: a flood
//! evicts the flooder's own least recently used flows, never another pod's
//! (issue 25). The cost is preallocated per endpoint (docs/security.md).

use std::collections::BTreeSet;

use aya::Ebpf;
use aya::maps::{HashMap as BpfHashMap, HashOfMaps, Map, MapData};
use sarena_common::layouts::{HOST_FLOWS_TABLE, MapLayout};
use sarena_common::{FlowKey, FlowState, HOST_FLOWS_MAP};

use super::AyaDataplane;
use super::error::{BpfError, is_not_found, map_errno};
use super::maps::map_error;
use crate::api::Endpoint;
use crate::dataplane::DataplaneError;

/// `BPF_NOEXIST`: an update that only creates.
const BPF_NOEXIST: u64 = 1;

/// The name the kernel shows for each endpoint's table (`bpftool map`).
pub(super) const HOST_TABLE_NAME: &str = "sarena_flows";

/// The outer map, as pinned (the host-stack flows', or another hash of
/// per-endpoint LRU tables: NetworkPolicy's answerable flows).
pub(super) struct FlowTables {
    outer: HashOfMaps<MapData, u32, MapData>,
    /// The layout of each inner table.
    layout: MapLayout,
    /// The name the kernel shows for each inner table.
    table_name: &'static str,
}

impl FlowTables {
    /// Takes the host-stack flows map out of the loaded object.
    pub(super) fn take(ebpf: &mut Ebpf) -> Result<Self, BpfError> {
        Self::take_named(ebpf, HOST_FLOWS_MAP, HOST_FLOWS_TABLE, HOST_TABLE_NAME)
    }

    /// Takes the hash of maps `name`, whose inner tables have `layout`, out
    /// of the loaded object.
    pub(super) fn take_named(
        ebpf: &mut Ebpf,
        name: &'static str,
        layout: MapLayout,
        table_name: &'static str,
    ) -> Result<Self, BpfError> {
        let map = ebpf.take_map(name).ok_or(BpfError::NoMap { map: name })?;
        let outer = HashOfMaps::try_from(map).map_err(map_error("open map", name))?;
        Ok(FlowTables {
            outer,
            layout,
            table_name,
        })
    }

    /// Opens the hash of maps `name` pinned at `path` again: a handle of its
    /// own, for work done without the dataplane's lock (`flow_keeper.rs`).
    pub(super) fn open_pinned(
        path: &std::path::Path,
        name: &'static str,
        layout: MapLayout,
        table_name: &'static str,
    ) -> Result<Self, BpfError> {
        let data = MapData::from_pin(path).map_err(map_error("open pinned map", name))?;
        let map = Map::from_map_data(data).map_err(map_error("open pinned map", name))?;
        let outer = HashOfMaps::try_from(map).map_err(map_error("open map", name))?;
        Ok(FlowTables {
            outer,
            layout,
            table_name,
        })
    }

    /// Whether `ifindex` has a table.
    pub(super) fn has_table(&self, ifindex: u32) -> Result<bool, BpfError> {
        Ok(self.table(ifindex)?.is_some())
    }

    /// The table of `ifindex`, if it has one.
    fn table(&self, ifindex: u32) -> Result<Option<MapData>, BpfError> {
        match self.outer.get(&ifindex, 0) {
            Ok(table) => Ok(Some(table)),
            Err(e) if is_not_found(&e) => Ok(None),
            Err(e) => Err(map_error("find flows table", ifindex)(e)),
        }
    }

    /// Gives the endpoint behind `ifindex` a table unless it has one (a
    /// table left by an earlier endpoint of the same ifindex is kept: an
    /// entry too many only sends a flow through the host stack). `true`
    /// when it created one.
    pub(super) fn ensure(&mut self, ifindex: u32, ifname: &str) -> Result<bool, BpfError> {
        if self.has_table(ifindex)? {
            return Ok(false);
        }
        let table = self.new_table(ifname)?;
        self.insert_new(ifindex, &table, ifname)
    }

    /// A new, empty inner table for the endpoint `ifname`.
    pub(super) fn new_table(&self, ifname: &str) -> Result<MapData, BpfError> {
        create_table(self.layout, self.table_name, ifname)
    }

    /// Puts `table` in as `ifindex`'s unless it has one already (another
    /// attach of the same ifindex was first: its table, maybe in use, is
    /// kept). `true` when `table` went in. Returns after the kernel's grace
    /// period; the table is visible before (see `flow_keeper.rs`).
    pub(super) fn insert_new(
        &mut self,
        ifindex: u32,
        table: &MapData,
        ifname: &str,
    ) -> Result<bool, BpfError> {
        match self.outer.insert(ifindex, table, BPF_NOEXIST) {
            Ok(()) => Ok(true),
            Err(e) if map_errno(&e) == Some(libc::EEXIST) => Ok(false),
            Err(e) => Err(map_error("insert flows table", ifname)(e)),
        }
    }

    /// Removes the table of `ifindex`; failures are added to `errors`.
    pub(super) fn remove(&mut self, ifindex: u32, ifname: &str, errors: &mut Vec<BpfError>) {
        if let Err(e) = self.outer.remove(&ifindex)
            && !is_not_found(&e)
        {
            errors.push(map_error("remove flows table", ifname)(e));
        }
    }

    /// Removes the tables of every ifindex not in `wanted`.
    pub(super) fn remove_unknown(&mut self, wanted: &BTreeSet<u32>) {
        let ifindexes: Vec<u32> = self.outer.keys().filter_map(Result::ok).collect();
        for ifindex in ifindexes {
            if !wanted.contains(&ifindex) {
                let _ = self.outer.remove(&ifindex);
            }
        }
    }

    /// Every entry of the table of `ifindex`; `None` when it has none.
    pub(super) fn entries<V: aya::Pod>(
        &self,
        ifindex: u32,
    ) -> Result<Option<Vec<(FlowKey, V)>>, BpfError> {
        let Some(table) = self.table(ifindex)? else {
            return Ok(None);
        };
        let table: BpfHashMap<MapData, FlowKey, V> =
            BpfHashMap::try_from(Map::LruHashMap(table))
                .map_err(map_error("open flows table", ifindex))?;
        let mut out = Vec::new();
        for item in table.iter() {
            match item {
                Ok(entry) => out.push(entry),
                // Evicted between the key and its value.
                Err(e) if is_not_found(&e) => {}
                Err(e) => return Err(map_error("read flows table", ifindex)(e)),
            }
        }
        Ok(Some(out))
    }
}

/// A new, empty inner table of `layout`, shown as `table_name`, for `what`
/// (the endpoint's interface, in errors).
pub(super) fn create_table(
    layout: MapLayout,
    table_name: &str,
    what: &str,
) -> Result<MapData, BpfError> {
    let definition = aya_obj::Map::new_from_params(
        layout.map_type,
        layout.key_size,
        layout.value_size,
        layout.max_entries,
        layout.flags,
    );
    MapData::create(definition, table_name, None).map_err(map_error("create flows table", what))
}

impl AyaDataplane {
    /// Gives `endpoint` its two flows tables before its entries are
    /// written, without the lock and on a blocking thread (see
    /// `flow_keeper.rs`).
    pub(super) async fn prepare_flow_tables(
        &self,
        endpoint: &Endpoint,
    ) -> Result<(), DataplaneError> {
        let tables = std::sync::Arc::clone(&self.tables);
        let ifindex = endpoint.spec.host_ifindex;
        let ifname = endpoint.spec.host_ifname.clone();
        match tokio::task::spawn_blocking(move || tables.prepare(ifindex, &ifname)).await {
            Ok(prepared) => Ok(prepared?),
            // Cancelled or panicked: `Maps::write` creates what is missing.
            Err(_) => Ok(()),
        }
    }

    /// Waits until the flows tables of the endpoints detached so far are
    /// out of their outer maps (detach queues their removal; see
    /// `flow_keeper.rs`). Blocking.
    pub fn wait_for_flow_table_removals(&self) {
        self.tables.wait_idle();
    }

    /// The flows the endpoint whose host veth is `host_ifindex` started and
    /// the host stack handled (its own flows table: each key is the direction
    /// the other pod answers in); `None` when it has no table.
    pub fn host_flows(
        &self,
        host_ifindex: u32,
    ) -> Result<Option<Vec<(FlowKey, FlowState)>>, DataplaneError> {
        Ok(self.lock().maps.flows.entries(host_ifindex)?)
    }
}
