//! The lookup key of the address LPM tries (`SARENA_IPCACHE`,
//! `SARENA_PEER_PODS`): `sarena_common::policy::IpcacheKey`, built so that
//! LLVM stores it in whole words.
//!
//! bpf-linker has LLVM lower every `memset` to a call of a byte-loop
//! subprogram, and zeroing a key's padding or an IPv4 address's 12 unused
//! bytes is a `memset` whenever the zeros are written on their own. So the
//! family's word and the address are each written as one value, and the key
//! sits in an 8-aligned stack slot: aya's `Key` is packed, and the eBPF
//! target has no unaligned stores, so it would otherwise be written a byte
//! at a time.

use core::mem::MaybeUninit;

use aya_ebpf::maps::{LpmTrie, lpm_trie::Key};
use sarena_common::{FLOW_FAMILY_IPV4, ipv4_field};

/// `IpcacheKey` without its prefix length: the family in the first byte of
/// a word whose other 3 bytes are zero, then 16 address bytes (IPv4 in the
/// first 4, zeros after). 20 bytes, as the tries' user-space keys.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct AddrKey {
    family: [u8; 4],
    addr: [u8; 16],
}

/// A full-length lookup of one address: `Key<AddrKey>`'s fields, in an
/// 8-aligned slot (see the module's documentation).
#[repr(C, align(8))]
struct AddrLookup {
    prefix_len: u32,
    family: [u8; 4],
    addr: [u8; 16],
}

impl AddrLookup {
    #[inline(always)]
    fn new(family: u8, addr: [u8; 16]) -> Self {
        AddrLookup {
            prefix_len: 32 + 128,
            family: [family, 0, 0, 0],
            addr,
        }
    }

    #[inline(always)]
    fn get<'a, V>(&self, map: &'a LpmTrie<AddrKey, V>) -> Option<&'a V> {
        // SAFETY: `Key<AddrKey>` is packed (alignment 1) and has the same
        // fields at the same offsets (asserted below).
        map.get(unsafe { &*(self as *const AddrLookup).cast::<Key<AddrKey>>() })
    }
}

/// The entry of `map` whose prefix covers `addr` (of `family`, IPv4 in its
/// first 4 bytes, zeros after).
#[inline(always)]
pub fn get<'a, V>(map: &'a LpmTrie<AddrKey, V>, family: u8, addr: &[u8; 16]) -> Option<&'a V> {
    let mut key = MaybeUninit::<AddrLookup>::uninit();
    let k = key.as_mut_ptr();
    // SAFETY: every field of `key` is written before it is read. The
    // address is copied straight into its place: zeroed first, the zeros
    // are kept (a `memset` call; LLVM cannot tell the copy's source, a
    // packet or map pointer, from the key), and moved in by value it takes
    // a detour through a temporary that LLVM folds into a `memmove` call.
    let key = unsafe {
        (&raw mut (*k).prefix_len).write(32 + 128);
        (&raw mut (*k).family).write([family, 0, 0, 0]);
        core::ptr::copy_nonoverlapping(addr, &raw mut (*k).addr, 1);
        key.assume_init_ref()
    };
    key.get(map)
}

/// The entry of `map` whose prefix covers the IPv4 address `addr`.
#[inline(always)]
pub fn get4<V>(map: &LpmTrie<AddrKey, V>, addr: [u8; 4]) -> Option<&V> {
    AddrLookup::new(FLOW_FAMILY_IPV4, ipv4_field(addr)).get(map)
}

// The tries' keys are `IpcacheKey`'s 24 bytes, laid out as `AddrLookup`.
const _: () = {
    use core::mem::{offset_of, size_of};
    assert!(size_of::<Key<AddrKey>>() == size_of::<sarena_common::policy::IpcacheKey>());
    assert!(size_of::<Key<AddrKey>>() == size_of::<AddrLookup>());
    assert!(offset_of!(Key<AddrKey>, data) == offset_of!(AddrLookup, family));
    assert!(offset_of!(AddrLookup, addr) == 8);
};
