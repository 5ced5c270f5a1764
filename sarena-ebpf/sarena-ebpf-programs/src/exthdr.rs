//! The IPv6 extension-header chain: where the upper-layer header starts.
//!
//! The chain is walked with `bpf_skb_load_bytes`, so headers outside the
//! linear part of the frame are read too and only a chain that really runs
//! past the packet counts as truncated. At most [`MAX_IPV6_EXT_HEADERS`] are
//! walked; a longer chain, a header past the end of the packet and a
//! Hop-by-Hop header anywhere but first (RFC 8200 4.1) make the packet
//! malformed. A Fragment header ends the walk: behind it, only the first
//! fragment has the next header, so the upper layer is never read.

use aya_ebpf::programs::TcContext;
use network_types::{eth::EthHdr, ip::Ipv6Hdr};
use sarena_common::{DropReason, MAX_IPV6_EXT_HEADERS};

const HOP_BY_HOP: u8 = 0;
const ROUTING: u8 = 43;
const FRAGMENT: u8 = 44;
const AUTHENTICATION: u8 = 51;
const DESTINATION: u8 = 60;
const MOBILITY: u8 = 135;
const HIP: u8 = 139;
const SHIM6: u8 = 140;
const EXPERIMENT_1: u8 = 253;
const EXPERIMENT_2: u8 = 254;

/// Where the upper layer of an IPv6 packet starts.
#[derive(Clone, Copy)]
pub struct Upper {
    /// Its protocol number (the last Next Header).
    pub proto: u8,
    /// Its offset in the frame.
    pub offset: usize,
    /// Whether there was any extension header.
    pub extended: bool,
    /// Whether the packet is a fragment (first or not).
    pub fragment: bool,
}

/// Whether `next` is an extension header.
#[inline(always)]
fn is_extension(next: u8) -> bool {
    matches!(
        next,
        HOP_BY_HOP
            | ROUTING
            | FRAGMENT
            | AUTHENTICATION
            | DESTINATION
            | MOBILITY
            | HIP
            | SHIM6
            | EXPERIMENT_1
            | EXPERIMENT_2
    )
}

/// How long the extension header `next` is, given its length byte.
#[inline(always)]
fn ext_len(next: u8, len_byte: u8) -> usize {
    match next {
        FRAGMENT => 8,
        AUTHENTICATION => (usize::from(len_byte) + 2) * 4,
        _ => (usize::from(len_byte) + 1) * 8,
    }
}

/// Walks the chain of `ip` (at [`EthHdr::LEN`]) whose packet ends at `end`.
#[inline(always)]
pub fn upper(ctx: &TcContext, ip: &Ipv6Hdr, end: usize) -> Result<Upper, DropReason> {
    let mut next = ip.next_hdr;
    let mut offset = EthHdr::LEN + Ipv6Hdr::LEN;
    let mut extended = false;
    for i in 0..MAX_IPV6_EXT_HEADERS {
        if !is_extension(next) {
            return Ok(Upper {
                proto: next,
                offset,
                extended,
                fragment: false,
            });
        }
        if next == HOP_BY_HOP && i != 0 {
            return Err(DropReason::MalformedIpv6Ext);
        }
        // Next Header and the length byte open every extension header.
        let head: [u8; 2] = ctx.load(offset).map_err(|_| DropReason::MalformedIpv6Ext)?;
        let len = ext_len(next, head[1]);
        if offset + len > end {
            return Err(DropReason::MalformedIpv6Ext);
        }
        let fragment = next == FRAGMENT;
        next = head[0];
        offset += len;
        extended = true;
        if fragment {
            return Ok(Upper {
                proto: next,
                offset,
                extended,
                fragment,
            });
        }
    }
    if is_extension(next) {
        return Err(DropReason::MalformedIpv6Ext);
    }
    Ok(Upper {
        proto: next,
        offset,
        extended,
        fragment: false,
    })
}
