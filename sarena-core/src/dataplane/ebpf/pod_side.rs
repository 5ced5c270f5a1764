//! The pod-side half of an egress limit: in the pod's netns, an instance of
//! `pod_egress` on the egress hook of the pod's interface (and `fq` as its
//! root qdisc when frames are paced, see `ShapingMode`), over a netlink
//! socket opened in that netns.
//!
//! Why the pod side: frames from the pod reach the host through its veth
//! and leave through devices Sarena does not own (the node's NIC, another
//! pod's veth) or no device at all (redirected into another pod), so the
//! only queue every one of them passes is the pod interface's own. TCP in
//! the pod also gets the backpressure it expects there (its frames wait in
//! the qdisc, charged to its socket), instead of losses further on.
//!
//! Why one program instance per pod: the program must know whose pacer to
//! use, and nothing on the pod side says so reliably (every pod's `eth0`
//! may have the same ifindex in its own netns; the frames' addresses are
//! the pod's to forge), so each instance is loaded with its pod's host
//! ifindex as a read-only global. Loading one takes a few milliseconds, for
//! limited pods only; the instance lives as long as its filter.
//!
//! The filter sits at Sarena's [`PRIORITY`]/[`HANDLE`] on the egress hook,
//! as on the host side, so [`tc::query`] finds it.

use std::fs::File;
use std::os::fd::{AsFd, AsRawFd};
use std::path::Path;

use aya::programs::tc::SchedClassifier;
use rtnetlink::Handle;
use rtnetlink::packet_core::{NLM_F_CREATE, NLM_F_REPLACE};
use rtnetlink::packet_route::RouteNetlinkMessage;
use rtnetlink::packet_route::tc::{
    TcAttribute, TcBpfFlags, TcFilterBpfOption, TcHandle, TcMessage, TcOption,
};
use sarena_common::{POD_EGRESS_PROG, POD_HOST_IFINDEX_GLOBAL};

use super::error::BpfError;
use super::pins;
use super::qdisc::{self, Root, RootQdisc};
use super::tc::{self, HANDLE, PRIORITY, TcAttachment};
use crate::api::Endpoint;
use crate::dataplane::DataplaneError;
use crate::netlink::{self, NetlinkError, errno};

/// `ETH_P_ALL`, the protocol of Sarena's filters (as aya attaches them).
const ETH_P_ALL: u16 = 0x0003;

/// What the pod side of an endpoint has, as the kernel reports it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct PodSideState {
    /// The pod interface's root qdisc.
    pub root: Option<RootQdisc>,
    /// Sarena's filter on its egress hook.
    pub filter: Option<TcAttachment>,
}

/// The pod interface of an endpoint, reached through a netlink socket in
/// the pod's netns.
pub(super) struct PodSide {
    handle: Handle,
    ifindex: u32,
    ifname: String,
}

impl PodSide {
    /// Opens the pod side of `endpoint`; `None` when its netns or interface
    /// is gone (nothing to shape or clean up there).
    pub(super) async fn open(endpoint: &Endpoint) -> Result<Option<PodSide>, DataplaneError> {
        let Ok(netns) = File::open(&endpoint.spec.netns) else {
            return Ok(None);
        };
        Self::open_in(endpoint, &netns).await
    }

    /// Opens the pod side of `endpoint` to put its egress limit's pacer in
    /// place: a netns the daemon cannot open, or one without the pod
    /// interface, is an error naming it.
    pub(super) async fn open_for_limit(endpoint: &Endpoint) -> Result<PodSide, DataplaneError> {
        let path = &endpoint.spec.netns;
        let netns = File::open(path).map_err(|source| DataplaneError::Io {
            call: "open the pod netns (to pace the egress limit)",
            path: path.into(),
            source,
        })?;
        Self::open_in(endpoint, &netns)
            .await?
            .ok_or_else(|| DataplaneError::NoLink {
                ifname: endpoint.spec.owner.ifname.clone(),
                reason: "the pod interface the egress limit is paced on is not in the pod netns",
            })
    }

    /// The pod side of `endpoint` in `netns`; `None` without its interface.
    async fn open_in(endpoint: &Endpoint, netns: &File) -> Result<Option<PodSide>, DataplaneError> {
        let ifname = endpoint.spec.owner.ifname.clone();
        let handle = netlink::handle_in(netns).map_err(|source| DataplaneError::Io {
            call: "netlink socket in pod netns",
            path: endpoint.spec.netns.clone().into(),
            source,
        })?;
        let Some(ifindex) = netlink::link_index(&handle, &ifname).await? else {
            return Ok(None);
        };
        Ok(Some(PodSide {
            handle,
            ifindex,
            ifname,
        }))
    }

    /// Root qdisc and Sarena's egress filter, as they are.
    pub(super) async fn state(&self) -> Result<PodSideState, DataplaneError> {
        let root = qdisc::root(&self.handle, self.ifindex).await?;
        let filter = tc::query(&self.handle, self.ifindex)
            .await?
            .into_iter()
            .find(|a| a.direction == pins::Direction::Egress);
        Ok(PodSideState { root, filter })
    }

    /// `fq` as the root qdisc when `paced`, then `prog` on the egress hook
    /// (replacing what is at Sarena's position): frames are only ever paced
    /// into `fq`. Without `fq` (policing), the device keeps its own root.
    pub(super) async fn attach(
        &self,
        prog: &SchedClassifier,
        paced: bool,
    ) -> Result<(), DataplaneError> {
        if paced {
            qdisc::set_root(&self.handle, self.ifindex, Root::Fq).await?;
        }
        qdisc::add_clsact(&self.handle, self.ifindex).await?;
        let fd = prog.fd().map_err(|source| BpfError::Program {
            call: "program fd",
            program: POD_EGRESS_PROG,
            source: Box::new(source),
        })?;
        let raw = u32::try_from(fd.as_fd().as_raw_fd()).unwrap_or(u32::MAX);
        let mut message = self.filter_message();
        message
            .attributes
            .push(TcAttribute::Kind("bpf".to_string()));
        message.attributes.push(TcAttribute::Options(vec![
            TcOption::Bpf(TcFilterBpfOption::ProgFd(raw)),
            TcOption::Bpf(TcFilterBpfOption::ProgName(POD_EGRESS_PROG.to_string())),
            TcOption::Bpf(TcFilterBpfOption::Flags(TcBpfFlags::DirectAction)),
        ]));
        qdisc::request(
            &self.handle,
            RouteNetlinkMessage::NewTrafficFilter(message),
            NLM_F_CREATE | NLM_F_REPLACE,
        )
        .await
        .map_err(|e| NetlinkError::new("filter add", self.object(), e))?;
        Ok(())
    }

    /// Removes Sarena's egress filter, then its root qdisc; what is already
    /// gone is fine.
    pub(super) async fn detach(&self) -> Result<(), DataplaneError> {
        let mut message = self.filter_message();
        // Handle 0: every filter at Sarena's priority (there is only ours).
        message.header.handle = TcHandle::UNSPEC;
        message.header.info = u32::from(PRIORITY) << 16;
        match qdisc::request(
            &self.handle,
            RouteNetlinkMessage::DelTrafficFilter(message),
            0,
        )
        .await
        {
            Err(e) if !matches!(errno(&e), Some(libc::ENOENT | libc::EINVAL | libc::ENODEV)) => {
                return Err(NetlinkError::new("filter delete", self.object(), e).into());
            }
            _ => {}
        }
        qdisc::remove_root(&self.handle, self.ifindex).await?;
        Ok(())
    }

    /// A filter message for Sarena's position on the egress hook.
    fn filter_message(&self) -> TcMessage {
        let mut message = TcMessage::with_index(i32::try_from(self.ifindex).unwrap_or(i32::MAX));
        message.header.parent = TcHandle {
            major: u16::MAX,
            minor: TcHandle::MIN_EGRESS,
        };
        message.header.handle = TcHandle::from(u32::from(HANDLE));
        message.header.info = (u32::from(PRIORITY) << 16) | u32::from(ETH_P_ALL.to_be());
        message
    }

    fn object(&self) -> String {
        format!("egress of {} in the pod netns", self.ifname)
    }
}

/// Loads an instance of `pod_egress` for the pod behind `host_ifindex`,
/// with the maps pinned under `pin_dir`. The returned object owns the
/// program until it is attached (the filter then keeps it loaded).
pub(super) fn load_instance(
    object: &[u8],
    pin_dir: &Path,
    host_ifindex: u32,
) -> Result<aya::Ebpf, BpfError> {
    let mut ebpf = super::load::loader(pin_dir)
        .override_global(POD_HOST_IFINDEX_GLOBAL, &host_ifindex, true)
        .load(object)
        .map_err(|source| BpfError::Load {
            pin_dir: pin_dir.to_owned(),
            source: Box::new(source),
        })?;
    super::load::program(&mut ebpf, POD_EGRESS_PROG)?
        .load()
        .map_err(|source| BpfError::Program {
            call: "load program",
            program: POD_EGRESS_PROG,
            source: Box::new(source),
        })?;
    Ok(ebpf)
}
