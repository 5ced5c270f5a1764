//! The check every dataplane makes before it touches an endpoint's host
//! interface: it must be one of Sarena's pod veths, i.e. a `veth` named
//! `lxc…` in Sarena's link group ([`crate::links::LINK_GROUP`], set by the
//! plugin in the very request that creates the pair), with the ifindex the
//! endpoint names. Anything else (the uplink, `lo`, another plugin's veth,
//! Sarena's own gateway or VXLAN devices) is refused before any qdisc,
//! filter, sysctl or route is changed on it.

use rtnetlink::Handle;
use rtnetlink::packet_route::link::{InfoKind, LinkAttribute, LinkInfo, LinkMessage};

use super::DataplaneError;
use crate::api::Endpoint;
use crate::links::LINK_GROUP;
use crate::netlink;

/// The prefix of every pod veth's host end (see [`crate::links::host_ifname`]).
const POD_VETH_PREFIX: &str = "lxc";

/// Refuses `endpoint` unless its host interface is one of Sarena's pod
/// veths (see the [module docs](self)).
pub(crate) async fn check_pod_veth(
    handle: &Handle,
    endpoint: &Endpoint,
) -> Result<(), DataplaneError> {
    let ifname = &endpoint.spec.host_ifname;
    let refuse = |reason: &'static str| DataplaneError::NotAPodVeth {
        ifname: ifname.clone(),
        reason,
    };
    if !ifname.starts_with(POD_VETH_PREFIX) {
        return Err(refuse("its name does not start with lxc"));
    }
    let Some(link) = netlink::link_by_name(handle, ifname).await? else {
        return Err(refuse("no such interface"));
    };
    if link.header.index != endpoint.spec.host_ifindex {
        return Err(refuse("its ifindex is not the endpoint's"));
    }
    if netlink::link_group(&link) != LINK_GROUP {
        return Err(refuse(
            "it is not in Sarena's link group (Sarena did not create it)",
        ));
    }
    if !is_veth(&link) {
        return Err(refuse("it is not a veth"));
    }
    Ok(())
}

fn is_veth(link: &LinkMessage) -> bool {
    link.attributes.iter().any(|a| match a {
        LinkAttribute::LinkInfo(infos) => infos
            .iter()
            .any(|i| matches!(i, LinkInfo::Kind(InfoKind::Veth))),
        _ => false,
    })
}
