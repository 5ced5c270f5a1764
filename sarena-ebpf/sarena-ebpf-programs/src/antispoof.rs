//! A pod may only speak as itself: the source of what it sends must be one
//! of its own addresses, registered in the endpoint map with its veth.

use sarena_common::{EndpointInfo, EndpointKey};

use crate::SARENA_ENDPOINTS;

/// The endpoint entry of `addr` when it is one of the addresses of the pod
/// behind the host veth `ifindex`; `None` for any other address.
#[inline(always)]
pub fn pod_address(addr: [u8; 4], ifindex: u32) -> Option<EndpointInfo> {
    let entry = SARENA_ENDPOINTS.get_ptr(EndpointKey::new(addr))?;
    // SAFETY: a map value pointer returned by the lookup helper.
    let entry = unsafe { *entry };
    (entry.ifindex == ifindex).then_some(entry)
}
