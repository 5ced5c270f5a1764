//! The programs' attachment to a host veth: `cls_bpf` filters in
//! direct-action mode on the device's `clsact` qdisc, made over netlink.
//!
//! Why not tcx links: attaching or detaching a tcx program waits for a full
//! RCU grace period while holding the RTNL lock (the kernel swaps the device's
//! program array and synchronises before freeing the old one). On a small VM
//! that is 15–25 ms per hook, twice per pod on ADD and twice on DEL, and it
//! stalls every other netlink user meanwhile. A `cls_bpf` filter on `clsact`
//! is installed in well under a millisecond. It is owned by the device, not
//! by a file descriptor, so it stays attached while the daemon is down and
//! goes away with the device.
//!
//! Every filter Sarena makes sits at [`PRIORITY`] / [`HANDLE`] on its hook,
//! named after its program, so it is found, replaced and removed by that
//! position without any record outside the kernel.

use aya::programs::links::Link as _;
use aya::programs::tc::{
    NlOptions, SchedClassifier, SchedClassifierLink, TcAttachOptions, TcHandle,
};
use futures_util::TryStreamExt;
use rtnetlink::packet_route::tc::{TcAttribute, TcFilterBpfOption, TcOption};

use super::error::{BpfError, program_errno, tc_errno};
use super::pins::Direction;
use crate::dataplane::DataplaneError;
use crate::netlink::{self, NetlinkError};

/// The filter priority of Sarena's programs on a host veth (1: first).
pub const PRIORITY: u16 = 1;
/// The filter handle of Sarena's programs at [`PRIORITY`].
pub const HANDLE: TcHandle = TcHandle::new(0, 1);

/// Sarena's filter on one hook of a device, as the kernel reports it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TcAttachment {
    /// The hook.
    pub direction: Direction,
    /// The name of the attached program.
    pub program: String,
    /// The kernel's id of the attached program.
    pub program_id: u32,
    /// The program's tag (a hash of its instructions; equal tags mean the
    /// same code).
    pub tag: u64,
}

/// Adds `clsact` to `ifname` when missing, then puts `prog` at Sarena's
/// position on `direction`'s hook, replacing whatever filter is there.
pub(super) fn attach(
    prog: &mut SchedClassifier,
    ifname: &str,
    direction: Direction,
) -> Result<(), BpfError> {
    if let Err(source) = aya::programs::tc::qdisc_add_clsact(ifname)
        && tc_errno(&source) != Some(libc::EEXIST)
    {
        return Err(BpfError::Clsact {
            ifname: ifname.to_string(),
            source,
        });
    }
    let filter_error = |call, source| BpfError::Filter {
        call,
        ifname: ifname.to_string(),
        direction,
        source: Box::new(source),
    };
    let options = || {
        TcAttachOptions::Netlink(NlOptions {
            priority: PRIORITY,
            handle: HANDLE,
            ..NlOptions::default()
        })
    };
    let id = match prog.attach_with_options(ifname, direction.attach_type(), options()) {
        Ok(id) => id,
        Err(e) if program_errno(&e) == Some(libc::EEXIST) => {
            let existing = SchedClassifierLink::attached(
                ifname,
                direction.attach_type(),
                PRIORITY,
                HANDLE,
                None,
            )
            .map_err(|source| BpfError::FindFilter {
                ifname: ifname.to_string(),
                direction,
                source,
            })?;
            prog.attach_to_link(existing)
                .map_err(|e| filter_error("replace filter", e))?
        }
        Err(e) => return Err(filter_error("add filter", e)),
    };
    let link = prog
        .take_link(id)
        .map_err(|e| filter_error("take link", e))?;
    // Dropping the link would delete the filter; the filter must outlive the
    // daemon. The link holds no resource (ifindex, hook, priority, handle),
    // so forgetting it leaks nothing.
    std::mem::forget(link);
    Ok(())
}

/// Removes Sarena's filter from `direction`'s hook of `ifname`; a missing
/// device, qdisc or filter is fine.
pub(super) fn detach(ifname: &str, direction: Direction) -> Result<(), BpfError> {
    let link = match SchedClassifierLink::attached(
        ifname,
        direction.attach_type(),
        PRIORITY,
        HANDLE,
        None,
    ) {
        Ok(link) => link,
        // No such device: nothing is attached.
        Err(_) => return Ok(()),
    };
    match link.detach() {
        Ok(()) => Ok(()),
        Err(e) if matches!(program_errno(&e), Some(libc::ENOENT | libc::EINVAL)) => Ok(()),
        Err(source) => Err(BpfError::Filter {
            call: "delete filter",
            ifname: ifname.to_string(),
            direction,
            source: Box::new(source),
        }),
    }
}

/// Sarena's filters on `ifindex` (at most one per hook), queried over
/// `handle`. A device without `clsact` has none.
pub(super) async fn query(
    handle: &rtnetlink::Handle,
    ifindex: u32,
) -> Result<Vec<TcAttachment>, DataplaneError> {
    let index =
        i32::try_from(ifindex).map_err(|source| BpfError::IfindexRange { ifindex, source })?;
    let mut found = Vec::new();
    for direction in Direction::ALL {
        let request = handle.traffic_filter(index).get();
        let request = match direction {
            Direction::Ingress => request.ingress(),
            Direction::Egress => request.egress(),
        };
        let messages: Vec<_> = match request.execute().try_collect().await {
            Ok(messages) => messages,
            // EINVAL: no clsact qdisc, so no filters.
            Err(e) if matches!(netlink::errno(&e), Some(libc::EINVAL | libc::ENOENT)) => Vec::new(),
            Err(e) => {
                let object = format!("{direction} of ifindex {ifindex}");
                return Err(NetlinkError::new("filter dump", object, e).into());
            }
        };
        for message in messages {
            if message.header.info >> 16 != u32::from(PRIORITY)
                || u32::from(message.header.handle) != u32::from(HANDLE)
            {
                continue;
            }
            if let Some(attachment) = bpf_filter(direction, &message.attributes) {
                found.push(attachment);
            }
        }
    }
    Ok(found)
}

/// The program of a `bpf` filter's attributes, if it has a name and an id.
pub(super) fn bpf_filter(direction: Direction, attributes: &[TcAttribute]) -> Option<TcAttachment> {
    let mut program = None;
    let mut program_id = None;
    let mut tag = None;
    for attribute in attributes {
        if let TcAttribute::Options(options) = attribute {
            for option in options {
                match option {
                    TcOption::Bpf(TcFilterBpfOption::ProgName(name)) => {
                        program = Some(name.clone())
                    }
                    TcOption::Bpf(TcFilterBpfOption::ProgId(id)) => program_id = Some(*id),
                    TcOption::Bpf(TcFilterBpfOption::ProgTag(t)) => {
                        tag = Some(u64::from_be_bytes(*t))
                    }
                    _ => {}
                }
            }
        }
    }
    Some(TcAttachment {
        direction,
        program: program?,
        program_id: program_id?,
        tag: tag.unwrap_or(0),
    })
}
