//! The uplink, the device that carries the node's traffic out, and the
//! pods' MTU derived from it: by default the uplink's MTU less the
//! encapsulation's overhead of the routing mode; a configured `mtu`
//! replaces the uplink's. In Kubernetes mode the uplink is the device
//! holding the node's `InternalIP` (the supervisor looks again every round,
//! so new pods follow a changed uplink); otherwise the default route's
//! device, looked up at start-up and then by [`follow_standalone_mtu`].

use rtnetlink::Handle;
use rtnetlink::packet_route::AddressFamily;
use rtnetlink::packet_route::link::{LinkAttribute, LinkMessage};
use rtnetlink::packet_route::route::{RouteAttribute, RouteHeader};

use crate::api::{MtuSource, MtuStatus};
use crate::cluster::Underlay;
use crate::netlink::{NetlinkError, all_routes, link_name};
use crate::node::DEFAULT_MTU;

/// A link's MTU (1500 when the kernel does not say).
pub(crate) fn mtu_of(link: &LinkMessage) -> u32 {
    link.attributes
        .iter()
        .find_map(|a| match a {
            LinkAttribute::Mtu(mtu) => Some(*mtu),
            _ => None,
        })
        .unwrap_or(DEFAULT_MTU)
}

/// A link as an [`Underlay`].
pub(crate) fn underlay_of(link: &LinkMessage) -> Underlay {
    Underlay {
        name: link_name(link).unwrap_or_default().to_owned(),
        index: link.header.index,
        mtu: mtu_of(link),
    }
}

/// The pods' MTU: `configured` when set, else `uplink`'s MTU, else 1500;
/// less `overhead` (the encapsulation's), and where it came from.
pub fn mtu_status(configured: Option<u32>, uplink: Option<&Underlay>, overhead: u32) -> MtuStatus {
    let (base, source, device) = match (configured, uplink) {
        (Some(mtu), _) => (mtu, MtuSource::Configured, None),
        (None, Some(u)) => (u.mtu, MtuSource::Uplink, Some(u.name.clone())),
        (None, None) => (DEFAULT_MTU, MtuSource::Default, None),
    };
    MtuStatus {
        mtu: base.saturating_sub(overhead),
        source,
        base,
        uplink: device,
        overhead,
    }
}

/// The pods' MTU outside Kubernetes mode (no encapsulation): `configured`,
/// else the MTU of the default route's device, else 1500 (logged).
pub async fn standalone_mtu(configured: Option<u32>) -> MtuStatus {
    if configured.is_some() {
        return mtu_status(configured, None, 0);
    }
    let found = match crate::netlink::host_handle() {
        Ok(handle) => default_route_device(&handle)
            .await
            .map_err(|e| crate::error_chain(&e)),
        Err(e) => Err(e.to_string()),
    };
    match found {
        Ok(uplink) => {
            if uplink.is_none() {
                tracing::warn!("no default route: the pods' MTU is 1500 (set `mtu` to choose)");
            }
            mtu_status(None, uplink.as_ref(), 0)
        }
        Err(e) => {
            tracing::warn!(
                "cannot look up the default route's device ({e}): the pods' MTU is 1500"
            );
            mtu_status(None, None, 0)
        }
    }
}

/// How often a daemon outside Kubernetes mode looks at its uplink's MTU.
pub const STANDALONE_MTU_POLL: std::time::Duration = std::time::Duration::from_secs(30);

/// Outside Kubernetes mode with no configured `mtu`: every `every`, the
/// default route's device's MTU; when it differs from what `node` serves,
/// new pods get it (`node`'s MTU), the change is logged and `network`
/// reports it. Running pods keep theirs. A failed or empty look-up changes
/// nothing (a default route that comes and goes is no new MTU). Runs until
/// dropped (the daemon aborts it at shutdown).
pub async fn follow_standalone_mtu(
    node: crate::node::Registry,
    network: crate::node::NetworkCell,
    every: std::time::Duration,
) {
    let mut ticker = tokio::time::interval(every);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticker.tick().await; // the first tick is now: start() just read it
    loop {
        ticker.tick().await;
        let found = standalone_mtu(None).await;
        if found.source != MtuSource::Uplink || found.mtu == node.mtu() {
            continue;
        }
        let from = node.set_mtu(found.mtu);
        tracing::info!(
            from,
            to = found.mtu,
            "the pods' MTU changed: now {found}; new pods get it, running ones keep theirs"
        );
        match network.lock() {
            Ok(mut status) => status.mtu = Some(found),
            Err(poisoned) => poisoned.into_inner().mtu = Some(found),
        }
    }
}

/// The device of the main table's default route (IPv4's first, else
/// IPv6's); `None` without a default route.
pub async fn default_route_device(handle: &Handle) -> Result<Option<Underlay>, NetlinkError> {
    let routes = all_routes(handle, "default route").await?;
    let mut defaults: Vec<(bool, u32)> = routes
        .iter()
        .filter(|r| r.header.destination_prefix_length == 0)
        .filter_map(|r| {
            let mut table = u32::from(r.header.table);
            let mut oif = None;
            for attribute in &r.attributes {
                match attribute {
                    RouteAttribute::Table(t) => table = *t,
                    RouteAttribute::Oif(index) => oif = Some(*index),
                    _ => {}
                }
            }
            let v6 = r.header.address_family != AddressFamily::Inet;
            (table == u32::from(RouteHeader::RT_TABLE_MAIN)).then_some((v6, oif?))
        })
        .collect();
    defaults.sort_by_key(|(v6, _)| *v6);
    let Some((_, index)) = defaults.first() else {
        return Ok(None);
    };
    let mut links = handle.link().get().match_index(*index).execute();
    match futures_util::TryStreamExt::try_next(&mut links).await {
        Ok(link) => Ok(link.as_ref().map(underlay_of)),
        Err(e) => Err(NetlinkError::new("link get", index, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eth0(mtu: u32) -> Underlay {
        Underlay {
            name: "eth0".into(),
            index: 2,
            mtu,
        }
    }

    #[test]
    fn the_uplink_gives_the_mtu_unless_one_is_configured() {
        let s = mtu_status(None, Some(&eth0(9000)), 50);
        assert_eq!((s.mtu, s.source, s.base), (8950, MtuSource::Uplink, 9000));
        assert_eq!(s.uplink.as_deref(), Some("eth0"));
        let s = mtu_status(None, Some(&eth0(1400)), 0);
        assert_eq!(s.mtu, 1400);
        let s = mtu_status(Some(1500), Some(&eth0(9000)), 50);
        assert_eq!(
            (s.mtu, s.source, s.uplink),
            (1450, MtuSource::Configured, None)
        );
        let s = mtu_status(None, None, 0);
        assert_eq!((s.mtu, s.source), (1500, MtuSource::Default));
    }
}
