//! The uninstall's kernel steps that need no dataplane: the pods' host
//! veths, the peer routes, the VXLAN device and its filter.

use std::path::Path;

use rtnetlink::Handle;

use super::{Line, StepError, Verdict};
use crate::cluster::rtnl::RtnetlinkPeers;
use crate::cluster::{Overlay, RouteTable, VXLAN_DEVICE, VXLAN_FILTER_TABLE};
use crate::dataplane::pod_veth;
use crate::links::LINK_GROUP;
use crate::netlink::{self, MarkedDeletion};

fn boxed<E: std::error::Error + Send + Sync + 'static>(
    call: &'static str,
) -> impl FnOnce(E) -> StepError {
    move |e| StepError::call(call)(Box::new(e))
}

/// Step [`super::Step::PodLinks`]: every `lxc*` link in Sarena's link
/// group, and the host veths the registry in `state_dir` records whose name
/// and ifindex still match (release 0.1.0 did not mark its veths). Each
/// takes its pod's interface with it.
pub(super) async fn pod_links(
    handle: &Handle,
    state_dir: &Path,
    dry_run: bool,
) -> Result<Vec<Line>, StepError> {
    let links = netlink::all_links(handle)
        .await
        .map_err(boxed("list links"))?;
    let mut lines = Vec::new();
    let mut unmarked = Vec::new();
    let registry = {
        let dir = state_dir.to_path_buf();
        crate::blocking::off_worker(move || crate::store::read_endpoints(&dir))
            .await
            .map_err(boxed("read the registry"))?
    };
    match registry {
        Ok(Some(endpoints)) => {
            for endpoint in endpoints {
                let (name, index) = (&endpoint.spec.host_ifname, endpoint.spec.host_ifindex);
                // Release 0.1.0's veths: unmarked, a veth, under the very
                // name Sarena derives from the endpoint's attachment (an
                // ifindex alone may be another link's after a reboot).
                let matches = links.iter().any(|l| {
                    l.header.index == index
                        && netlink::link_name(l) == Some(name.as_str())
                        && netlink::link_group(l) != LINK_GROUP
                        && pod_veth::is_veth(l)
                        && pod_veth::marked_or_release_0_1(netlink::link_group(l), &endpoint)
                });
                if matches {
                    unmarked.push((name.clone(), index));
                }
            }
        }
        Ok(None) => {}
        Err(e) => lines.push(Line::left(
            format!("registry in {}", state_dir.display()),
            format!(
                "unreadable, so unmarked pod veths were not looked for: {}",
                crate::error_chain(&e)
            ),
        )),
    }
    for link in &links {
        let Some(name) = netlink::link_name(link) else {
            continue;
        };
        if !name.starts_with("lxc") || netlink::link_group(link) != LINK_GROUP {
            continue;
        }
        let object = format!("link {name} (pod veth)");
        if dry_run {
            lines.push(Line::removed(object, true));
            continue;
        }
        match netlink::delete_marked_link(handle, name, Some(link.header.index), LINK_GROUP)
            .await
            .map_err(boxed("delete a pod veth"))?
        {
            MarkedDeletion::Removed => lines.push(Line::removed(object, false)),
            MarkedDeletion::Absent => {}
            MarkedDeletion::Foreign { group } => lines.push(Line::left(
                object,
                format!("its link group changed to {group:#x}"),
            )),
        }
    }
    for (name, index) in unmarked {
        let object = format!("link {name} (unmarked pod veth in the registry)");
        if !dry_run {
            match handle.link().del(index).execute().await {
                Ok(()) => {}
                Err(e) if netlink::errno(&e) == Some(libc::ENODEV) => continue,
                Err(e) => {
                    return Err(boxed("delete a pod veth")(netlink::NetlinkError::new(
                        "link del", &name, e,
                    )));
                }
            }
        }
        lines.push(Line::removed(object, dry_run));
    }
    Ok(lines)
}

/// Step [`super::Step::PeerRoutes`]: every route of proto 91 in the main
/// table, both families.
pub(super) async fn peer_routes(
    peers: &RtnetlinkPeers,
    dry_run: bool,
) -> Result<Vec<Line>, StepError> {
    let routes = peers
        .peer_routes()
        .await
        .map_err(boxed("list peer routes"))?;
    let mut lines = Vec::new();
    for route in routes {
        if !dry_run {
            peers
                .delete_route(&route)
                .await
                .map_err(boxed("delete a peer route"))?;
        }
        lines.push(Line::removed(
            format!(
                "route {route} proto {}",
                crate::cluster::SARENA_PEER_ROUTE_PROTOCOL
            ),
            dry_run,
        ));
    }
    Ok(lines)
}

/// Step [`super::Step::Vxlan`]: the device `sarena.vxlan` when it is
/// marked (its FDB, neighbours, addresses and routes go with it), then the
/// table `inet sarena_vxlan`: never a device without its filter.
pub(super) async fn vxlan(
    handle: &Handle,
    peers: &RtnetlinkPeers,
    dry_run: bool,
) -> Result<Vec<Line>, StepError> {
    let mut lines = Vec::new();
    let object = format!("device {VXLAN_DEVICE}");
    let device = netlink::link_by_name(handle, VXLAN_DEVICE)
        .await
        .map_err(boxed("find the VXLAN device"))?;
    match device {
        None => {}
        Some(link) if netlink::link_group(&link) != LINK_GROUP => lines.push(Line::kept(
            object,
            format!(
                "not Sarena's (link group {:#x})",
                netlink::link_group(&link)
            ),
        )),
        Some(_) if dry_run => lines.push(Line::removed(object, true)),
        Some(_) => {
            if peers
                .remove_device(VXLAN_DEVICE)
                .await
                .map_err(boxed("remove the VXLAN device"))?
            {
                lines.push(Line::removed(object, false));
            } else {
                lines.push(Line::left(object, "not a VXLAN device"));
            }
        }
    }
    let listing = crate::dataplane::kernel::nft::list_json_off_worker(vec!["tables".to_owned()])
        .await
        .map_err(boxed("list nftables tables"))?;
    if has_table(&listing, "inet", VXLAN_FILTER_TABLE) {
        // A marked device that could not be removed keeps the filter
        // that guards it: never a device without its filter.
        if lines
            .iter()
            .any(|l| matches!(l.verdict, Verdict::Left { .. }))
        {
            lines.push(Line::kept(
                format!("nft table inet {VXLAN_FILTER_TABLE}"),
                format!("it guards {VXLAN_DEVICE}, which is left"),
            ));
            return Ok(lines);
        }
        if !dry_run {
            peers
                .remove_filter()
                .await
                .map_err(boxed("remove the VXLAN filter"))?;
        }
        lines.push(Line::removed(
            format!("nft table inet {VXLAN_FILTER_TABLE}"),
            dry_run,
        ));
    }
    Ok(lines)
}

/// Whether `nft -j list tables` output lists the table `family name`.
pub(super) fn has_table(listing: &serde_json::Value, family: &str, name: &str) -> bool {
    listing
        .get("nftables")
        .and_then(|v| v.as_array())
        .into_iter()
        .flatten()
        .filter_map(|entry| entry.get("table"))
        .any(|table| {
            table.get("family").and_then(|f| f.as_str()) == Some(family)
                && table.get("name").and_then(|n| n.as_str()) == Some(name)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_exact_table_is_found() {
        let listing = serde_json::json!({"nftables": [
            {"metainfo": {"version": "1.0.6"}},
            {"table": {"family": "inet", "name": "sarenax", "handle": 1}},
            {"table": {"family": "ip", "name": "sarena_vxlan", "handle": 2}},
        ]});
        assert!(!has_table(&listing, "inet", "sarena_vxlan"));
        assert!(has_table(&listing, "inet", "sarenax"));
        assert!(!has_table(&serde_json::json!({}), "inet", "sarena_vxlan"));
    }
}
