//! [`screen_peers`]: every reason a peer is rejected, one table row each,
//! and good peers kept.

use super::*;

fn node(name: &str, ips: &[&str], cidrs: &[&str]) -> ClusterNode {
    ClusterNode {
        name: name.into(),
        uid: format!("uid-{name}"),
        internal_ips: ips.iter().map(|s| s.parse().unwrap()).collect(),
        pod_cidrs: cidrs.iter().map(|s| s.parse().unwrap()).collect(),
    }
}

fn view(peers: Vec<ClusterNode>) -> ClusterView {
    ClusterView {
        local_name: "a".into(),
        local: Some(node(
            "a",
            &["172.30.0.11", "fd00:30::11"],
            &["10.244.0.0/24", "fd00:10:244::/64"],
        )),
        peers,
    }
}

/// This node's devices: the Node's address, the docker bridge's, loopback.
fn own() -> Vec<IpAddr> {
    ["172.30.0.11", "fd00:30::11", "172.17.0.1", "127.0.0.1"]
        .iter()
        .map(|s| s.parse().unwrap())
        .collect()
}

fn screen(peers: Vec<ClusterNode>, cluster: &[&str]) -> (ClusterView, Vec<RejectedPeer>) {
    let cluster: Vec<IpNet> = cluster.iter().map(|c| c.parse().unwrap()).collect();
    let own = own();
    screen_peers(
        &view(peers),
        TrustAnchors {
            own_addresses: &own,
            cluster_cidrs: &cluster,
        },
    )
}

const CLUSTER: &[&str] = &["10.244.0.0/16", "fd00:10:244::/56"];

/// One row: the peer's InternalIPs and podCIDRs, the cluster CIDRs, the reason.
type Row = (
    &'static [&'static str],
    &'static [&'static str],
    &'static [&'static str],
    RejectReason,
);

#[test]
fn every_reason_rejects_the_peer_and_says_why() {
    use RejectReason::*;
    const GOOD: &str = "10.244.1.0/24";
    let rows: &[Row] = &[
        (&["0.0.0.0"], &[GOOD], CLUSTER, UnspecifiedAddress),
        (&["::"], &[GOOD], CLUSTER, UnspecifiedAddress),
        (&["127.0.0.2"], &[GOOD], CLUSTER, LoopbackAddress),
        (&["::1"], &[GOOD], CLUSTER, LoopbackAddress),
        (&["::ffff:127.0.0.1"], &[GOOD], CLUSTER, LoopbackAddress),
        (&["169.254.169.254"], &[GOOD], CLUSTER, LinkLocalAddress),
        (&["fe80::1"], &[GOOD], CLUSTER, LinkLocalAddress),
        (&["224.0.0.1"], &[GOOD], CLUSTER, MulticastAddress),
        (&["ff02::1"], &[GOOD], CLUSTER, MulticastAddress),
        (&["255.255.255.255"], &[GOOD], CLUSTER, BroadcastAddress),
        (&["172.30.0.11"], &[GOOD], CLUSTER, OwnAddress),
        (
            &["172.30.0.12", "fd00:30::11"],
            &[GOOD],
            CLUSTER,
            OwnAddress,
        ),
        (&["172.17.0.1"], &[GOOD], CLUSTER, OwnAddress),
        (&["10.244.0.7"], &[GOOD], CLUSTER, AddressInPodNetwork),
        (&["10.244.200.1"], &[GOOD], CLUSTER, AddressInPodNetwork),
        (&["10.244.0.7"], &[GOOD], &[], AddressInPodNetwork),
        (&["10.244.1.9"], &[GOOD], &[], AddressInPodNetwork),
        (
            &["172.30.0.12"],
            &["0.0.0.0/1"],
            CLUSTER,
            PodCidrOutsideCluster,
        ),
        (
            &["172.30.0.12"],
            &["10.245.0.0/24"],
            CLUSTER,
            PodCidrOutsideCluster,
        ),
        (&["172.30.0.12"], &["10.244.0.0/16"], &[], PodCidrTooWide),
        (&["172.30.0.12"], &["0.0.0.0/1"], &[], PodCidrTooWide),
        (
            &["172.30.0.12"],
            &["172.17.0.0/24"],
            &[],
            PodCidrHoldsNodeAddress,
        ),
        (&["172.30.0.12"], &["10.244.0.0/24"], CLUSTER, OwnPodCidr),
        (&["172.30.0.12"], &["10.244.0.128/25"], &[], OwnPodCidr),
        (&["172.30.0.12"], &["fd00:10:244::/64"], CLUSTER, OwnPodCidr),
    ];
    for (ips, cidrs, cluster, reason) in rows {
        let (screened, rejected) = screen(vec![node("b", ips, cidrs)], cluster);
        assert!(screened.peers.is_empty(), "{ips:?} {cidrs:?}: kept");
        assert_eq!(rejected.len(), 1, "{ips:?} {cidrs:?}");
        assert_eq!(
            rejected[0].reason, *reason,
            "{ips:?} {cidrs:?}: {rejected:?}"
        );
        assert_eq!(
            (rejected[0].node.as_str(), rejected[0].uid.as_str()),
            ("b", "uid-b")
        );
        let message = rejected[0].message("a");
        assert!(
            message.contains("node b") && message.contains(reason.as_str()),
            "{message}"
        );
    }
}

#[test]
fn an_overlapping_podcidr_goes_to_the_first_peer_by_name() {
    let (screened, rejected) = screen(
        vec![
            node("d", &["172.30.0.14"], &["10.244.1.128/25"]),
            node("b", &["172.30.0.12"], &["10.244.1.0/24"]),
        ],
        CLUSTER,
    );
    assert_eq!(screened.peers.len(), 1);
    assert_eq!(screened.peers[0].name, "b");
    assert_eq!(rejected[0].node, "d");
    assert_eq!(rejected[0].reason, RejectReason::OverlappingPodCidr);
}

#[test]
fn an_address_inside_another_accepted_peers_podcidr_is_rejected() {
    let (screened, rejected) = screen(
        vec![
            node("b", &["172.30.0.12"], &["10.244.1.0/24"]),
            node("c", &["10.244.1.3"], &["10.244.2.0/24"]),
        ],
        &[],
    );
    assert_eq!(screened.peers.len(), 1);
    assert_eq!(rejected[0].node, "c");
    assert_eq!(rejected[0].reason, RejectReason::AddressInPodNetwork);
}

#[test]
fn good_peers_pass_unchanged_in_name_order() {
    let b = node(
        "b",
        &["172.30.0.12", "fd00:30::12"],
        &["10.244.1.0/24", "fd00:10:244:1::/64"],
    );
    let c = node("c", &["172.30.0.13"], &["10.244.2.0/24"]);
    // Without a podCIDR or an address: nothing to route, nothing wrong.
    let d = node("d", &[], &[]);
    for cluster in [CLUSTER, &[]] {
        let (screened, rejected) = screen(vec![d.clone(), c.clone(), b.clone()], cluster);
        assert!(rejected.is_empty(), "{rejected:?}");
        assert_eq!(screened.peers, vec![b.clone(), c.clone(), d.clone()]);
        assert_eq!(screened.local, view(vec![]).local);
    }
}

#[test]
fn every_reason_has_its_own_label() {
    let mut labels: Vec<&str> = RejectReason::ALL.iter().map(|r| r.as_str()).collect();
    labels.sort();
    labels.dedup();
    assert_eq!(labels.len(), RejectReason::ALL.len());
    let json = serde_json::to_value(RejectReason::PodCidrTooWide).unwrap();
    assert_eq!(json, "pod_cidr_too_wide");
}
