//! NetworkPolicy's maps (see `sarena_common::policy`): `SARENA_IPCACHE`
//! (address prefix → identity), `SARENA_POLICY` (each endpoint's allow
//! entries) and `SARENA_POLICY_FLOWS` (each endpoint's answerable flows, an
//! LRU table per endpoint created at attach and removed at detach, as the
//! host-stack flows'). [`PolicyMaps`] is what the policy loader writes
//! through ([`AyaDataplane::policy_maps`]).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use aya::Ebpf;
use aya::maps::lpm_trie::{Key, LpmTrie};
use aya::maps::{Map, MapData, MapError};
use ipnet::IpNet;
use sarena_common::policy::{
    DIRECTION_EGRESS, DIRECTION_INGRESS, IPCACHE_MAP, POLICY_FLOWS_MAP, POLICY_FLOWS_TABLE,
    POLICY_MAP, POLICY_PREFIX_ANY_PORT, POLICY_PREFIX_ANY_PROTO, PolicyFlow, PolicyValue,
};
use sarena_common::policy::{IpcacheKey, IpcacheValue, PolicyKey};
use sarena_common::{FLOW_FAMILY_IPV4, FLOW_FAMILY_IPV6, FlowKey};

use super::AyaDataplane;
use super::error::{BpfError, is_not_found, map_errno};
use super::flows::FlowTables;
use super::maps::map_error;
use crate::dataplane::DataplaneError;
use crate::policy::{Direction, EntryKey, IpcacheEntry, RuleId};

/// An ipcache key without its prefix length: family, 3 zero bytes, address.
pub(super) type IpcacheData = [u8; 20];
/// A policy key without its prefix length: ifindex, direction, identity,
/// protocol, port (big-endian).
type PolicyData = [u8; 12];

/// The name the kernel shows for each endpoint's answerable-flows table.
pub(super) const POLICY_TABLE_NAME: &str = "sarena_pflows";

/// NetworkPolicy's three maps, as pinned.
pub struct PolicyMaps {
    ipcache: LpmTrie<MapData, IpcacheData, IpcacheValue>,
    policy: LpmTrie<MapData, PolicyData, PolicyValue>,
    /// Each endpoint's answerable-flows table.
    pub(super) flows: FlowTables,
}

impl std::fmt::Debug for PolicyMaps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolicyMaps").finish_non_exhaustive()
    }
}

/// A failed insert of `object` into `map`: [`BpfError::MapFull`] when the
/// map is full, [`BpfError::Map`] otherwise.
pub(super) fn insert_error(
    call: &'static str,
    map: &'static str,
    object: impl ToString,
) -> impl FnOnce(MapError) -> BpfError {
    move |source| {
        if map_errno(&source) == Some(libc::ENOSPC) {
            BpfError::MapFull {
                call,
                map,
                object: object.to_string(),
                source: Box::new(source),
            }
        } else {
            map_error(call, object)(source)
        }
    }
}

fn lpm<K: aya::Pod, V: aya::Pod>(
    ebpf: &mut Ebpf,
    name: &'static str,
) -> Result<LpmTrie<MapData, K, V>, BpfError> {
    let map: Map = ebpf.take_map(name).ok_or(BpfError::NoMap { map: name })?;
    LpmTrie::try_from(map).map_err(map_error("open map", name))
}

/// The trie key of `prefix` (its host bits cleared).
pub(super) fn ipcache_key(prefix: IpNet) -> Key<IpcacheData> {
    let prefix = prefix.trunc();
    let key = match prefix.addr() {
        IpAddr::V4(a) => IpcacheKey::prefix4(a.octets(), u32::from(prefix.prefix_len())),
        IpAddr::V6(a) => IpcacheKey::prefix6(a.octets(), u32::from(prefix.prefix_len())),
    };
    let mut data = [0u8; 20];
    data[0] = key.family;
    data[4..].copy_from_slice(&key.addr);
    Key::new(key.prefixlen, data)
}

/// The prefix of a trie key; `None` for a key no [`ipcache_key`] makes.
pub(super) fn ipcache_prefix(key: &Key<IpcacheData>) -> Option<IpNet> {
    let data = key.data();
    let len = u8::try_from(key.prefix_len().checked_sub(32)?).ok()?;
    let addr = match data[0] {
        FLOW_FAMILY_IPV4 => IpAddr::V4(Ipv4Addr::new(data[4], data[5], data[6], data[7])),
        FLOW_FAMILY_IPV6 => {
            let mut a = [0u8; 16];
            a.copy_from_slice(&data[4..]);
            IpAddr::V6(Ipv6Addr::from(a))
        }
        _ => return None,
    };
    IpNet::new(addr, len).ok()
}

/// The trie key of `entry` of the endpoint `ifindex` (bits past the prefix
/// cleared); [`BpfError::BadEntry`] for a port prefix past 16 bits.
fn policy_key(ifindex: u32, entry: &EntryKey) -> Result<Key<PolicyData>, BpfError> {
    let direction = match entry.direction {
        Direction::Ingress => DIRECTION_INGRESS,
        Direction::Egress => DIRECTION_EGRESS,
    };
    if entry.port_bits > 16 {
        return Err(BpfError::BadEntry {
            call: "policy entry",
            object: format!("{entry:?} of ifindex {ifindex}"),
            reason: "a port prefix longer than 16 bits",
        });
    }
    let (prefixlen, proto, port) = if entry.proto == 0 {
        (POLICY_PREFIX_ANY_PROTO, 0, 0)
    } else {
        let bits = u32::from(entry.port_bits);
        let mask = if bits == 0 {
            0
        } else {
            u16::MAX << (16 - bits)
        };
        (
            POLICY_PREFIX_ANY_PORT + bits,
            entry.proto,
            entry.port & mask,
        )
    };
    let key = PolicyKey {
        prefixlen,
        ..PolicyKey::lookup(ifindex, direction, entry.peer, proto, port)
    };
    let mut data = [0u8; 12];
    data[..4].copy_from_slice(&key.ifindex);
    data[4] = key.direction;
    data[5..9].copy_from_slice(&key.identity);
    data[9] = key.proto;
    data[10..].copy_from_slice(&key.port);
    Ok(Key::new(key.prefixlen, data))
}

/// The endpoint and entry of a trie key; `None` for a key no
/// [`policy_key`] makes.
fn policy_entry(key: &Key<PolicyData>) -> Option<(u32, EntryKey)> {
    let d = key.data();
    let ifindex = u32::from_be_bytes([d[0], d[1], d[2], d[3]]);
    let direction = match d[4] {
        DIRECTION_INGRESS => Direction::Ingress,
        DIRECTION_EGRESS => Direction::Egress,
        _ => return None,
    };
    let peer = u32::from_be_bytes([d[5], d[6], d[7], d[8]]);
    let len = key.prefix_len();
    let (proto, port, port_bits) = if len == POLICY_PREFIX_ANY_PROTO {
        (0, 0, 0)
    } else {
        let bits = len.checked_sub(POLICY_PREFIX_ANY_PORT)?;
        (
            d[9],
            u16::from_be_bytes([d[10], d[11]]),
            u8::try_from(bits).ok()?,
        )
    };
    if port_bits > 16 {
        return None;
    }
    let entry = EntryKey {
        direction,
        peer,
        proto,
        port,
        port_bits,
    };
    Some((ifindex, entry))
}

impl PolicyMaps {
    /// Takes the three maps out of the loaded object.
    pub(super) fn take(ebpf: &mut Ebpf) -> Result<Self, BpfError> {
        Ok(PolicyMaps {
            ipcache: lpm(ebpf, IPCACHE_MAP)?,
            policy: lpm(ebpf, POLICY_MAP)?,
            flows: FlowTables::take_named(
                ebpf,
                POLICY_FLOWS_MAP,
                POLICY_FLOWS_TABLE,
                POLICY_TABLE_NAME,
            )?,
        })
    }

    /// Gives `prefix` (host bits ignored) the identity and flags of `e`.
    pub fn set_ipcache(&mut self, prefix: IpNet, e: IpcacheEntry) -> Result<(), BpfError> {
        let value = IpcacheValue {
            identity: e.identity,
            flags: e.flags,
        };
        self.ipcache
            .insert(&ipcache_key(prefix), value, 0)
            .map_err(insert_error("set ipcache entry", IPCACHE_MAP, prefix))
    }

    /// Removes the entry of `prefix`; an absent one is fine.
    pub fn remove_ipcache(&mut self, prefix: IpNet) -> Result<(), BpfError> {
        match self.ipcache.remove(&ipcache_key(prefix)) {
            Err(e) if !is_not_found(&e) => Err(map_error("remove ipcache entry", prefix)(e)),
            _ => Ok(()),
        }
    }

    /// Every ipcache entry (for a restarted loader to diff against).
    pub fn ipcache(&self) -> Result<Vec<(IpNet, IpcacheEntry)>, BpfError> {
        let mut out = Vec::new();
        for item in self.ipcache.iter() {
            let (key, value) = match item {
                Ok(kv) => kv,
                // Removed between the key and its value.
                Err(e) if is_not_found(&e) => continue,
                Err(e) => return Err(map_error("list", IPCACHE_MAP)(e)),
            };
            if let Some(prefix) = ipcache_prefix(&key) {
                let entry = IpcacheEntry {
                    identity: value.identity,
                    flags: value.flags,
                };
                out.push((prefix, entry));
            }
        }
        Ok(out)
    }

    /// Writes the allow entry `key` of the endpoint behind `ifindex`.
    pub fn set_entry(
        &mut self,
        ifindex: u32,
        key: &EntryKey,
        rule: RuleId,
    ) -> Result<(), BpfError> {
        let value = PolicyValue {
            rule: rule.0,
            flags: 0,
        };
        let object = || format!("{key:?} of ifindex {ifindex}");
        self.policy
            .insert(&policy_key(ifindex, key)?, value, 0)
            .map_err(insert_error("set policy entry", POLICY_MAP, object()))
    }

    /// Removes the allow entry `key` of the endpoint behind `ifindex`; an
    /// absent one is fine.
    pub fn remove_entry(&mut self, ifindex: u32, key: &EntryKey) -> Result<(), BpfError> {
        match self.policy.remove(&policy_key(ifindex, key)?) {
            Err(e) if !is_not_found(&e) => Err(map_error(
                "remove policy entry",
                format!("{key:?} of ifindex {ifindex}"),
            )(e)),
            _ => Ok(()),
        }
    }

    /// Every allow entry of every endpoint (for a restarted loader).
    pub fn entries(&self) -> Result<Vec<(u32, EntryKey, RuleId)>, BpfError> {
        let mut out = Vec::new();
        for item in self.policy.iter() {
            let (key, value) = match item {
                Ok(kv) => kv,
                Err(e) if is_not_found(&e) => continue,
                Err(e) => return Err(map_error("list", POLICY_MAP)(e)),
            };
            if let Some((ifindex, entry)) = policy_entry(&key) {
                out.push((ifindex, entry, RuleId(value.rule)));
            }
        }
        Ok(out)
    }

    /// The answerable flows of the endpoint behind `ifindex` (each key is
    /// the direction of an answer); `None` when it has no table.
    pub fn answerable_flows(
        &self,
        ifindex: u32,
    ) -> Result<Option<Vec<(FlowKey, PolicyFlow)>>, BpfError> {
        self.flows.entries(ifindex)
    }
}

impl AyaDataplane {
    /// Runs `f` on NetworkPolicy's maps, under the dataplane's lock (keep
    /// it short: attach and detach wait for it).
    pub fn policy_maps<R>(&self, f: impl FnOnce(&mut PolicyMaps) -> R) -> R {
        f(&mut self.lock().maps.policy)
    }

    /// Sets the isolation bits (`sarena_common::policy::ENDPOINT_F_*_ISOLATED`)
    /// of the attached endpoint whose host veth is `host_ifindex` in every
    /// entry the programs read them from (its address entries of both
    /// families, and its veth's), the other flags kept. A re-attach writes
    /// the entries without them.
    pub fn set_isolation(
        &self,
        host_ifindex: u32,
        ingress: bool,
        egress: bool,
    ) -> Result<(), DataplaneError> {
        use sarena_common::policy::{ENDPOINT_F_EGRESS_ISOLATED, ENDPOINT_F_INGRESS_ISOLATED};
        let mut bits = 0;
        if ingress {
            bits |= ENDPOINT_F_INGRESS_ISOLATED;
        }
        if egress {
            bits |= ENDPOINT_F_EGRESS_ISOLATED;
        }
        let mask = ENDPOINT_F_INGRESS_ISOLATED | ENDPOINT_F_EGRESS_ISOLATED;
        let mut state = self.lock();
        // Kept by later rewrites of the entries (an attach, a reconcile).
        state.maps.isolation.insert(host_ifindex, bits);
        Ok(state.maps.set_flags(host_ifindex, mask, bits)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipcache_keys_round_trip_and_drop_host_bits() {
        for (given, stored) in [
            ("10.1.2.3/16", "10.1.0.0/16"),
            ("0.0.0.0/0", "0.0.0.0/0"),
            ("fd00::5/128", "fd00::5/128"),
            ("fd00:1:2::9/48", "fd00:1:2::/48"),
            ("::/0", "::/0"),
        ] {
            let key = ipcache_key(given.parse().unwrap());
            assert_eq!(
                ipcache_prefix(&key),
                Some(stored.parse().unwrap()),
                "{given}"
            );
        }
        let v4 = ipcache_key("10.1.0.0/16".parse().unwrap());
        assert_eq!(v4.prefix_len(), 48);
        assert_eq!(v4.data()[..8], [4, 0, 0, 0, 10, 1, 0, 0]);
    }

    #[test]
    fn policy_keys_stop_where_the_entry_does() {
        let any = EntryKey {
            direction: Direction::Ingress,
            peer: 300,
            proto: 0,
            port: 0,
            port_bits: 0,
        };
        let key = policy_key(7, &any).unwrap();
        assert_eq!(key.prefix_len(), POLICY_PREFIX_ANY_PROTO);
        assert_eq!(key.data(), [0, 0, 0, 7, 1, 0, 0, 1, 44, 0, 0, 0]);
        let range = EntryKey {
            direction: Direction::Egress,
            proto: 6,
            port: 8080 | 7,
            port_bits: 13,
            ..any
        };
        let key = policy_key(7, &range).unwrap();
        assert_eq!(key.prefix_len(), POLICY_PREFIX_ANY_PORT + 13);
        assert_eq!(
            policy_entry(&key),
            Some((
                7,
                EntryKey {
                    port: 8080,
                    ..range
                }
            ))
        );
        assert_eq!(policy_entry(&policy_key(9, &any).unwrap()), Some((9, any)));
        let bad = EntryKey {
            port_bits: 17,
            ..range
        };
        assert!(matches!(
            policy_key(7, &bad),
            Err(BpfError::BadEntry { .. })
        ));
    }
}
