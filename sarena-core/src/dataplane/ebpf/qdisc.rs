//! Root qdiscs and raw tc requests over a netlink handle, in whichever
//! netns the handle is: the host's for host veths, a pod's for its
//! interface.
//!
//! Sarena holds the root qdisc of every host veth it attaches:
//!
//! - `fq` ([`FQ_MAJOR`]`:`) where frames are paced: it holds each frame
//!   until the departure time the programs gave it;
//! - otherwise an explicit `noqueue` ([`PLACEHOLDER_MAJOR`]`:`), which
//!   behaves exactly like the device's default (no queue: frames go straight
//!   to the driver; the kernel treats an added `noqueue` as the default one)
//!   and costs nothing per frame, but makes the slot taken: a reference
//!   `bandwidth` plugin chained after Sarena then fails at its first qdisc
//!   instead of shaping half of a pod's traffic (see
//!   `crate::cni::chain`).

use futures_util::StreamExt;
use rtnetlink::Handle;
use rtnetlink::packet_core::{
    NLM_F_ACK, NLM_F_CREATE, NLM_F_EXCL, NLM_F_REPLACE, NLM_F_REQUEST, NetlinkMessage,
    NetlinkPayload,
};
use rtnetlink::packet_route::RouteNetlinkMessage;
use rtnetlink::packet_route::tc::{TcAttribute, TcHandle, TcMessage};

use crate::netlink::{NetlinkError, errno};

/// Major handle of Sarena's `fq` root qdisc (`5a5f:`).
pub const FQ_MAJOR: u16 = 0x5a5f;
/// Major handle of Sarena's placeholder `noqueue` root qdisc (`5a5e:`).
pub const PLACEHOLDER_MAJOR: u16 = 0x5a5e;

/// The root qdisc Sarena wants on a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Root {
    /// `fq`: frames are paced on this device.
    Fq,
    /// `noqueue`: nothing is paced; the slot is only held.
    Placeholder,
}

impl Root {
    /// The qdisc's kind (`fq`, `noqueue`).
    pub fn kind(self) -> &'static str {
        match self {
            Root::Fq => "fq",
            Root::Placeholder => "noqueue",
        }
    }

    fn major(self) -> u16 {
        match self {
            Root::Fq => FQ_MAJOR,
            Root::Placeholder => PLACEHOLDER_MAJOR,
        }
    }
}

/// A device's root qdisc as the kernel reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RootQdisc {
    /// Its kind (`fq`, `noqueue`, `tbf`, …).
    pub kind: String,
    /// Its major handle (0 for a device's default qdisc).
    pub major: u16,
}

impl RootQdisc {
    /// Whether this is `want` as Sarena makes it.
    pub fn is(&self, want: Root) -> bool {
        self.kind == want.kind() && self.major == want.major()
    }
}

/// Sends one tc request and waits for its acknowledgement.
pub(super) async fn request(
    handle: &Handle,
    message: RouteNetlinkMessage,
    flags: u16,
) -> Result<(), rtnetlink::Error> {
    let mut request = NetlinkMessage::from(message);
    request.header.flags = NLM_F_REQUEST | NLM_F_ACK | flags;
    let mut answers = handle.clone().request(request)?;
    while let Some(answer) = answers.next().await {
        if let NetlinkPayload::Error(e) = answer.payload
            && e.code.is_some()
        {
            return Err(rtnetlink::Error::NetlinkError(e));
        }
    }
    Ok(())
}

fn index(ifindex: u32) -> i32 {
    // Kernel ifindexes are positive i32s.
    i32::try_from(ifindex).unwrap_or(i32::MAX)
}

/// The root qdisc of `ifindex`; `None` when the device has none (it is gone).
pub(super) async fn root(handle: &Handle, ifindex: u32) -> Result<Option<RootQdisc>, NetlinkError> {
    let mut dump = handle.qdisc().get().index(index(ifindex)).execute();
    let object = format!("ifindex {ifindex}");
    while let Some(message) = dump.next().await {
        let message = message.map_err(|e| NetlinkError::new("qdisc dump", &object, e))?;
        if message.header.index != index(ifindex) || message.header.parent != TcHandle::ROOT {
            continue;
        }
        let kind = message.attributes.iter().find_map(|a| match a {
            TcAttribute::Kind(kind) => Some(kind.clone()),
            _ => None,
        });
        if let Some(kind) = kind {
            return Ok(Some(RootQdisc {
                kind,
                major: message.header.handle.major,
            }));
        }
    }
    Ok(None)
}

/// Makes `want` the root qdisc of `ifindex`, replacing whatever is there;
/// nothing is sent when it already is.
pub(super) async fn set_root(
    handle: &Handle,
    ifindex: u32,
    want: Root,
) -> Result<(), NetlinkError> {
    if root(handle, ifindex).await?.is_some_and(|r| r.is(want)) {
        return Ok(());
    }
    let mut message = TcMessage::with_index(index(ifindex));
    message.header.parent = TcHandle::ROOT;
    message.header.handle = TcHandle {
        major: want.major(),
        minor: 0,
    };
    message
        .attributes
        .push(TcAttribute::Kind(want.kind().to_string()));
    request(
        handle,
        RouteNetlinkMessage::NewQueueDiscipline(message),
        NLM_F_CREATE | NLM_F_REPLACE,
    )
    .await
    .map_err(|e| {
        NetlinkError::new(
            "qdisc replace",
            format!("{} on ifindex {ifindex}", want.kind()),
            e,
        )
    })
}

/// Removes Sarena's root qdisc from `ifindex` (the device falls back to its
/// default); a device without one, or gone, is fine.
pub(super) async fn remove_root(handle: &Handle, ifindex: u32) -> Result<(), NetlinkError> {
    let Some(current) = root(handle, ifindex).await? else {
        return Ok(());
    };
    if !(current.is(Root::Fq) || current.is(Root::Placeholder)) {
        return Ok(());
    }
    let mut message = TcMessage::with_index(index(ifindex));
    message.header.parent = TcHandle::ROOT;
    message.header.handle = TcHandle {
        major: current.major,
        minor: 0,
    };
    delete(handle, message, || format!("root of ifindex {ifindex}")).await
}

/// Deletes the qdisc `message` names; one already gone (or its device) is
/// fine. `what` names it in the error.
async fn delete(
    handle: &Handle,
    message: TcMessage,
    what: impl FnOnce() -> String,
) -> Result<(), NetlinkError> {
    match request(handle, RouteNetlinkMessage::DelQueueDiscipline(message), 0).await {
        Ok(()) => Ok(()),
        Err(e) if matches!(errno(&e), Some(libc::ENOENT | libc::ENODEV | libc::EINVAL)) => Ok(()),
        Err(e) => Err(NetlinkError::new("qdisc delete", what(), e)),
    }
}

/// Adds a `clsact` qdisc to `ifindex` when it has none.
pub(super) async fn add_clsact(handle: &Handle, ifindex: u32) -> Result<(), NetlinkError> {
    let mut message = TcMessage::with_index(index(ifindex));
    message.header.parent = TcHandle::CLSACT;
    message.header.handle = TcHandle {
        major: u16::MAX,
        minor: 0,
    };
    message
        .attributes
        .push(TcAttribute::Kind("clsact".to_string()));
    match request(
        handle,
        RouteNetlinkMessage::NewQueueDiscipline(message),
        NLM_F_CREATE | NLM_F_EXCL,
    )
    .await
    {
        Err(e) if errno(&e) != Some(libc::EEXIST) => Err(NetlinkError::new(
            "qdisc add",
            format!("clsact on ifindex {ifindex}"),
            e,
        )),
        _ => Ok(()),
    }
}

/// Whether `ifindex` has a `clsact` qdisc (a device that is gone has none).
pub(super) async fn has_clsact(handle: &Handle, ifindex: u32) -> Result<bool, NetlinkError> {
    let mut dump = handle.qdisc().get().index(index(ifindex)).execute();
    let object = format!("ifindex {ifindex}");
    let mut found = false;
    while let Some(message) = dump.next().await {
        let message = match message {
            Ok(message) => message,
            Err(e) if errno(&e) == Some(libc::ENODEV) => return Ok(false),
            Err(e) => return Err(NetlinkError::new("qdisc dump", &object, e)),
        };
        // The whole dump is read (a netlink socket carries one at a time).
        found |= message.header.index == index(ifindex)
            && message.header.parent == TcHandle::CLSACT
            && message
                .attributes
                .iter()
                .any(|a| matches!(a, TcAttribute::Kind(kind) if kind == "clsact"));
    }
    Ok(found)
}

/// Removes the `clsact` qdisc of `ifindex`, with every filter on its two
/// hooks; a device without one, or gone, is fine.
pub(super) async fn remove_clsact(handle: &Handle, ifindex: u32) -> Result<(), NetlinkError> {
    let mut message = TcMessage::with_index(index(ifindex));
    message.header.parent = TcHandle::CLSACT;
    message.header.handle = TcHandle {
        major: u16::MAX,
        minor: 0,
    };
    delete(handle, message, || format!("clsact on ifindex {ifindex}")).await
}
