//! Bandwidth limits on an endpoint, put in place around the attachment of
//! its programs (see [`super::bandwidth`] for what and why):
//!
//! 1. before the programs: the host veth's root qdisc, `fq` when traffic to
//!    the pod is paced, Sarena's placeholder otherwise (and, at the first
//!    endpoint with limits, whether the kernel has `fq` at all: the
//!    [`ShapingMode`]);
//! 2. with the programs (under the dataplane's lock): the pacing map entry,
//!    the host-side policer of an egress limit (which `from_container`
//!    applies), the endpoint entries' paced flag, and `to_container_bw` or
//!    `to_container` on the egress hook;
//! 3. after the programs: the pod side, when traffic from the pod is limited
//!    (a `pod_egress` instance in the pod's netns, on `fq` when paced), or
//!    its removal when it was and no longer is.
//!
//! So a frame is only ever given a departure time where `fq` already holds
//! it, and redirected frames only go through the host veth's egress once
//! the program that paces them there is (within the same locked step).

use sarena_common::POD_EGRESS_PROG;

use super::bandwidth::{self, egress_program, limits_of, paces_egress, paces_ingress};
use super::entries::{AddressKey, ipv4_entries, ipv6_entries};
use super::load::program;
use super::pins::Direction;
use super::pod_side::{self, PodSide};
use super::qdisc::{self, Root};
use super::tc;
use super::{AyaDataplane, BandwidthState, ShapingMode};
use crate::api::{BandwidthStatus, Endpoint};
use crate::dataplane::DataplaneError;

impl AyaDataplane {
    /// Step 1: the host veth's root qdisc for `endpoint`'s limits.
    pub(super) async fn shape_host_root(&self, endpoint: &Endpoint) -> Result<(), DataplaneError> {
        let host = self.host_netlink().await?;
        let mode = match endpoint.spec.bandwidth {
            Some(_) => Some(self.probe_mode(&host, endpoint.spec.host_ifindex).await?),
            None => None,
        };
        let root = if mode == Some(ShapingMode::Paced) && paces_ingress(endpoint) {
            Root::Fq
        } else {
            Root::Placeholder
        };
        qdisc::set_root(&host, endpoint.spec.host_ifindex, root).await?;
        Ok(())
    }

    /// The [`ShapingMode`], found out the first time by trying `fq` as the
    /// root qdisc of `ifindex` (the caller sets the root it wants next).
    async fn probe_mode(
        &self,
        host: &rtnetlink::Handle,
        ifindex: u32,
    ) -> Result<ShapingMode, DataplaneError> {
        if let Some(mode) = self.lock().shaping {
            return Ok(mode);
        }
        let mode = match qdisc::set_root(host, ifindex, Root::Fq).await {
            Ok(()) => ShapingMode::Paced,
            // "Specified qdisc kind is unknown": no sch_fq in this kernel.
            Err(e) if e.errno() == Some(libc::ENOENT) => ShapingMode::Policed,
            Err(e) => return Err(e.into()),
        };
        tracing::info!(
            mode = mode.as_str(),
            "bandwidth limits: {}",
            match mode {
                ShapingMode::Paced => "paced (fq holds frames until their departure time)",
                ShapingMode::Policed =>
                    "policed (the kernel has no fq: frames beyond the bucket are dropped)",
            }
        );
        self.lock().shaping = Some(mode);
        Ok(mode)
    }

    fn mode(&self) -> ShapingMode {
        self.lock().shaping.unwrap_or(ShapingMode::Paced)
    }

    /// Step 3: the pod side for `endpoint`'s limits. `before` is the pacing
    /// entry step 2 replaced; `check` also looks at (and repairs) a pod side
    /// that should be in place (reconcile), rather than trusting `before`.
    ///
    /// Attaching an egress limit (not `check`) fails when the pod side
    /// cannot be put in place (the netns cannot be opened, the interface is
    /// not in it, a program or qdisc cannot be attached): the limit would
    /// only be policed, and the daemon could not see the pod it shapes.
    /// Reconcile finds pods that are already running: where their pod side
    /// cannot be reached, the host-side policer still holds the limit, and
    /// a warning says so.
    pub(super) async fn shape_pod_side(
        &self,
        endpoint: &Endpoint,
        before: Option<BandwidthState>,
        check: bool,
    ) -> Result<(), DataplaneError> {
        let had_egress = before.is_some_and(|b| b.egress.rate_bps > 0);
        let wants_egress = paces_egress(endpoint);
        if !wants_egress && !had_egress {
            return Ok(());
        }
        let pod = if wants_egress && !check {
            Some(PodSide::open_for_limit(endpoint).await?)
        } else {
            PodSide::open(endpoint).await?
        };
        let Some(pod) = pod else {
            if wants_egress {
                tracing::warn!(ifname = %endpoint.spec.host_ifname, netns = %endpoint.spec.netns,
                    "the pod side of the egress limit cannot be reached; only the host side polices it");
            }
            return Ok(());
        };
        if !wants_egress {
            return pod.detach().await;
        }
        if (had_egress || check) && self.pod_side_in_place(&pod).await? {
            return Ok(());
        }
        // Dropped once attached: the filter holds the program.
        let mut instance =
            pod_side::load_instance(&self.object, &self.pin_dir, endpoint.spec.host_ifindex)?;
        let paced = self.mode() == ShapingMode::Paced;
        pod.attach(program(&mut instance, POD_EGRESS_PROG)?, paced)
            .await
    }

    /// Whether the pod side runs this daemon's `pod_egress` (on `fq` when
    /// frames are paced).
    async fn pod_side_in_place(&self, pod: &PodSide) -> Result<bool, DataplaneError> {
        let state = pod.state().await?;
        let tag = self.lock().tag(POD_EGRESS_PROG);
        let paced = self.mode() == ShapingMode::Paced;
        Ok((!paced || state.root.is_some_and(|r| r.is(Root::Fq)))
            && state
                .filter
                .is_some_and(|f| f.program == POD_EGRESS_PROG && Some(f.tag) == tag))
    }

    /// What is missing for `endpoint`'s limits to hold, and what the pacing
    /// map enforces; `None` for an endpoint without limits.
    pub(super) async fn shaping_status(
        &self,
        endpoint: &Endpoint,
    ) -> Result<Option<BandwidthStatus>, DataplaneError> {
        let Some(limits) = endpoint.spec.bandwidth else {
            return Ok(None);
        };
        let mut problems = Vec::new();
        let (enforced, policer, entries, entries6, tags) = {
            let state = self.lock();
            let enforced = state.pacing.get(endpoint.spec.host_ifindex)?;
            let policer = state.pacing.policer(endpoint.spec.host_ifindex)?;
            let entries = state.maps.entries()?;
            let entries6 = state.maps.entries6()?;
            (enforced, policer, entries, entries6, state.tags.clone())
        };
        let enforced = enforced.as_ref().map(limits_of);
        let mode = self.mode();
        if enforced != bandwidth::as_enforced(&limits, mode) {
            problems.push(format!(
                "the pacing map holds {}",
                enforced.map_or("nothing".to_string(), |l| l.to_string())
            ));
        }
        let want_policer = bandwidth::policer(Some(&limits));
        let policer_matches = match (&policer, &want_policer) {
            (Some(have), Some(want)) => bandwidth::same_settings(have, want),
            (have, want) => have.is_none() && want.is_none(),
        };
        if !policer_matches {
            problems.push(format!(
                "the host-side policer holds {}",
                policer.map_or("nothing".to_string(), |p| limits_of(&p).to_string())
            ));
        }
        flag_problems(&ipv4_entries(endpoint, 0), &entries, &mut problems);
        flag_problems(&ipv6_entries(endpoint, 0), &entries6, &mut problems);
        let host = self.host_netlink().await?;
        let want = if mode == ShapingMode::Paced && paces_ingress(endpoint) {
            Root::Fq
        } else {
            Root::Placeholder
        };
        let root = qdisc::root(&host, endpoint.spec.host_ifindex).await?;
        if !root.as_ref().is_some_and(|r| r.is(want)) {
            problems.push(format!(
                "the root qdisc of {} is {}, not Sarena's {}",
                endpoint.spec.host_ifname,
                root.map_or("missing".to_string(), |r| format!(
                    "{} {:x}:",
                    r.kind, r.major
                )),
                want.kind()
            ));
        }
        let name = egress_program(endpoint);
        let attached = tc::query(&host, endpoint.spec.host_ifindex).await?;
        let tag = tags.get(name).copied();
        if !attached
            .iter()
            .any(|a| a.direction == Direction::Egress && a.program == name && Some(a.tag) == tag)
        {
            problems.push(format!(
                "the egress hook of {} does not run this daemon's {name}",
                endpoint.spec.host_ifname
            ));
        }
        if paces_egress(endpoint) {
            match PodSide::open(endpoint).await? {
                None => problems.push(format!(
                    "the pod interface {} is gone",
                    endpoint.spec.owner.ifname
                )),
                Some(pod) if !self.pod_side_in_place(&pod).await? => problems.push(format!(
                    "the pod interface {} lacks Sarena's {POD_EGRESS_PROG}{}",
                    endpoint.spec.owner.ifname,
                    if mode == ShapingMode::Paced {
                        " or fq"
                    } else {
                        ""
                    }
                )),
                Some(_) => {}
            }
        }
        Ok(Some(BandwidthStatus { enforced, problems }))
    }
}

/// A problem for each entry of `want` whose flags (the paced flag among
/// them) differ in `have`, the endpoint map of that family.
fn flag_problems<K: AddressKey>(
    want: &[(K, sarena_common::EndpointInfo)],
    have: &[(K, sarena_common::EndpointInfo)],
    problems: &mut Vec<String>,
) {
    for (key, info) in want {
        // The isolation bits are policy's, not shaping's.
        let found = have
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, i)| i.flags & !super::policy::POLICY_BITS);
        if found != Some(info.flags) {
            problems.push(format!(
                "the endpoint entry of {} has flags {found:?}, not {}",
                key.ip(),
                info.flags
            ));
        }
    }
}
