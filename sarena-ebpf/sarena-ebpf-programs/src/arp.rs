//! Answering the pod's ARP requests with the host end's MAC.

use aya_ebpf::{helpers::generated::bpf_redirect, programs::TcContext};
use network_types::{arp::ArpHdr, eth::EthHdr};
use sarena_common::DropReason;

use crate::{
    antispoof,
    counters::Counters,
    packet::{ptr_at, verdict},
};

const ARP_HTYPE_ETHERNET: [u8; 2] = [0, 1];
const ARP_PTYPE_IPV4: [u8; 2] = [0x08, 0x00];
const ARP_OP_REQUEST: [u8; 2] = [0, 1];
const ARP_OP_REPLY: [u8; 2] = [0, 2];

/// An ARP frame from the pod behind `ifindex` (its counters
/// `sender_counters`). ARP for anything but IPv4 over Ethernet is dropped:
/// Linux also takes hardware type 6 (IEEE 802) on an Ethernet device, and
/// learns the sender of such a request as it does any other's, so passing
/// it would let a pod fill the node's neighbour table with forged senders.
/// A sender address that is not one of the pod's own (a probe from
/// 0.0.0.0, another pod's address, a gratuitous ARP for someone else) is
/// dropped. A request for any address but the pod's own is turned into the
/// reply in place and sent back out of the same veth; replies and the pod's
/// own announcements go on to the host stack.
#[inline(always)]
pub fn try_arp(
    ctx: &TcContext,
    ifindex: u32,
    sender_counters: Counters,
) -> Result<i32, DropReason> {
    let eth: *mut EthHdr = ptr_at(ctx, 0, DropReason::MalformedEthernet)?;
    let arp: *mut ArpHdr = ptr_at(ctx, EthHdr::LEN, DropReason::MalformedArp)?;
    // SAFETY: both pointers were bounds-checked against data_end above.
    let (eth, arp) = unsafe { (&mut *eth, &mut *arp) };
    if arp.htype != ARP_HTYPE_ETHERNET || arp.ptype != ARP_PTYPE_IPV4 {
        return Err(DropReason::UnsupportedArp);
    }
    if arp.hlen != 6 || arp.plen != 4 {
        return Err(DropReason::MalformedArp);
    }
    // The sender must be the pod on this very veth.
    let Some(sender) = antispoof::pod_address(arp.spa, ifindex) else {
        return Err(DropReason::SpoofedArp);
    };
    if arp.oper != ARP_OP_REQUEST || arp.tpa == arp.spa {
        // Replies and the pod's own gratuitous ARP are the host stack's business.
        return Ok(verdict::OK);
    }

    let asked = arp.tpa;
    arp.oper = ARP_OP_REPLY;
    arp.tha = arp.sha;
    arp.tpa = arp.spa;
    arp.sha = sender.host_mac;
    arp.spa = asked;
    eth.dst_addr = arp.tha;
    eth.src_addr = sender.host_mac;

    sender_counters.arp_reply();
    // Back out of the same veth, towards the pod.
    // SAFETY: plain helper call; it only records the target device.
    Ok(unsafe { bpf_redirect(ifindex, 0) } as i32)
}
