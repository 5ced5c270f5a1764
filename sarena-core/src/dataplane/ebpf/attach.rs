//! One endpoint on and off the dataplane: its map entries and its two
//! filters, on its own device only.

use nix::net::if_::if_nametoindex;

use super::State;
use super::error::BpfError;
use super::load::program;
use super::pins::Direction;
use super::tc::{self, TcAttachment};
use crate::api::Endpoint;

impl State {
    /// Makes `endpoint` forwardable; `true` when something was missing.
    /// `current` are the filters already on its device (see [`tc::query`]):
    /// a hook whose filter runs this daemon's program is left alone, any
    /// other is (re)attached.
    pub(super) fn attach(
        &mut self,
        endpoint: &Endpoint,
        current: &[TcAttachment],
    ) -> Result<bool, BpfError> {
        let ifname = &endpoint.host_ifname;
        let present = host_ifindex(ifname);
        if present != Some(endpoint.host_ifindex) {
            return Err(BpfError::IfindexMismatch {
                ifname: ifname.clone(),
                registry: endpoint.host_ifindex,
                host: present,
            });
        }
        // Counters and entries first, then the programs: frames only meet
        // fully set-up maps.
        let mut changed = self.maps.write(endpoint)?;
        for (direction, tag) in Direction::ALL.into_iter().zip(self.tags) {
            if runs(current, direction, tag) {
                continue;
            }
            tc::attach(
                program(&mut self.ebpf, direction.program())?,
                ifname,
                direction,
            )?;
            changed = true;
        }
        Ok(changed)
    }

    /// Whether both hooks of a device with the filters `current` run this
    /// dataplane's programs (same name and tag).
    pub(super) fn runs_ours(&self, current: &[TcAttachment]) -> bool {
        Direction::ALL
            .into_iter()
            .zip(self.tags)
            .all(|(direction, tag)| runs(current, direction, tag))
    }

    /// Removes `endpoint`'s filters, map entries and counters, as far as it
    /// can; every failure is reported.
    pub(super) fn detach(&mut self, endpoint: &Endpoint) -> Result<(), BpfError> {
        let mut errors = Vec::new();
        // Only from our own device, still carrying Sarena's mark: a newer one
        // may have taken the name. (tcx links of earlier versions are gone
        // since the start-up reconcile.)
        if host_ifindex(&endpoint.host_ifname) == Some(endpoint.host_ifindex)
            && carries_mark(&endpoint.host_ifname)
        {
            for direction in Direction::ALL {
                if let Err(e) = tc::detach(&endpoint.host_ifname, direction) {
                    errors.push(e);
                }
            }
        }
        self.maps.remove(endpoint, &mut errors);
        BpfError::collect("detach", &endpoint.host_ifname, errors)
    }
}

/// Whether `current` has, on `direction`'s hook, the program of that hook
/// with the tag `tag` (a hash of its code: equal tags mean the same code).
pub(super) fn runs(current: &[TcAttachment], direction: Direction, tag: u64) -> bool {
    current
        .iter()
        .any(|a| a.direction == direction && a.program == direction.program() && a.tag == tag)
}

/// Whether the host device `ifname` is in Sarena's link group
/// ([`crate::links::LINK_GROUP`]), per sysfs.
fn carries_mark(ifname: &str) -> bool {
    let path = format!("/sys/class/net/{ifname}/netdev_group");
    std::fs::read_to_string(path)
        .ok()
        .and_then(|group| group.trim().parse::<u32>().ok())
        == Some(crate::links::LINK_GROUP)
}

/// The ifindex the host has under `ifname`, if any.
pub(super) fn host_ifindex(ifname: &str) -> Option<u32> {
    if_nametoindex(ifname).ok()
}
