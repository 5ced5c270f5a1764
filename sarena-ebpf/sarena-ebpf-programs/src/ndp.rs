//! Neighbour discovery from a pod (RFC 4861): solicitations for any address
//! but the pod's own are answered with the host end's MAC, like ARP; what
//! the pod advertises or probes must be its own.
//!
//! The pod's IPv6 routes all go through the link-local gateway (`fe80::1`),
//! so in practice it only ever solicits the gateway; answering every other
//! address too keeps an on-link route the pod adds itself working, exactly
//! as ARP does for IPv4, and costs nothing on the forwarding path.
//! Advertisements and duplicate-address probes must name one of the pod's
//! addresses or its own link-local one (a node that learns from
//! advertisements nobody asked for, `accept_untracked_na`, would otherwise
//! take an entry for every link-local address a pod advertises); a pod
//! never advertises itself as a router nor redirects the host.

use aya_ebpf::{
    helpers::generated::{bpf_redirect, bpf_skb_change_tail},
    programs::TcContext,
};
use network_types::{eth::EthHdr, ip::Ipv6Hdr};
use sarena_common::DropReason;

use crate::{
    SARENA_VETHS,
    antispoof::{self, Source6},
    counters::Counters,
    flows::IPPROTO_ICMPV6,
    packet::{ptr_at, verdict},
};

const ROUTER_SOLICITATION: u8 = 133;
const ROUTER_ADVERTISEMENT: u8 = 134;
const NEIGHBOUR_SOLICITATION: u8 = 135;
const NEIGHBOUR_ADVERTISEMENT: u8 = 136;
const REDIRECT: u8 = 137;
/// Router, Solicited and Override (RFC 4861 4.4).
const NA_FLAGS: [u8; 4] = [0xe0, 0, 0, 0];
/// The target link-layer address option's type.
const TARGET_LINK_LAYER: u8 = 2;
/// Where the ICMPv6 message starts (neighbour discovery has no extension
/// headers; `ipv6` checked).
const MESSAGE: usize = EthHdr::LEN + Ipv6Hdr::LEN;

/// A neighbour solicitation or advertisement without options.
#[repr(C)]
struct NeighbourMessage {
    kind: u8,
    code: u8,
    check: [u8; 2],
    flags: [u8; 4],
    target: [u8; 16],
}

/// A link-layer address option for Ethernet.
#[repr(C)]
struct LinkLayerOption {
    kind: u8,
    len: u8,
    addr: [u8; 6],
}

const MESSAGE_LEN: usize = core::mem::size_of::<NeighbourMessage>();
const WITH_OPTION_LEN: usize = MESSAGE_LEN + core::mem::size_of::<LinkLayerOption>();

/// Whether the ICMPv6 type `kind` is neighbour discovery.
#[inline(always)]
pub fn is_ndp(kind: u8) -> bool {
    (ROUTER_SOLICITATION..=REDIRECT).contains(&kind)
}

/// A neighbour-discovery message of type `kind` from the pod behind
/// `ifindex`, `len` bytes of ICMPv6, sent from `source`.
#[inline(always)]
pub fn try_ndp(
    ctx: &TcContext,
    ifindex: u32,
    eth: &mut EthHdr,
    ip: &mut Ipv6Hdr,
    kind: u8,
    source: Source6,
    len: usize,
) -> Result<i32, DropReason> {
    match kind {
        ROUTER_ADVERTISEMENT | REDIRECT => return Err(DropReason::SpoofedNdp),
        NEIGHBOUR_SOLICITATION | NEIGHBOUR_ADVERTISEMENT => {}
        _ => return Ok(verdict::OK),
    }
    if len < MESSAGE_LEN {
        return Err(DropReason::MalformedNdp);
    }
    let message: *mut NeighbourMessage = ptr_at(ctx, MESSAGE, DropReason::MalformedNdp)?;
    // SAFETY: bounds-checked against data_end above.
    let message = unsafe { &mut *message };
    if ip.hop_limit != 255 || message.code != 0 || message.target[0] == 0xff {
        return Err(DropReason::MalformedNdp);
    }
    let own = antispoof::pod_address6(message.target, ifindex).is_some();
    let claimable = own || antispoof::is_own_link_local(&message.target, ifindex);
    if kind == NEIGHBOUR_ADVERTISEMENT || source == Source6::Unspecified {
        // An advertisement, or a duplicate-address probe: both claim the
        // target for the pod.
        return if claimable {
            Ok(verdict::OK)
        } else {
            Err(DropReason::SpoofedNdp)
        };
    }
    if own {
        // Nobody else has the pod's address to answer with.
        return Ok(verdict::OK);
    }
    advertise(ctx, ifindex, eth, ip, message, len)
}

/// Turns the solicitation into the advertisement of the host end's MAC for
/// its target, in place, and sends it back out of the same veth, towards
/// the pod. The target link-layer address option is there when the
/// solicitation had room for it (it always has when it carries its source
/// link-layer address, as solicitations for address resolution must).
#[inline(always)]
fn advertise(
    ctx: &TcContext,
    ifindex: u32,
    eth: &mut EthHdr,
    ip: &mut Ipv6Hdr,
    message: &mut NeighbourMessage,
    len: usize,
) -> Result<i32, DropReason> {
    let Some(veth) = SARENA_VETHS.get_ptr(ifindex) else {
        // Not an endpoint the daemon attached: the host stack decides.
        return Ok(verdict::OK);
    };
    // SAFETY: a map value pointer returned by the lookup helper.
    let host_mac = unsafe { (*veth).host_mac };
    let with_option = len >= WITH_OPTION_LEN;
    let mut sum = 0;
    if with_option {
        let option: *mut LinkLayerOption =
            ptr_at(ctx, MESSAGE + MESSAGE_LEN, DropReason::MalformedNdp)?;
        // SAFETY: bounds-checked against data_end above.
        let option = unsafe { &mut *option };
        option.kind = TARGET_LINK_LAYER;
        option.len = 1;
        option.addr = host_mac;
        sum += words(&[TARGET_LINK_LAYER, 1]) + words(&host_mac);
    }
    let reply_len = if with_option {
        WITH_OPTION_LEN
    } else {
        MESSAGE_LEN
    };

    let asked = message.target;
    message.kind = NEIGHBOUR_ADVERTISEMENT;
    message.flags = NA_FLAGS;
    ip.vcf = [0x60, 0, 0, 0];
    ip.payload_len = (reply_len as u16).to_be_bytes();
    ip.hop_limit = 255;
    ip.dst_addr = ip.src_addr;
    ip.src_addr = asked;
    eth.dst_addr = eth.src_addr;
    eth.src_addr = host_mac;

    // ICMPv6 checksum: the pseudo-header (addresses, length, next header)
    // and the message with its checksum field zero.
    sum += words(&ip.src_addr) + words(&ip.dst_addr);
    sum += reply_len as u32 + u32::from(IPPROTO_ICMPV6);
    sum += words(&[NEIGHBOUR_ADVERTISEMENT, 0]) + words(&NA_FLAGS) + words(&asked);
    message.check = fold(sum).to_be_bytes();

    let frame = (MESSAGE + reply_len) as u32;
    if ctx.len() > frame {
        // Options past the one rewritten: cut. (On failure the receiver
        // still reads only the payload length.)
        // SAFETY: a helper call on the program's own context.
        let _ = unsafe { bpf_skb_change_tail(ctx.skb.skb, frame, 0) };
    }
    Counters::of(ifindex).ndp_reply();
    // SAFETY: plain helper call; it only records the target device.
    Ok(unsafe { bpf_redirect(ifindex, 0) } as i32)
}

/// The sum of `bytes` as big-endian 16-bit words (an even number of bytes).
#[inline(always)]
fn words<const N: usize>(bytes: &[u8; N]) -> u32 {
    let mut sum = 0;
    let mut i = 0;
    while i + 1 < N {
        sum += u32::from(u16::from_be_bytes([bytes[i], bytes[i + 1]]));
        i += 2;
    }
    sum
}

/// The one's complement of the folded one's-complement sum `sum`.
#[inline(always)]
fn fold(sum: u32) -> u16 {
    let sum = (sum & 0xffff) + (sum >> 16);
    let sum = (sum & 0xffff) + (sum >> 16);
    !(sum as u16)
}
