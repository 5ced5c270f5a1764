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
    NLM_F_ACK, NLM_F_CREATE, NLM_F_ECHO, NLM_F_EXCL, NLM_F_REPLACE, NLM_F_REQUEST, NetlinkMessage,
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

/// The root qdisc of `ifindex`; `None` when the device has none to show
/// (it is gone, or down with the kernel's built-in `noop`).
///
/// One `RTM_GETQDISC` for that device and parent, not a dump: the kernel
/// ignores the ifindex of a qdisc dump and sends every device's qdiscs, so
/// on a node with a thousand pods each look cost a few thousand messages
/// (`sarena-bench cni --scale-levels 0,1000`).
pub(super) async fn root(handle: &Handle, ifindex: u32) -> Result<Option<RootQdisc>, NetlinkError> {
    get(handle, ifindex, TcHandle::ROOT).await
}

/// The qdisc of `ifindex` under `parent` (its root, or its `clsact` slot),
/// asked with one `RTM_GETQDISC`; `None` when there is none to show.
async fn get(
    handle: &Handle,
    ifindex: u32,
    parent: TcHandle,
) -> Result<Option<RootQdisc>, NetlinkError> {
    let mut message = TcMessage::with_index(index(ifindex));
    message.header.parent = parent;
    let mut request = NetlinkMessage::from(RouteNetlinkMessage::GetQueueDiscipline(message));
    // NLM_F_ECHO: since Linux 6.8 the kernel answers a GET only when asked
    // to echo (the answer goes through its notification path); the
    // acknowledgement ends the wait where nothing is shown (a device that
    // is down).
    request.header.flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_ECHO;
    let object = format!("ifindex {ifindex}");
    let mut answers = handle
        .clone()
        .request(request)
        .map_err(|e| NetlinkError::new("qdisc get", &object, e))?;
    let mut found = None;
    while let Some(answer) = answers.next().await {
        match answer.payload {
            NetlinkPayload::InnerMessage(RouteNetlinkMessage::NewQueueDiscipline(m))
                if m.header.index == index(ifindex) && m.header.parent == parent =>
            {
                found = m
                    .attributes
                    .iter()
                    .find_map(|a| match a {
                        TcAttribute::Kind(kind) => Some(kind.clone()),
                        _ => None,
                    })
                    .map(|kind| RootQdisc {
                        kind,
                        major: m.header.handle.major,
                    });
            }
            NetlinkPayload::Error(e) if e.code.is_some() => {
                let e = rtnetlink::Error::NetlinkError(e);
                // ENODEV: no such device; ENOENT, EINVAL: nothing in that
                // slot (no clsact), or a built-in qdisc the kernel will not show.
                return match errno(&e) {
                    Some(libc::ENODEV | libc::ENOENT | libc::EINVAL) => Ok(None),
                    _ => Err(NetlinkError::new("qdisc get", &object, e)),
                };
            }
            _ => {}
        }
    }
    Ok(found)
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

/// Whether `ifindex` has a `clsact` qdisc (a device that is gone has none):
/// one GET, as for [`root`].
pub(super) async fn has_clsact(handle: &Handle, ifindex: u32) -> Result<bool, NetlinkError> {
    Ok(get(handle, ifindex, TcHandle::CLSACT)
        .await?
        .is_some_and(|q| q.kind == "clsact"))
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

#[cfg(test)]
mod tests {
    use std::process::Command;

    use super::*;

    /// The root qdisc as a dump shows it (what `root` asked before): the
    /// oracle `root` must agree with.
    async fn root_by_dump(handle: &Handle, ifindex: u32) -> Option<RootQdisc> {
        let mut dump = handle.qdisc().get().index(index(ifindex)).execute();
        let mut found = None;
        while let Some(message) = dump.next().await {
            let message = message.unwrap();
            if message.header.index != index(ifindex) || message.header.parent != TcHandle::ROOT {
                continue;
            }
            for a in &message.attributes {
                if let TcAttribute::Kind(kind) = a {
                    found = Some(RootQdisc {
                        kind: kind.clone(),
                        major: message.header.handle.major,
                    });
                }
            }
        }
        found
    }

    fn ip(args: &[&str]) {
        let out = Command::new("ip").args(args).output().unwrap();
        assert!(out.status.success(), "ip {args:?}: {out:?}");
    }

    #[test]
    #[ignore = "privileged: needs root (a throwaway netns with a veth pair); run as root with --include-ignored"]
    fn one_get_finds_the_root_qdisc_a_dump_finds_in_every_state() {
        sarena_test_support::require_root(
            "one_get_finds_the_root_qdisc_a_dump_finds_in_every_state",
        );
        std::thread::spawn(|| {
            nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                let (connection, handle, _) = rtnetlink::new_connection().unwrap();
                tokio::spawn(connection);
                // Other devices' qdiscs, which a dump also carries.
                ip(&["link", "add", "qa0", "type", "veth", "peer", "name", "qa1"]);
                ip(&["link", "set", "qa1", "up"]);
                ip(&["link", "add", "qb0", "type", "veth", "peer", "name", "qb1"]);
                let ifindex = nix::net::if_::if_nametoindex("qb0").unwrap();
                let mut seen = Vec::new();
                let mut check = async |state: &str| {
                    let got = root(&handle, ifindex).await.unwrap();
                    assert_eq!(got, root_by_dump(&handle, ifindex).await, "{state}");
                    seen.push(got.map(|r| format!("{} {:x}", r.kind, r.major)));
                };
                check("down, the built-in noop").await;
                ip(&["link", "set", "qb0", "up"]);
                check("up, the default noqueue").await;
                assert!(!has_clsact(&handle, ifindex).await.unwrap());
                add_clsact(&handle, ifindex).await.unwrap();
                assert!(has_clsact(&handle, ifindex).await.unwrap());
                let other = nix::net::if_::if_nametoindex("qa1").unwrap();
                assert!(!has_clsact(&handle, other).await.unwrap(), "only qb0's");
                set_root(&handle, ifindex, Root::Placeholder).await.unwrap();
                check("Sarena's placeholder").await;
                let tc = Command::new("tc")
                    .args(["qdisc", "replace", "dev", "qb0", "root", "handle", "7:"])
                    .args(["tbf", "rate", "1mbit", "burst", "32kb", "latency", "50ms"])
                    .output()
                    .unwrap();
                assert!(tc.status.success(), "{tc:?}");
                check("someone else's tbf").await;
                remove_root(&handle, ifindex).await.unwrap();
                check("tbf left alone").await;
                ip(&["link", "del", "qb0"]);
                check("gone").await;
                assert!(!has_clsact(&handle, ifindex).await.unwrap());
                let want = [
                    None,
                    Some("noqueue 0"),
                    Some("noqueue 5a5e"),
                    Some("tbf 7"),
                    Some("tbf 7"),
                    None,
                ];
                assert_eq!(seen, want.map(|w| w.map(String::from)));
            });
        })
        .join()
        .unwrap();
    }
}
