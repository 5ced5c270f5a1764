//! Creating the veth pair: host end in the host netns, peer born in the pod netns.

use std::fs::File;
use std::os::fd::AsRawFd;

use rtnetlink::packet_route::link::{InfoData, InfoKind, InfoVeth};
use rtnetlink::{Handle, LinkMessageBuilder, LinkUnspec, LinkVeth};

use super::query::{delete_link_by_name, errno, link_by_name, netlink_error};
use crate::links::mac::{format_mac, parse_mac, random_mac};
use crate::links::{LinkError, VethPair, VethSpec};

/// `ip link add HOST mtu M address HMAC up type veth peer name IFNAME mtu M address PMAC netns FD`:
/// one request, the peer born in the pod netns under its final name.
///
/// The peer never exists in the host netns, so two pods' `eth0` can never meet.
/// If the host name is taken (a half-done earlier ADD of the same attachment),
/// the stale link is removed and creation retried once; if the pod name is
/// taken in the pod netns (the caller did not remove it first), that is an error.
pub(crate) async fn create(
    host: &Handle,
    netns: &File,
    spec: &VethSpec,
) -> Result<VethPair, LinkError> {
    let host_mac = random_mac();
    let pod_mac = match &spec.pod_mac {
        Some(text) => parse_mac(text).ok_or_else(|| LinkError::Netlink {
            call: "link add",
            ifname: spec.pod_ifname.clone(),
            message: format!("invalid MAC {text:?}"),
        })?,
        None => random_mac(),
    };
    let message = || {
        let peer = LinkMessageBuilder::<LinkUnspec>::new()
            .name(spec.pod_ifname.clone())
            .mtu(spec.mtu)
            .address(pod_mac.to_vec())
            .setns_by_fd(netns.as_raw_fd())
            .build();
        LinkMessageBuilder::<LinkVeth>::new_with_info_kind(InfoKind::Veth)
            .name(spec.host_ifname.clone())
            .mtu(spec.mtu)
            .address(host_mac.to_vec())
            .up()
            .set_info_data(InfoData::Veth(InfoVeth::Peer(peer)))
            .build()
    };
    match host.link().add(message()).execute().await {
        Ok(()) => {}
        Err(e) if errno(&e) == Some(libc::EEXIST) => {
            // Either name may be taken: the host one by a stale link of an
            // earlier ADD (removed here), the pod one by whatever the caller
            // did not remove first (an error).
            if !delete_link_by_name(host, &spec.host_ifname).await? {
                return Err(LinkError::Netlink {
                    call: "link add",
                    ifname: spec.pod_ifname.clone(),
                    message: format!("{} already exists in the pod netns", spec.pod_ifname),
                });
            }
            tracing::warn!(host_ifname = %spec.host_ifname, "removed a stale host link; retrying");
            host.link()
                .add(message())
                .execute()
                .await
                .map_err(|e| netlink_error("link add", &spec.host_ifname, e))?;
        }
        Err(e) => return Err(netlink_error("link add", &spec.host_ifname, e)),
    }
    match finish(host, spec).await {
        Ok(host_ifindex) => Ok(VethPair {
            host_ifname: spec.host_ifname.clone(),
            host_ifindex,
            host_mac: format_mac(&host_mac),
            pod_ifname: spec.pod_ifname.clone(),
            pod_mac: format_mac(&pod_mac),
        }),
        Err(error) => {
            if let Err(cleanup) = delete_link_by_name(host, &spec.host_ifname).await {
                tracing::warn!(%cleanup, "could not remove the half-created veth");
            }
            Err(error)
        }
    }
}

/// Host end: `rp_filter` off. Returns the host ifindex.
async fn finish(host: &Handle, spec: &VethSpec) -> Result<u32, LinkError> {
    let host_link = link_by_name(host, &spec.host_ifname)
        .await?
        .ok_or_else(|| LinkError::Netlink {
            call: "link get",
            ifname: spec.host_ifname.clone(),
            message: "host end vanished right after creation".into(),
        })?;
    disable_rp_filter(&spec.host_ifname)?;
    Ok(host_link.header.index)
}

/// `sysctl net.ipv4.conf.IFNAME.rp_filter=0`.
fn disable_rp_filter(ifname: &str) -> Result<(), LinkError> {
    let path = format!("/proc/sys/net/ipv4/conf/{ifname}/rp_filter");
    std::fs::write(&path, b"0").map_err(|source| LinkError::Io {
        call: "rp_filter",
        ifname: ifname.to_string(),
        source,
    })
}
