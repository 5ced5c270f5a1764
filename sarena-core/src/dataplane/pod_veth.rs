//! The check every dataplane makes before it touches an endpoint's host
//! interface: it must be one of Sarena's pod veths, i.e. a `veth` named
//! `lxc…` in Sarena's link group ([`crate::links::LINK_GROUP`], set by the
//! plugin in the very request that creates the pair), with the ifindex the
//! endpoint names (release 0.1.0's plugin, which did not mark its veths:
//! unmarked, under the name derived from the endpoint's attachment).
//! Anything else (the uplink, `lo`, another plugin's veth,
//! Sarena's own gateway or VXLAN devices) is refused before any qdisc,
//! filter, sysctl or route is changed on it.

use rtnetlink::Handle;
use rtnetlink::packet_route::link::{InfoKind, LinkAttribute, LinkInfo, LinkMessage};

use super::DataplaneError;
use crate::api::Endpoint;
use crate::links::{LINK_GROUP, host_ifname};
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
    if !marked_or_release_0_1(netlink::link_group(&link), endpoint) {
        return Err(refuse(
            "it is not in Sarena's link group (Sarena did not create it)",
        ));
    }
    if !is_veth(&link) {
        return Err(refuse("it is not a veth"));
    }
    Ok(())
}

/// Whether a link in `group` can be `endpoint`'s host veth: in Sarena's
/// link group, or, for the plugin of release 0.1.0 (which creates its veths
/// in the default group 0; a new daemon serves it during an upgrade),
/// unmarked but under the very name Sarena derives from the endpoint's
/// attachment (`lxc` and the first 12 hex digits of sha256 of
/// `containerid:ifname`, the same in every release), which another plugin's
/// veth has only by a 48-bit accident.
pub(crate) fn marked_or_release_0_1(group: u32, endpoint: &Endpoint) -> bool {
    group == LINK_GROUP
        || (group == 0
            && endpoint.spec.host_ifname
                == host_ifname(
                    &endpoint.spec.owner.container_id,
                    &endpoint.spec.owner.ifname,
                ))
}

/// Whether `link` is a veth.
pub(crate) fn is_veth(link: &LinkMessage) -> bool {
    link.attributes.iter().any(|a| match a {
        LinkAttribute::LinkInfo(infos) => infos
            .iter()
            .any(|i| matches!(i, LinkInfo::Kind(InfoKind::Veth))),
        _ => false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::Attachment;

    fn endpoint(host_ifname: &str) -> Endpoint {
        let owner = Attachment {
            container_id: "c1".into(),
            ifname: "eth0".into(),
        };
        Endpoint {
            spec: crate::api::EndpointSpec::for_tests(owner, host_ifname, vec![]),
            created_at: 0,
        }
    }

    #[test]
    fn marked_links_pass_and_unmarked_ones_only_under_the_derived_name() {
        let derived = host_ifname("c1", "eth0");
        assert!(marked_or_release_0_1(LINK_GROUP, &endpoint(&derived)));
        assert!(marked_or_release_0_1(
            LINK_GROUP,
            &endpoint("lxc000000000000")
        ));
        // release 0.1.0's veth: group 0, Sarena's name for this attachment
        assert!(marked_or_release_0_1(0, &endpoint(&derived)));
        // another plugin's lxc veth, or another attachment's name
        assert!(!marked_or_release_0_1(0, &endpoint("lxc000000000000")));
        assert!(!marked_or_release_0_1(
            0,
            &endpoint(&host_ifname("c2", "eth0"))
        ));
        // another group altogether, even under the derived name
        assert!(!marked_or_release_0_1(5, &endpoint(&derived)));
    }
}
