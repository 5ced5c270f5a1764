//! `to_network` and `from_network` on the node's own devices (the vxlan
//! device, the uplink): on egress, the deferred NetworkPolicy egress check
//! of pods' packets the host stack translated and sends off the node
//! (`sarena_common::policy::MARK_EGRESS_DEFERRED`) and the record of the
//! host stack's flows to other nodes' pods; on ingress, other nodes' pods'
//! packets straight into local pods (`sarena_common::peers`).
//!
//! Attached like the pod programs, as a `cls_bpf` filter at Sarena's
//! position on the device's `clsact` hooks (see [`super::tc`]), so it
//! stays attached while the daemon is down. These devices are shared with
//! the rest of the node: a filter of another program at that position is
//! left alone (an error), and detaching removes only Sarena's own.

use std::collections::BTreeSet;

use rtnetlink::packet_route::route::{RouteAttribute, RouteMessage, RouteProtocol};
use sarena_common::peers::FROM_NETWORK_PROG;
use sarena_common::policy::TO_NETWORK_PROG;

use super::AyaDataplane;
use super::attach::host_ifindex;
use super::error::BpfError;
use super::load::program;
use super::pins::Direction;
use super::tc::{self, TcAttachment};
use crate::dataplane::DataplaneError;

/// Sarena's programs on a node device, by hook, in the order they are
/// attached.
const HOOKS: [(Direction, &str); 2] = [
    (Direction::Egress, TO_NETWORK_PROG),
    (Direction::Ingress, FROM_NETWORK_PROG),
];

/// Whether `program` is one of the node devices' programs (not a pod's).
pub(super) fn is_network_hook(program: &str) -> bool {
    HOOKS.iter().any(|(_, name)| *name == program)
}

/// Sarena's filter on the `direction` hook, among `current`.
fn on(current: &[TcAttachment], direction: Direction) -> Option<&TcAttachment> {
    current.iter().find(|a| a.direction == direction)
}

/// The ifindexes of the devices pod traffic leaves the node by, among
/// `routes`: those of the default routes and of Sarena's peer routes (both
/// routing modes: the uplink in native routing, the VXLAN device in vxlan).
pub(super) fn exit_devices(routes: &[RouteMessage]) -> BTreeSet<u32> {
    let peer = RouteProtocol::Other(crate::cluster::SARENA_PEER_ROUTE_PROTOCOL);
    routes
        .iter()
        .filter(|r| r.header.destination_prefix_length == 0 || r.header.protocol == peer)
        .flat_map(|r| {
            r.attributes.iter().filter_map(|a| match a {
                RouteAttribute::Oif(index) => Some(*index),
                _ => None,
            })
        })
        .collect()
}

impl AyaDataplane {
    /// Puts `to_network` on every device pod traffic leaves the node by
    /// (those of the default routes and of the peer routes, and the VXLAN
    /// device when there is one), so the
    /// egress decision deferred past the host stack's translation is taken
    /// there. Idempotent; a device that cannot take it is reported and the
    /// others still get it. Returns the devices that have it.
    pub async fn ensure_network_hooks(&self) -> Result<Vec<String>, DataplaneError> {
        let routes = {
            let host = self.host_netlink().await?;
            crate::netlink::all_routes(&host, "exit devices").await?
        };
        let mut names: BTreeSet<String> = exit_devices(&routes)
            .into_iter()
            .filter_map(|index| nix::net::if_::if_indextoname(index).ok())
            .filter_map(|name| name.into_string().ok())
            .collect();
        if host_ifindex(crate::cluster::VXLAN_DEVICE).is_some() {
            names.insert(crate::cluster::VXLAN_DEVICE.to_owned());
        }
        let mut hooked = Vec::new();
        for name in names {
            match self.attach_network_hook(&name).await {
                Ok(()) => hooked.push(name),
                Err(error) => tracing::warn!(
                    device = %name,
                    error = %crate::error_chain(&error),
                    "NetworkPolicy: the deferred egress check is not on this device"
                ),
            }
        }
        Ok(hooked)
    }

    /// Puts `to_network` on the tc egress and `from_network` on the tc
    /// ingress of the device `ifname`. Idempotent: a filter already running
    /// this dataplane's loaded program is kept, any other version or load of
    /// it replaced in place;
    /// another program at Sarena's position is [`BpfError::ForeignFilter`]
    /// (checked on both hooks before either is touched). A `clsact` the
    /// device lacks is added, and recorded first in the ledger when there is
    /// one ([`AyaDataplane::with_ledger`]; a failed record fails the call
    /// before anything changed).
    pub async fn attach_network_hook(&self, ifname: &str) -> Result<(), DataplaneError> {
        let Some(ifindex) = host_ifindex(ifname) else {
            return Err(BpfError::NoDevice {
                ifname: ifname.to_owned(),
            }
            .into());
        };
        let (current, clsact) = {
            let host = self.host_netlink().await?;
            let current = tc::query(&host, ifindex).await?;
            (current, super::qdisc::has_clsact(&host, ifindex).await?)
        };
        let mut state = self.lock();
        let mut todo = Vec::new();
        for (direction, name) in HOOKS {
            if let Some(found) = on(&current, direction) {
                if found.program != name {
                    return Err(BpfError::ForeignFilter {
                        ifname: ifname.to_owned(),
                        direction,
                        program: name,
                        found: found.program.clone(),
                    }
                    .into());
                }
                // Only this load's own program is kept: the same code of
                // another load (another pin dir, pins made anew) reads
                // other maps, and is replaced in place like an older one.
                if found.program_id == loaded_id(&mut state.ebpf, name)? {
                    continue;
                }
            }
            todo.push((direction, name));
        }
        // Write-ahead: the `clsact` `tc::attach` is about to add is
        // recorded first, so an uninstall removes it (and only it).
        if let Some(ledger) = &self.ledger
            && !clsact
            && !todo.is_empty()
        {
            ledger.record_clsact(ifindex, ifname)?;
        }
        // Egress first: the host stack's flows to other nodes' pods are
        // recorded before `from_network` delivers any answer directly.
        for (direction, name) in todo {
            tc::attach(program(&mut state.ebpf, name)?, ifname, direction)?;
        }
        Ok(())
    }

    /// Removes `from_network` and `to_network` from the device `ifname`,
    /// and only them: another program at Sarena's position, a missing
    /// filter or device are left as they are.
    pub async fn detach_network_hook(&self, ifname: &str) -> Result<(), DataplaneError> {
        let Some(ifindex) = host_ifindex(ifname) else {
            return Ok(());
        };
        let current = {
            let host = self.host_netlink().await?;
            tc::query(&host, ifindex).await?
        };
        // Ingress first: no answer is delivered directly once the flows
        // stop being recorded.
        for (direction, name) in HOOKS.iter().rev() {
            if let Some(found) = on(&current, *direction)
                && found.program == *name
            {
                tc::detach(ifname, *direction)?;
            }
        }
        Ok(())
    }
}

/// The kernel id of this load's program `name`.
fn loaded_id(ebpf: &mut aya::Ebpf, name: &'static str) -> Result<u32, BpfError> {
    let info = program(ebpf, name)?
        .info()
        .map_err(|source| BpfError::Program {
            call: "program info",
            program: name,
            source: Box::new(source),
        })?;
    Ok(info.id())
}

#[cfg(test)]
mod tests {
    use rtnetlink::packet_route::route::RouteMessage;

    use super::*;

    fn route(prefix_len: u8, protocol: RouteProtocol, oif: u32) -> RouteMessage {
        let mut r = RouteMessage::default();
        r.header.destination_prefix_length = prefix_len;
        r.header.protocol = protocol;
        r.attributes.push(RouteAttribute::Oif(oif));
        r
    }

    #[test]
    fn traffic_leaves_by_the_default_and_the_peer_routes_devices() {
        let peer = RouteProtocol::Other(crate::cluster::SARENA_PEER_ROUTE_PROTOCOL);
        let routes = [
            route(0, RouteProtocol::Boot, 2),
            route(24, peer, 7),
            route(24, RouteProtocol::Kernel, 9),
            route(32, RouteProtocol::Static, 11),
        ];
        assert_eq!(exit_devices(&routes), BTreeSet::from([2, 7]));
    }
}
