//! Kubernetes mode's security series, read at scrape time from the status's
//! `network` part: peers rejected for their Node objects, by reason, and
//! what the VXLAN filter dropped. The reason label takes the values of
//! `sarena_core::cluster::RejectReason` only.

use std::fmt;

use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use sarena_core::api::NetworkStatus;
use sarena_core::cluster::RejectReason;

use super::Labels;
use super::snapshot::gauges;

/// A counter family with one sample per `(labels, value)`.
pub(super) fn counters<I>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    samples: I,
) -> fmt::Result
where
    I: IntoIterator<Item = (Labels, u64)>,
{
    let mut metric = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
    for (labels, value) in samples {
        ConstCounter::new(value).encode(metric.encode_family(&labels)?)?;
    }
    Ok(())
}

/// The series of `network`'s peers and VXLAN filter, when it has them.
pub(super) fn encode(network: &NetworkStatus, encoder: &mut DescriptorEncoder) -> fmt::Result {
    if let Some(peers) = &network.peers {
        let reason = |r: RejectReason| vec![("reason", r.as_str().to_owned())];
        counters(
            encoder,
            "sarena_peer_rejections",
            "Peers rejected for their Node object (not routed, no FDB entry), by reason; \
             counted when a Node starts being rejected for a reason",
            RejectReason::ALL.iter().map(|r| {
                let n = peers.rejections.get(r.as_str()).copied().unwrap_or(0);
                (reason(*r), n)
            }),
        )?;
        gauges(
            encoder,
            "sarena_peers_rejected",
            "Peers rejected now, by reason",
            RejectReason::ALL.iter().map(|r| {
                let n = peers
                    .rejected
                    .iter()
                    .filter(|p| p.reason == r.as_str())
                    .count();
                (reason(*r), n as u64)
            }),
        )?;
    }
    if let Some(filter) = &network.vxlan_filter {
        counters(
            encoder,
            "sarena_vxlan_filter_dropped_packets",
            "Packets to the VXLAN port dropped because they came from no current peer's \
             underlay address (another host, a local pod); read every resync (30 s)",
            [(Labels::new(), filter.dropped_packets)],
        )?;
        counters(
            encoder,
            "sarena_vxlan_filter_dropped_bytes",
            "Bytes of the packets sarena_vxlan_filter_dropped_packets counts",
            [(Labels::new(), filter.dropped_bytes)],
        )?;
    }
    Ok(())
}
