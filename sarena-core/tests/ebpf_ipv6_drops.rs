//! What the eBPF programs drop, answer and leave alone in IPv6, against the
//! real kernel: forged sources, neighbour discovery claiming another's
//! address, malformed headers and extension-header chains (raw frames out
//! of a pod's `eth0`), and the advertisements the responder builds.
//!
//! Privileged (root and the eBPF object): `#[ignore]`d unless included, see
//! `sarena_test_support::require_root`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod ebpf;

use std::collections::BTreeSet;
use std::net::{Ipv6Addr, SocketAddr, UdpSocket};
use std::time::Duration;

use ebpf::frames6::{
    self, DEST_OPTS, FRAGMENT, HOP_BY_HOP, ICMPV6, UDP, advertisement, ext8, frame, icmpv6,
    solicitation, solicited_node, source_link_layer, udp,
};
use ebpf::ipv6::{GATEWAY6, dual_stack_pod};
use ebpf::raw::{PodListener, exchange_raw, send_raw_frames};
use sarena_core::dataplane::Dataplane;
use sarena_core::dataplane::ebpf::{AyaDataplane, DropReason, EndpointCounters};
use sarena_core::links::{RtnetlinkLinks, link_local};
use sarena_test_support::{PinDir, Pod, in_netns, require_ebpf_object, require_root};

fn counters(dp: &AyaDataplane, pod: &Pod) -> EndpointCounters {
    dp.counters(pod.endpoint.spec.host_ifindex)
        .unwrap()
        .unwrap()
}

/// One UDP datagram from `a` to `b` from each of `sources` (added to `a`'s
/// `eth0` for the while when not its own); the indexes of those `b` received.
fn udp_from(a: &Pod, b: &Pod, sources: &[Ipv6Addr]) -> BTreeSet<usize> {
    for source in sources {
        if *source != a.ip6() {
            let address = format!("{source}/128");
            a.netns
                .exec(&["ip", "-6", "addr", "add", &address, "dev", "eth0", "nodad"]);
        }
    }
    let (tx, rx) = std::sync::mpsc::channel();
    let b_ip = b.ip6();
    let receiver = in_netns(&b.netns.path(), move || {
        let socket = UdpSocket::bind(SocketAddr::from((b_ip, 0))).unwrap();
        socket
            .set_read_timeout(Some(Duration::from_millis(1500)))
            .unwrap();
        tx.send(socket.local_addr().unwrap().port()).unwrap();
        let mut got = BTreeSet::new();
        let mut buf = [0u8; 16];
        while let Ok((n, _)) = socket.recv_from(&mut buf) {
            if n == 1 {
                got.insert(usize::from(buf[0]));
            }
        }
        got
    });
    let port = rx.recv_timeout(Duration::from_secs(5)).unwrap();
    let sending = sources.to_vec();
    in_netns(&a.netns.path(), move || {
        for (i, source) in sending.iter().enumerate() {
            let socket = UdpSocket::bind(SocketAddr::from((*source, 0))).unwrap();
            socket
                .send_to(&[i as u8], SocketAddr::from((b_ip, port)))
                .unwrap();
        }
    })
    .join()
    .unwrap();
    for source in sources.iter().filter(|s| **s != a.ip6()) {
        let address = format!("{source}/128");
        a.netns
            .exec(&["ip", "-6", "addr", "del", &address, "dev", "eth0"]);
    }
    receiver.join().unwrap()
}

#[tokio::test]
#[ignore = "privileged: needs root and the eBPF object; run as root with --include-ignored (scripts/test.sh)"]
async fn forged_ipv6_sources_and_neighbour_claims_are_dropped_and_counted() {
    let test = "forged_ipv6_sources_and_neighbour_claims_are_dropped_and_counted";
    require_root(test);
    let object = require_ebpf_object(test);
    let pins = PinDir::new();
    let links = RtnetlinkLinks::new().unwrap();
    let (a, b, c) = (
        dual_stack_pod(&links, 2).await,
        dual_stack_pod(&links, 3).await,
        dual_stack_pod(&links, 4).await,
    );
    let dp = AyaDataplane::open(&object, &pins.0).unwrap();
    for pod in [&a, &b, &c] {
        dp.attach(&pod.endpoint).await.unwrap();
    }
    assert!(a.ping6(&b, 1));

    // As itself, as another pod, as a pool address nobody has, as an outsider.
    let outsider: Ipv6Addr = "2001:db8::7".parse().unwrap();
    let unassigned: Ipv6Addr = "fd00:249::99".parse().unwrap();
    let got = udp_from(&a, &b, &[a.ip6(), c.ip6(), unassigned, outsider]);
    assert_eq!(
        got,
        BTreeSet::from([0]),
        "only the genuine datagram arrives"
    );
    let after_udp = counters(&dp, &a);
    assert!(
        after_udp.dropped(DropReason::SpoofedSourceIpv6) >= 3,
        "{after_udp:?}"
    );
    assert_eq!(after_udp.dropped(DropReason::SpoofedNdp), 0);

    let own_ll = link_local(a.endpoint.spec.pod_mac);
    let all_nodes: Ipv6Addr = "ff02::1".parse().unwrap();
    let nd = |src: Ipv6Addr, dst: Ipv6Addr, body: Vec<u8>| {
        frame(&a, src, dst, ICMPV6, 255, &icmpv6(src, dst, body))
    };
    let dad = |target: Ipv6Addr| {
        let dst = solicited_node(target);
        nd(Ipv6Addr::UNSPECIFIED, dst, solicitation(target, &[]))
    };
    let mut router_advert = vec![134, 0, 0, 0, 64, 0, 0, 0];
    router_advert.extend_from_slice(&[0; 8]);
    let mut redirect = vec![137, 0, 0, 0, 0, 0, 0, 0];
    redirect.extend_from_slice(&c.ip6().octets());
    redirect.extend_from_slice(&b.ip6().octets());
    send_raw_frames(
        &a,
        vec![
            // Dropped as claims: another pod's address advertised or probed,
            // a router advertisement, a redirect.
            nd(own_ll, all_nodes, advertisement(c.ip6())),
            dad(c.ip6()),
            nd(own_ll, all_nodes, router_advert),
            nd(own_ll, b.ip6(), redirect),
            // Its own addresses: fine.
            nd(own_ll, all_nodes, advertisement(a.ip6())),
            nd(own_ll, all_nodes, advertisement(own_ll)),
            dad(a.ip6()),
            // The unspecified source is for ICMPv6 only; a solicitation from
            // another pod's address is a forged source first.
            frame(
                &a,
                Ipv6Addr::UNSPECIFIED,
                b.ip6(),
                UDP,
                64,
                &udp(1, 2, b"x"),
            ),
            nd(c.ip6(), solicited_node(b.ip6()), solicitation(b.ip6(), &[])),
        ],
    );
    let after = counters(&dp, &a);
    assert_eq!(after.dropped(DropReason::SpoofedNdp), 4, "{after:?}");
    assert_eq!(
        after.dropped(DropReason::SpoofedSourceIpv6),
        after_udp.dropped(DropReason::SpoofedSourceIpv6) + 2,
        "{after:?}"
    );
    assert_eq!(after.dropped(DropReason::MalformedNdp), 0, "{after:?}");
    // Nothing but the genuine traffic reached b, and it still does.
    assert_eq!(counters(&dp, &b).total_drops(), 0);
    assert!(a.ping6(&b, 1));
}

#[tokio::test]
#[ignore = "privileged: needs root and the eBPF object; run as root with --include-ignored (scripts/test.sh)"]
async fn malformed_ipv6_is_dropped_and_extension_headers_never_take_the_redirect() {
    let test = "malformed_ipv6_is_dropped_and_extension_headers_never_take_the_redirect";
    require_root(test);
    let object = require_ebpf_object(test);
    let pins = PinDir::new();
    let links = RtnetlinkLinks::new().unwrap();
    let (a, b) = (
        dual_stack_pod(&links, 2).await,
        dual_stack_pod(&links, 3).await,
    );
    let dp = AyaDataplane::open(&object, &pins.0).unwrap();
    dp.attach(&a.endpoint).await.unwrap();
    dp.attach(&b.endpoint).await.unwrap();
    let (src, dst) = (a.ip6(), b.ip6());
    let datagram = udp(40000, 7, b"payload!");
    let to_b = |next: u8, payload: &[u8]| frame(&a, src, dst, next, 64, payload);
    let chain = |n: usize| {
        let mut p = Vec::new();
        for i in 0..n {
            p.extend(ext8(if i + 1 == n { UDP } else { DEST_OPTS }));
        }
        p.extend_from_slice(&datagram);
        p
    };

    let mut truncated = to_b(UDP, &datagram);
    truncated.truncate(14 + 20);
    let mut bad_version = to_b(UDP, &datagram);
    bad_version[14] = 0x40;
    let mut long_payload = to_b(UDP, &datagram);
    long_payload[18..20].copy_from_slice(&100u16.to_be_bytes());
    let short_icmp = to_b(ICMPV6, &[128, 0]);
    let mut past_the_end = ext8(UDP);
    past_the_end[1] = 5; // 48 bytes long, 8 there
    let past_the_end = to_b(DEST_OPTS, &past_the_end);
    let too_long = to_b(DEST_OPTS, &chain(9));
    let mut hop_by_hop_second = ext8(HOP_BY_HOP);
    hop_by_hop_second.extend(ext8(UDP));
    hop_by_hop_second.extend_from_slice(&datagram);
    let hop_by_hop_second = to_b(DEST_OPTS, &hop_by_hop_second);
    let ns = |hop: u8, body: Vec<u8>| {
        let dst = solicited_node(dst);
        frame(&a, src, dst, ICMPV6, hop, &icmpv6(src, dst, body))
    };
    let low_hop_limit = ns(64, solicitation(dst, &[]));
    let short_ns = ns(255, solicitation(dst, &[])[..8].to_vec());
    let mut ns_behind_options = ext8(ICMPV6);
    ns_behind_options.extend(icmpv6(src, dst, solicitation(dst, &[])));
    let ns_behind_options = frame(&a, src, dst, DEST_OPTS, 255, &ns_behind_options);

    // Well-formed, but the host stack's business: never redirected.
    let with_options = to_b(DEST_OPTS, &chain(1));
    let longest_walked = to_b(DEST_OPTS, &chain(8));
    let mut fragment = vec![UDP, 0, 0, 1, 0, 0, 0, 9]; // first fragment, more follow
    fragment.extend_from_slice(&datagram);
    let fragment = to_b(FRAGMENT, &fragment);

    let at_b = PodListener::new(&b);
    send_raw_frames(
        &a,
        vec![
            truncated,
            bad_version,
            long_payload,
            short_icmp,
            past_the_end,
            too_long,
            hop_by_hop_second,
            low_hop_limit,
            short_ns,
            ns_behind_options,
            with_options,
            longest_walked,
            fragment,
        ],
    );
    let c = counters(&dp, &a);
    assert_eq!(c.dropped(DropReason::MalformedIpv6), 4, "{c:?}");
    assert_eq!(c.dropped(DropReason::MalformedIpv6Ext), 3, "{c:?}");
    assert_eq!(c.dropped(DropReason::MalformedNdp), 3, "{c:?}");
    assert_eq!(c.total_drops(), 10, "nothing else dropped: {c:?}");
    // Every frame sent went through the program. The pod's own stack may
    // add a frame of its own in the meantime (an MLD report retransmitted
    // after the address's group join, seen once in CI); it goes to the host
    // stack untouched, which the drop total and redirect counts check.
    assert!(c.ipv6_from_pod_packets >= 13, "{c:?}");
    assert_eq!(c.ipv6_redirected_packets, 0, "{c:?}");
    assert_eq!(c.redirected_packets, 0, "{c:?}");
    // Nothing a sent reached b, by the redirect or through the host stack.
    // (Not b's to-pod counter: the host's side of b's veth sends frames of
    // its own, a router solicitation or an MLD report, at times of the
    // kernel's choosing, and they go through b's program too.)
    std::thread::sleep(Duration::from_millis(100));
    let from_a: Vec<Vec<u8>> = at_b
        .arrived()
        .into_iter()
        .filter(|f| f.len() >= 38 && f[12..14] == [0x86, 0xdd] && f[22..38] == src.octets())
        .collect();
    assert!(from_a.is_empty(), "nothing of a's reached b: {from_a:?}");
    assert!(a.ping6(&b, 1), "traffic still flows");
}

/// An advertisement (type 136) of an IPv6 frame.
fn is_advertisement(f: &[u8]) -> bool {
    f.len() >= 78 && f[12..14] == [0x86, 0xdd] && f[20] == ICMPV6 && f[54] == 136
}

/// Checks `reply`, the advertisement of `target` answering a solicitation
/// sent from `from`; returns its target link-layer address option, if any.
fn check_advertisement(
    reply: &[u8],
    pod: &Pod,
    from: Ipv6Addr,
    target: Ipv6Addr,
) -> Option<[u8; 6]> {
    let host_mac = pod.endpoint.spec.host_mac.octets();
    assert_eq!(
        reply[0..6],
        pod.endpoint.spec.pod_mac.octets(),
        "to the pod"
    );
    assert_eq!(reply[6..12], host_mac, "from the host end");
    assert_eq!(reply[14], 0x60);
    let payload = usize::from(u16::from_be_bytes([reply[18], reply[19]]));
    assert_eq!(reply.len(), 54 + payload, "trimmed to the payload");
    assert_eq!(reply[21], 255, "hop limit");
    let src = Ipv6Addr::from(<[u8; 16]>::try_from(&reply[22..38]).unwrap());
    let dst = Ipv6Addr::from(<[u8; 16]>::try_from(&reply[38..54]).unwrap());
    assert_eq!((src, dst), (target, from));
    let icmp = &reply[54..];
    assert_eq!((icmp[0], icmp[1]), (136, 0));
    assert_eq!(icmp[4], 0xe0, "router, solicited, override");
    assert_eq!(icmp[8..24], target.octets());
    let mut zeroed = icmp.to_vec();
    zeroed[2..4].copy_from_slice(&[0, 0]);
    let sum = frames6::checksum(src, dst, ICMPV6, &zeroed);
    assert_eq!(u16::from_be_bytes([icmp[2], icmp[3]]), sum, "checksum");
    (payload == 32).then(|| {
        assert_eq!(icmp[24..26], [2, 1], "target link-layer address option");
        <[u8; 6]>::try_from(&icmp[26..32]).unwrap()
    })
}

#[tokio::test]
#[ignore = "privileged: needs root and the eBPF object; run as root with --include-ignored (scripts/test.sh)"]
async fn the_responder_answers_solicitations_with_valid_advertisements() {
    let test = "the_responder_answers_solicitations_with_valid_advertisements";
    require_root(test);
    let object = require_ebpf_object(test);
    let pins = PinDir::new();
    let links = RtnetlinkLinks::new().unwrap();
    let (a, b) = (
        dual_stack_pod(&links, 2).await,
        dual_stack_pod(&links, 3).await,
    );
    let dp = AyaDataplane::open(&object, &pins.0).unwrap();
    dp.attach(&a.endpoint).await.unwrap();
    dp.attach(&b.endpoint).await.unwrap();
    let own_ll = link_local(a.endpoint.spec.pod_mac);
    let gateway: Ipv6Addr = GATEWAY6.parse().unwrap();
    let host_mac = a.endpoint.spec.host_mac.octets();
    let sll = source_link_layer(a.endpoint.spec.pod_mac.octets());
    let solicit = |from: Ipv6Addr, target: Ipv6Addr, multicast: bool, options: &[u8]| {
        let dst = if multicast {
            solicited_node(target)
        } else {
            target
        };
        let body = icmpv6(from, dst, solicitation(target, options));
        frame(&a, from, dst, ICMPV6, 255, &body)
    };

    // Address resolution of the gateway from the link-local address.
    let reply = exchange_raw(&a, solicit(own_ll, gateway, true, &sll), is_advertisement)
        .expect("no advertisement for the gateway");
    assert_eq!(
        check_advertisement(&reply, &a, own_ll, gateway),
        Some(host_mac)
    );
    // Unicast reachability probe without options: answered without one.
    let reply = exchange_raw(&a, solicit(own_ll, gateway, false, &[]), is_advertisement)
        .expect("no advertisement for the probe");
    assert_eq!(check_advertisement(&reply, &a, own_ll, gateway), None);
    // More options than the reply needs: cut after the one rewritten.
    let mut options = sll.clone();
    options.extend_from_slice(&[14, 1, 1, 2, 3, 4, 5, 6]); // a nonce
    let reply = exchange_raw(
        &a,
        solicit(a.ip6(), gateway, true, &options),
        is_advertisement,
    )
    .expect("no advertisement with extra options");
    assert_eq!(
        check_advertisement(&reply, &a, a.ip6(), gateway),
        Some(host_mac)
    );
    // Another pod's address, as ARP answers it: the host end's MAC.
    let reply = exchange_raw(&a, solicit(a.ip6(), b.ip6(), true, &sll), is_advertisement)
        .expect("no advertisement for the peer");
    assert_eq!(
        check_advertisement(&reply, &a, a.ip6(), b.ip6()),
        Some(host_mac)
    );
    // Its own address: nobody answers.
    assert!(exchange_raw(&a, solicit(own_ll, a.ip6(), true, &sll), is_advertisement).is_none());

    let c = counters(&dp, &a);
    assert_eq!(c.ndp_replies, 4, "{c:?}");
    assert_eq!(c.total_drops(), 0, "{c:?}");
}
