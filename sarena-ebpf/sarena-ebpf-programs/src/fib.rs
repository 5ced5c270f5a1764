//! The parameters of a FIB lookup (`struct bpf_fib_lookup`), written as 8
//! whole words.
//!
//! The helper reads all 64 bytes, and the verifier wants each of them
//! written. Zeroing the struct first (`mem::zeroed`) is a `memset`, and
//! bpf-linker has LLVM lower every `memset` to a call of a byte-loop
//! subprogram: 64 iterations on every packet to a peer's pod. Written field
//! by field, the zero fields next to each other are folded back into one.
//! So the struct sits in an 8-aligned slot and each of its words is written
//! once, volatile: LLVM neither merges those stores nor drops them.

use core::mem::MaybeUninit;

use aya_ebpf::bindings::bpf_fib_lookup as FibParams;

/// `struct bpf_fib_lookup` in an 8-aligned slot.
#[repr(C, align(8))]
pub struct Fib(pub FibParams);

// The words `params` writes: the struct's layout, field by field.
const _: () = {
    use core::mem::{offset_of, size_of};
    assert!(size_of::<Fib>() == 64 && size_of::<FibParams>() == 64);
    assert!(offset_of!(FibParams, l4_protocol) == 1);
    assert!(offset_of!(FibParams, dport) == 4);
    assert!(offset_of!(FibParams, __bindgen_anon_1) == 6);
    assert!(offset_of!(FibParams, ifindex) == 8);
    assert!(offset_of!(FibParams, __bindgen_anon_2) == 12);
    assert!(offset_of!(FibParams, __bindgen_anon_3) == 16);
    assert!(offset_of!(FibParams, __bindgen_anon_4) == 32);
    assert!(offset_of!(FibParams, __bindgen_anon_5) == 48);
    assert!(offset_of!(FibParams, smac) == 52);
};

/// The lookup of a packet of `family` and IP protocol `proto` from
/// `src` to `dst` (network-order words; IPv4 in the first, zeros after),
/// as if it arrived on `ifindex`; `tos_or_flowinfo` is the IPv4 TOS (in
/// its first byte) or the IPv6 flow label (network order). Ports, the
/// packet length (the kernel then checks the MTU itself, GSO packets
/// included), the VLAN and table id, and the MACs (outputs) are zero.
/// Written into `slot`, which is returned initialised.
#[inline(always)]
pub fn params(
    slot: &mut MaybeUninit<Fib>,
    family: u8,
    proto: u8,
    ifindex: u32,
    tos_or_flowinfo: u32,
    src: [u32; 4],
    dst: [u32; 4],
) -> &mut FibParams {
    let words = slot.as_mut_ptr().cast::<u64>();
    // family, l4_protocol, sport, dport, tot_len.
    let head = u64::from_ne_bytes([family, proto, 0, 0, 0, 0, 0, 0]);
    // SAFETY: `words` points to 64 writable, 8-aligned bytes; each of the
    // 8 words is written, so the slot is initialised after, and any bit
    // pattern is a valid `bpf_fib_lookup` (integers and unions of them).
    unsafe {
        words.write_volatile(head);
        words.add(1).write_volatile(pair(ifindex, tos_or_flowinfo));
        words.add(2).write_volatile(pair(src[0], src[1]));
        words.add(3).write_volatile(pair(src[2], src[3]));
        words.add(4).write_volatile(pair(dst[0], dst[1]));
        words.add(5).write_volatile(pair(dst[2], dst[3]));
        // The VLAN (or table id) and the source MAC's first 4 bytes; the
        // rest of the MACs.
        words.add(6).write_volatile(0);
        words.add(7).write_volatile(0);
        &mut slot.assume_init_mut().0
    }
}

/// Two 4-byte fields as the 8-byte word they make in memory.
#[inline(always)]
fn pair(first: u32, second: u32) -> u64 {
    let (a, b) = (first.to_ne_bytes(), second.to_ne_bytes());
    u64::from_ne_bytes([a[0], a[1], a[2], a[3], b[0], b[1], b[2], b[3]])
}
