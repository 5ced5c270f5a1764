//! `to_network` on the node's own devices (the vxlan device, the uplink):
//! the deferred NetworkPolicy egress check of pods' packets the host stack
//! translated and sends off the node (`sarena_common::policy::MARK_EGRESS_DEFERRED`).
//!
//! Attached like the pod programs, as a `cls_bpf` filter at Sarena's
//! position on the device's `clsact` egress hook (see [`super::tc`]), so it
//! stays attached while the daemon is down. These devices are shared with
//! the rest of the node: a filter of another program at that position is
//! left alone (an error), and detaching removes only Sarena's own.

use sarena_common::policy::TO_NETWORK_PROG;

use super::AyaDataplane;
use super::attach::host_ifindex;
use super::error::BpfError;
use super::load::program;
use super::pins::Direction;
use super::tc::{self, TcAttachment};
use crate::dataplane::DataplaneError;

/// Sarena's filter on the egress hook, among `current`.
fn on_egress(current: &[TcAttachment]) -> Option<&TcAttachment> {
    current.iter().find(|a| a.direction == Direction::Egress)
}

impl AyaDataplane {
    /// Puts `to_network` on the tc egress of the device `ifname`. Idempotent:
    /// a filter already running this dataplane's `to_network` is kept, an
    /// older `to_network` replaced; another program at Sarena's position is
    /// [`BpfError::ForeignFilter`].
    pub async fn attach_network_hook(&self, ifname: &str) -> Result<(), DataplaneError> {
        let Some(ifindex) = host_ifindex(ifname) else {
            return Err(BpfError::NoDevice {
                ifname: ifname.to_owned(),
            }
            .into());
        };
        let current = {
            let host = self.host_netlink().await?;
            tc::query(&host, ifindex).await?
        };
        let mut state = self.lock();
        if let Some(found) = on_egress(&current) {
            if found.program != TO_NETWORK_PROG {
                return Err(BpfError::ForeignFilter {
                    ifname: ifname.to_owned(),
                    direction: Direction::Egress,
                    program: TO_NETWORK_PROG,
                    found: found.program.clone(),
                }
                .into());
            }
            if Some(found.tag) == state.tag(TO_NETWORK_PROG) {
                return Ok(());
            }
        }
        tc::attach(
            program(&mut state.ebpf, TO_NETWORK_PROG)?,
            ifname,
            Direction::Egress,
        )?;
        Ok(())
    }

    /// Removes `to_network` from the tc egress of the device `ifname`, and
    /// only it: another program at Sarena's position, a missing filter or
    /// device are left as they are.
    pub async fn detach_network_hook(&self, ifname: &str) -> Result<(), DataplaneError> {
        let Some(ifindex) = host_ifindex(ifname) else {
            return Ok(());
        };
        let current = {
            let host = self.host_netlink().await?;
            tc::query(&host, ifindex).await?
        };
        match on_egress(&current) {
            Some(found) if found.program == TO_NETWORK_PROG => {
                Ok(tc::detach(ifname, Direction::Egress)?)
            }
            _ => Ok(()),
        }
    }
}
