//! NetworkPolicy's maps: which identity an address has, which identities
//! and ports each endpoint may talk to, and the flows it may answer.
//!
//! - [`IPCACHE_MAP`]: an LPM trie, address prefix → [`IpcacheValue`]. Every
//!   pod of the cluster (all nodes) has a host entry with its identity;
//!   every prefix a policy's `ipBlock` names (and its `except`s) has an
//!   entry with an identity of its own; this node's own addresses have
//!   [`IDENTITY_HOST`]; an address no entry covers is [`IDENTITY_WORLD`].
//!   Service addresses (ClusterIPs, external IPs, load-balancer IPs) and
//!   this node's addresses carry [`IPCACHE_F_TRANSLATED`]: the host stack
//!   may translate traffic to them (kube-proxy's DNAT), so the egress
//!   decision of a pod's packet to one of them is deferred until after
//!   translation ([`MARK_EGRESS_DEFERRED`]), and a packet *from* one of them
//!   to a pod is a translated reply (conntrack's reverse NAT is the only
//!   way such a packet reaches a pod).
//! - [`POLICY_MAP`]: an LPM trie, [`PolicyKey`] → [`PolicyValue`]: the
//!   allow entries of every endpoint of this node, per direction, peer
//!   identity (0: any peer), protocol (0: any, and any port) and port
//!   prefix (a port range is split into prefixes).
//! - [`POLICY_FLOWS_MAP`]: per endpoint (host ifindex → an LRU hash of
//!   [`MAX_POLICY_FLOWS_PER_ENDPOINT`] entries, like the host-stack flows
//!   map): the flows an isolated endpoint may answer, recorded when the
//!   packet that opened them was allowed ([`FlowKey`] of the answer's
//!   direction → [`PolicyFlow`]).
//!
//! Isolation is per endpoint and direction, in [`crate::EndpointInfo::flags`]
//! ([`ENDPOINT_F_INGRESS_ISOLATED`], [`ENDPOINT_F_EGRESS_ISOLATED`]): an
//! endpoint no policy selects in a direction is not checked in it at all.

use crate::FlowKey;

/// Name of the identity map: [`IpcacheKey`] → [`IpcacheValue`] (LPM trie,
/// pinned).
pub const IPCACHE_MAP: &str = "SARENA_IPCACHE";
/// Name of the allow-entry map: [`PolicyKey`] → [`PolicyValue`] (LPM trie,
/// pinned).
pub const POLICY_MAP: &str = "SARENA_POLICY";
/// Name of the per-endpoint answerable-flows map: host ifindex (`u32`) →
/// an LRU hash [`FlowKey`] → [`PolicyFlow`] of
/// [`MAX_POLICY_FLOWS_PER_ENDPOINT`] entries (hash of maps, pinned; inner
/// maps created by user space at attach, like the host-stack flows').
pub const POLICY_FLOWS_MAP: &str = "SARENA_POLICY_FLOWS";

/// Name of the program on the tc egress of the node's network devices (the
/// vxlan device, the uplink): the deferred egress decision
/// ([`MARK_EGRESS_DEFERRED`]) of a pod's packet leaving the node.
pub const TO_NETWORK_PROG: &str = "to_network";

/// Capacity of [`IPCACHE_MAP`]: pod addresses of the whole cluster, policy
/// prefixes, Service addresses.
pub const MAX_IPCACHE_ENTRIES: u32 = 262_144;
/// Capacity of [`POLICY_MAP`]: allow entries of every endpoint of this node.
pub const MAX_POLICY_ENTRIES: u32 = 262_144;
/// Capacity of each endpoint's answerable-flows table.
pub const MAX_POLICY_FLOWS_PER_ENDPOINT: u32 = 4096;
/// An answerable flow not seen for this long (nanoseconds) is no longer
/// answerable: the programs treat the entry as absent.
pub const POLICY_FLOW_TIMEOUT_NS: u64 = 6 * 3600 * 1_000_000_000;
/// The programs rewrite a [`PolicyFlow::last_seen_ns`] at most this often.
pub const POLICY_FLOW_REFRESH_NS: u64 = 1_000_000_000;

/// [`crate::EndpointInfo::flags`]: a policy selects the endpoint for
/// ingress; what enters it must be allowed by an entry or answer a flow it
/// opened.
/// (Bit 1 is [`crate::ENDPOINT_F_INGRESS_PACED`].)
pub const ENDPOINT_F_INGRESS_ISOLATED: u32 = 1 << 2;
/// [`crate::EndpointInfo::flags`]: a policy selects the endpoint for
/// egress; what leaves it must be allowed by an entry or answer a flow
/// opened towards it.
pub const ENDPOINT_F_EGRESS_ISOLATED: u32 = 1 << 3;

/// Identity 0: no identity; in a [`PolicyKey`], any peer.
pub const IDENTITY_ANY: u32 = 0;
/// This node's own addresses. Traffic between a pod and its own node is
/// always allowed (kubelet's probes).
pub const IDENTITY_HOST: u32 = 1;
/// An address no ipcache entry covers.
pub const IDENTITY_WORLD: u32 = 2;
/// The first identity user space allocates (label sets, prefixes).
pub const IDENTITY_FIRST_ALLOCATED: u32 = 256;

/// [`IpcacheValue::flags`]: the host stack may translate traffic to this
/// address (a Service address, this node's own).
pub const IPCACHE_F_TRANSLATED: u32 = 1;
/// [`IpcacheValue::flags`]: a pod's address.
pub const IPCACHE_F_POD: u32 = 1 << 1;

/// `skb->mark` bit set by `from_container` on a packet from a pod whose
/// egress is isolated, sent to an address the host stack may translate:
/// its egress decision is taken after translation, where it leaves the
/// node or enters a local pod. Chosen clear of kube-proxy's (0x4000,
/// 0x8000) and of the bits Sarena's nftables rules use.
pub const MARK_EGRESS_DEFERRED: u32 = 0x0020_0000;

/// [`PolicyKey::direction`]: into the endpoint.
pub const DIRECTION_INGRESS: u8 = 1;
/// [`PolicyKey::direction`]: out of the endpoint.
pub const DIRECTION_EGRESS: u8 = 2;

/// Bits of a [`PolicyKey`] before the protocol: ifindex, direction, identity.
pub const POLICY_PREFIX_ANY_PROTO: u32 = 32 + 8 + 32;
/// Bits of a [`PolicyKey`] up to the protocol (any port of it).
pub const POLICY_PREFIX_ANY_PORT: u32 = POLICY_PREFIX_ANY_PROTO + 8;
/// Bits of a fully specified [`PolicyKey`] (the lookup key).
pub const POLICY_PREFIX_FULL: u32 = POLICY_PREFIX_ANY_PORT + 16;

/// Key of [`IPCACHE_MAP`] (LPM trie): `prefixlen` counts the 32 bits of
/// `family` and `pad`, then the address's.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct IpcacheKey {
    /// 32 + the address prefix length.
    pub prefixlen: u32,
    /// [`crate::FLOW_FAMILY_IPV4`] or [`crate::FLOW_FAMILY_IPV6`].
    pub family: u8,
    /// Zero.
    pub pad: [u8; 3],
    /// The address (network order; IPv4 in the first 4 bytes, the rest zero).
    pub addr: [u8; 16],
}

impl IpcacheKey {
    /// The lookup key of an IPv4 address.
    pub const fn host4(addr: [u8; 4]) -> Self {
        Self::prefix4(addr, 32)
    }

    /// The key of the IPv4 prefix `addr/len` (`addr` already masked).
    pub const fn prefix4(addr: [u8; 4], len: u32) -> Self {
        let mut a = [0; 16];
        a[0] = addr[0];
        a[1] = addr[1];
        a[2] = addr[2];
        a[3] = addr[3];
        IpcacheKey {
            prefixlen: 32 + len,
            family: crate::FLOW_FAMILY_IPV4,
            pad: [0; 3],
            addr: a,
        }
    }

    /// The lookup key of an IPv6 address.
    pub const fn host6(addr: [u8; 16]) -> Self {
        Self::prefix6(addr, 128)
    }

    /// The key of the IPv6 prefix `addr/len` (`addr` already masked).
    pub const fn prefix6(addr: [u8; 16], len: u32) -> Self {
        IpcacheKey {
            prefixlen: 32 + len,
            family: crate::FLOW_FAMILY_IPV6,
            pad: [0; 3],
            addr,
        }
    }
}

/// Value of [`IPCACHE_MAP`].
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IpcacheValue {
    /// The address's identity.
    pub identity: u32,
    /// `IPCACHE_F_*` bits.
    pub flags: u32,
}

/// Key of [`POLICY_MAP`] (LPM trie). Lookups are fully specified
/// ([`POLICY_PREFIX_FULL`]), once with the peer's identity and once with
/// [`IDENTITY_ANY`]; entries stop at [`POLICY_PREFIX_ANY_PROTO`] (any
/// protocol and port), [`POLICY_PREFIX_ANY_PORT`] (any port of `proto`) or
/// `POLICY_PREFIX_ANY_PORT + n` (ports sharing their first `n` bits).
/// Multi-byte fields are big-endian so that prefixes run over their high
/// bits first.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PolicyKey {
    /// Prefix length in bits, counted from `ifindex`.
    pub prefixlen: u32,
    /// The endpoint's host veth ifindex (big-endian).
    pub ifindex: [u8; 4],
    /// [`DIRECTION_INGRESS`] or [`DIRECTION_EGRESS`].
    pub direction: u8,
    /// The peer's identity (big-endian); [`IDENTITY_ANY`] for any peer.
    pub identity: [u8; 4],
    /// IP protocol (6, 17, 132); 0 with [`POLICY_PREFIX_ANY_PROTO`].
    pub proto: u8,
    /// Port (big-endian): the endpoint's own for ingress, the peer's for egress.
    pub port: [u8; 2],
}

impl PolicyKey {
    /// The fully specified lookup key.
    pub const fn lookup(ifindex: u32, direction: u8, identity: u32, proto: u8, port: u16) -> Self {
        PolicyKey {
            prefixlen: POLICY_PREFIX_FULL,
            ifindex: ifindex.to_be_bytes(),
            direction,
            identity: identity.to_be_bytes(),
            proto,
            port: port.to_be_bytes(),
        }
    }
}

/// Value of [`POLICY_MAP`]: which compiled rule the entry comes from (what
/// `sarena policy explain` and the drop counters name).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PolicyValue {
    /// The rule's number in the daemon's compiled state.
    pub rule: u32,
    /// Zero (reserved).
    pub flags: u32,
}

/// Value of an endpoint's answerable-flows table: the key is the direction
/// the endpoint may now receive or send as an answer.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PolicyFlow {
    /// When the flow was last seen (`bpf_ktime_get_ns`).
    pub last_seen_ns: u64,
    /// [`DIRECTION_INGRESS`] (an answer entering) or [`DIRECTION_EGRESS`]
    /// (an answer leaving).
    pub direction: u8,
    /// Zero.
    pub pad: [u8; 7],
}

/// The layout of each endpoint's answerable-flows table, an inner map of
/// [`POLICY_FLOWS_MAP`]: what user space creates at attach (and what the
/// kernel insists every inner map matches).
pub const POLICY_FLOWS_TABLE: crate::layouts::MapLayout = crate::layouts::MapLayout {
    map_type: crate::layouts::MAP_TYPE_LRU_HASH,
    key_size: core::mem::size_of::<FlowKey>() as u32,
    value_size: core::mem::size_of::<PolicyFlow>() as u32,
    max_entries: MAX_POLICY_FLOWS_PER_ENDPOINT,
    flags: 0,
};

/// The key of the answer to `key`.
pub const fn answer(key: &FlowKey) -> FlowKey {
    key.reversed()
}

#[cfg(feature = "user")]
mod user {
    // SAFETY: plain `#[repr(C)]` data without implicit padding or pointers;
    // every bit pattern is valid (4 + 1 + 3 + 16 = 24 bytes, alignment 4).
    unsafe impl aya::Pod for super::IpcacheKey {}
    // SAFETY: as above (4 + 4 bytes).
    unsafe impl aya::Pod for super::IpcacheValue {}
    // SAFETY: as above (4 + 4 + 1 + 4 + 1 + 2 = 16 bytes, alignment 4).
    unsafe impl aya::Pod for super::PolicyKey {}
    // SAFETY: as above (4 + 4 bytes).
    unsafe impl aya::Pod for super::PolicyValue {}
    // SAFETY: as above (8 + 1 + 7 = 16 bytes, alignment 8).
    unsafe impl aya::Pod for super::PolicyFlow {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_have_no_hidden_padding() {
        assert_eq!(core::mem::size_of::<IpcacheKey>(), 24);
        assert_eq!(core::mem::size_of::<IpcacheValue>(), 8);
        assert_eq!(core::mem::size_of::<PolicyKey>(), 16);
        assert_eq!(core::mem::size_of::<PolicyValue>(), 8);
        assert_eq!(core::mem::size_of::<PolicyFlow>(), 16);
        assert_eq!(POLICY_PREFIX_FULL, 96);
    }

    #[test]
    fn endpoint_flags_are_distinct_bits() {
        let all = [
            crate::ENDPOINT_F_ACTIVE,
            crate::ENDPOINT_F_INGRESS_PACED,
            ENDPOINT_F_INGRESS_ISOLATED,
            ENDPOINT_F_EGRESS_ISOLATED,
        ];
        for (i, a) in all.iter().enumerate() {
            assert_eq!(a.count_ones(), 1);
            for b in &all[i + 1..] {
                assert_eq!(a & b, 0, "{a:#x} {b:#x}");
            }
        }
    }

    #[test]
    fn keys_put_the_high_bits_first() {
        let k = PolicyKey::lookup(7, DIRECTION_EGRESS, 300, 6, 8080);
        assert_eq!(k.ifindex, [0, 0, 0, 7]);
        assert_eq!(k.identity, [0, 0, 1, 44]);
        assert_eq!(k.port, [0x1f, 0x90]);
        let p = IpcacheKey::prefix4([10, 1, 0, 0], 16);
        assert_eq!(p.prefixlen, 48);
        assert_eq!(p.addr[..4], [10, 1, 0, 0]);
    }
}
