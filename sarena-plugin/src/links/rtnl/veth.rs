//! Creating the veth pair: host end in the host netns, peer born in the pod netns.

use std::fs::File;
use std::os::fd::AsRawFd;

use rtnetlink::packet_route::link::{InfoData, InfoKind, InfoVeth};
use rtnetlink::{Handle, LinkMessageBuilder, LinkUnspec, LinkVeth};

use super::ipv6;
use crate::links::{LINK_GROUP, LinkError, VethPair, VethSpec};
use crate::mac::MacAddr;
use crate::netlink::{MarkedDeletion, NetlinkError, delete_marked_link, errno, link_index};
use crate::sysctl;

/// `ip link add HOST mtu M address HMAC group G up type veth peer name IFNAME mtu M address PMAC group G netns FD`:
/// one request, the peer born in the pod netns under its final name, both
/// ends born with Sarena's mark ([`LINK_GROUP`]).
///
/// The peer never exists in the host netns, so two pods' `eth0` can never meet.
/// If the host name is taken by a link of Sarena's (a half-done earlier ADD of
/// the same attachment), the stale link is removed and creation retried once;
/// a link of that name that is not Sarena's is left alone and is an error, as
/// is the pod name taken in the pod netns (the caller did not remove it first).
pub(crate) async fn create(
    host: &Handle,
    netns: &File,
    spec: &VethSpec,
) -> Result<VethPair, LinkError> {
    let host_mac = MacAddr::random_local();
    let pod_mac = spec.pod_mac.unwrap_or_else(MacAddr::random_local);
    let message = || {
        let peer = LinkMessageBuilder::<LinkUnspec>::new()
            .name(spec.pod_ifname.clone())
            .mtu(spec.mtu)
            .address(pod_mac.octets().to_vec())
            .link_group(LINK_GROUP)
            .setns_by_fd(netns.as_raw_fd())
            .build();
        LinkMessageBuilder::<LinkVeth>::new_with_info_kind(InfoKind::Veth)
            .name(spec.host_ifname.clone())
            .mtu(spec.mtu)
            .address(host_mac.octets().to_vec())
            .link_group(LINK_GROUP)
            .up()
            .set_info_data(InfoData::Veth(InfoVeth::Peer(peer)))
            .build()
    };
    let added = {
        let _phase = crate::phases::start(|| "netlink link add (veth pair)");
        host.link().add(message()).execute().await
    };
    match added {
        Ok(()) => {}
        Err(e) if errno(&e) == Some(libc::EEXIST) => {
            // Either name may be taken: the host one by a stale link of an
            // earlier ADD (removed here, or by the daemon meanwhile), the pod
            // one by whatever the caller did not remove first (an error).
            let removed =
                match delete_marked_link(host, &spec.host_ifname, None, LINK_GROUP).await? {
                    MarkedDeletion::Removed => true,
                    MarkedDeletion::Absent => false,
                    MarkedDeletion::Foreign { group } => {
                        return Err(LinkError::NotOurs {
                            ifname: spec.host_ifname.clone(),
                            group,
                        });
                    }
                };
            if removed {
                tracing::warn!(host_ifname = %spec.host_ifname, "removed a stale host link; retrying");
            }
            match host.link().add(message()).execute().await {
                Ok(()) => {}
                // The host name is free, so the pod name is taken.
                Err(e) if errno(&e) == Some(libc::EEXIST) && !removed => {
                    return Err(LinkError::PodIfnameTaken {
                        ifname: spec.pod_ifname.clone(),
                        source: NetlinkError::new("link add", &spec.pod_ifname, e),
                    });
                }
                Err(e) => return Err(NetlinkError::new("link add", &spec.host_ifname, e).into()),
            }
        }
        Err(e) => return Err(NetlinkError::new("link add", &spec.host_ifname, e).into()),
    }
    match finish(host, spec).await {
        Ok(host_ifindex) => Ok(VethPair {
            host_ifname: spec.host_ifname.clone(),
            host_ifindex,
            host_mac,
            pod_ifname: spec.pod_ifname.clone(),
            pod_mac,
        }),
        Err(error) => {
            if let Err(cleanup) =
                delete_marked_link(host, &spec.host_ifname, None, LINK_GROUP).await
            {
                tracing::warn!(%cleanup, "could not remove the half-created veth");
            }
            Err(error)
        }
    }
}

/// Host end: `rp_filter` off, and its IPv6 settled before the pod end comes
/// up and brings the carrier with it: off when the pod has no IPv6 address,
/// else without the kernel's own link-local address. Returns the host
/// ifindex.
///
/// Why: the kernel walks the whole host IPv6 routing table at each carrier
/// change and removal of any link, and inserts each link's routes beside
/// every other link's. Left to the kernel, every host end added three
/// routes to it (its link-local address, `fe80::/64`, `ff00::/8`), and the
/// ADDs and DELs grew slower with the number of pods on the node (issue
/// 29). With IPv6 off, a host end adds none and takes no part in IPv6 (the
/// write itself walks the table once, as the carrier change it replaces
/// did, and may wait for the rtnl lock: the table stays small); a
/// pod with IPv6 needs it (the host's routes to the pod go over the link),
/// and keeps only `ff00::/8` plus what the dataplane adds: nothing uses the
/// kernel's link-local address, the pods' gateway being `fe80::1`, which
/// the kernel dataplane adds and the eBPF programs answer for.
async fn finish(host: &Handle, spec: &VethSpec) -> Result<u32, LinkError> {
    let _phase = crate::phases::start(|| "netlink host end: index, rp_filter, IPv6");
    let host_ifindex =
        link_index(host, &spec.host_ifname)
            .await?
            .ok_or_else(|| LinkError::HostEndVanished {
                ifname: spec.host_ifname.clone(),
            })?;
    sysctl::write(&sysctl::ipv4_conf(&spec.host_ifname, "rp_filter"), "0")?;
    if spec.host_ipv6 {
        ipv6::no_address_generation(host, host_ifindex, &spec.host_ifname).await?;
    } else {
        match sysctl::write(&sysctl::ipv6_conf(&spec.host_ifname, "disable_ipv6"), "1") {
            // a kernel without IPv6 has no such file: nothing to turn off
            Err(e) if e.source.kind() == std::io::ErrorKind::NotFound => {}
            other => other?,
        }
    }
    Ok(host_ifindex)
}
