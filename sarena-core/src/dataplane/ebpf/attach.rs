//! One endpoint on and off the dataplane: its map entries, pacers and its
//! two filters, on its own device only.

use nix::net::if_::if_nametoindex;

use super::error::BpfError;
use super::load::program;
use super::pins::Direction;
use super::tc::{self, TcAttachment};
use super::{ShapingMode, State};
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
        let ifname = &endpoint.spec.host_ifname;
        let present = host_ifindex(ifname);
        if present != Some(endpoint.spec.host_ifindex) {
            return Err(BpfError::IfindexMismatch {
                ifname: ifname.clone(),
                registry: endpoint.spec.host_ifindex,
                host: present,
            });
        }
        // Counters, pacers and entries first, then the programs: frames only
        // meet fully set-up maps.
        self.attach_policy(endpoint)?;
        let mut changed = self.maps.write(endpoint)?;
        let mode = self.shaping.unwrap_or(ShapingMode::Paced);
        self.pacing.write(endpoint, mode, &mut changed)?;
        for direction in Direction::ALL {
            let name = program_for(endpoint, direction);
            if runs(current, direction, name, self.tag(name)) {
                continue;
            }
            tc::attach(program(&mut self.ebpf, name)?, ifname, direction)?;
            changed = true;
        }
        Ok(changed)
    }

    /// Whether both hooks of `endpoint`'s device, with the filters
    /// `current`, run the programs this dataplane gives it (same name and tag).
    pub(super) fn runs_ours(&self, endpoint: &Endpoint, current: &[TcAttachment]) -> bool {
        Direction::ALL.into_iter().all(|direction| {
            let name = program_for(endpoint, direction);
            runs(current, direction, name, self.tag(name))
        })
    }

    /// Removes `endpoint`'s filters, map entries and counters, as far as it
    /// can; every failure is reported.
    pub(super) fn detach(&mut self, endpoint: &Endpoint) -> Result<(), BpfError> {
        let mut errors = Vec::new();
        // Only from our own device, still carrying Sarena's mark: a newer one
        // may have taken the name. (tcx links of earlier versions are gone
        // since the start-up reconcile.)
        if host_ifindex(&endpoint.spec.host_ifname) == Some(endpoint.spec.host_ifindex)
            && carries_mark(&endpoint.spec.host_ifname)
        {
            for direction in Direction::ALL {
                if let Err(e) = tc::detach(&endpoint.spec.host_ifname, direction) {
                    errors.push(e);
                }
            }
        }
        self.maps.remove(endpoint, &mut errors);
        self.detach_policy(endpoint, &mut errors);
        if let Err(e) = self.pacing.remove(endpoint.spec.host_ifindex) {
            errors.push(e);
        }
        BpfError::collect("detach", &endpoint.spec.host_ifname, errors)
    }
}

/// Whether `current` has, on `direction`'s hook, the program `name` with the
/// tag `tag` (a hash of its code: equal tags mean the same code; `None`, a
/// program this dataplane did not load, matches nothing).
pub(super) fn runs(
    current: &[TcAttachment],
    direction: Direction,
    name: &str,
    tag: Option<u64>,
) -> bool {
    current
        .iter()
        .any(|a| a.direction == direction && a.program == name && Some(a.tag) == tag)
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

/// The program `endpoint` runs on `direction`'s hook of its host veth:
/// `from_container` on ingress; on egress `to_container`, or
/// `to_container_bw` when traffic to the pod is limited.
pub(super) fn program_for(endpoint: &Endpoint, direction: Direction) -> &'static str {
    match direction {
        Direction::Ingress => direction.program(),
        Direction::Egress => super::bandwidth::egress_program(endpoint),
    }
}

/// The ifindex the host has under `ifname`, if any.
pub(super) fn host_ifindex(ifname: &str) -> Option<u32> {
    if_nametoindex(ifname).ok()
}
