//! What the IPv6 tests share: dual-stack and IPv6-only pods, and the check
//! that a pod's addresses are usable the moment it is configured.

use sarena_core::links::RtnetlinkLinks;
use sarena_test_support::Pod;

/// The IPv4 gateway of the dual-stack pods (`10.249.0.0/24`).
pub const GATEWAY4: &str = "10.249.0.1";
/// The IPv6 pool gateway of the pods (`fd00:249::/64`): the host's, never a
/// pod's next hop.
pub const POOL_GATEWAY6: &str = "fd00:249::1";
/// The pods' IPv6 next hop.
pub const GATEWAY6: &str = "fe80::1";

/// The pod `10.249.0.<host>/24` + `fd00:249::<host>/64`.
pub async fn dual_stack_pod(links: &RtnetlinkLinks, host: u8) -> Pod {
    Pod::with_addresses(
        links,
        &[
            (&format!("10.249.0.{host}/24"), GATEWAY4),
            (&format!("fd00:249::{host:x}/64"), POOL_GATEWAY6),
        ],
    )
    .await
}

/// The pod `fd00:249::<host>/64` alone.
pub async fn ipv6_pod(links: &RtnetlinkLinks, host: u8) -> Pod {
    Pod::with_addresses(links, &[(&format!("fd00:249::{host:x}/64"), POOL_GATEWAY6)]).await
}

/// Right after configuration: no address tentative (DAD off), the EUI-64
/// link-local address the only one the pod made for itself, and the
/// default route via `fe80::1`.
pub fn assert_usable_at_once(pod: &Pod) {
    let addrs = pod.netns.exec(&["ip", "-6", "addr", "show", "dev", "eth0"]);
    assert!(!addrs.contains("tentative"), "{addrs}");
    let link_local = sarena_core::links::link_local(pod.endpoint.spec.pod_mac);
    assert!(addrs.contains(&format!("{link_local}/64")), "{addrs}");
    assert_eq!(addrs.matches("scope link").count(), 1, "{addrs}");
    let routes = pod
        .netns
        .exec(&["ip", "-6", "route", "show", "dev", "eth0"]);
    assert!(routes.contains("default via fe80::1"), "{routes}");
    assert!(
        !routes.contains("fd00:249::/64"),
        "the pool prefix is not on-link: {routes}"
    );
}
