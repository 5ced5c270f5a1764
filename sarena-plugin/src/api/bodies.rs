//! Small JSON answers that have no type of their own in [`super::types`].

use serde::{Deserialize, Serialize};

/// `{"released": bool}`: the answer to `DELETE /ipam/allocations/{container_id}/{ifname}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Released {
    /// False when there was nothing to release.
    pub released: bool,
}

/// `{"deleted": bool, "veth_removal": bool}`: the answer to
/// `DELETE /endpoints/{container_id}/{ifname}`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Deleted {
    /// False when neither an endpoint nor an allocation existed.
    pub deleted: bool,
    /// True when the daemon has taken over removing the endpoint's veth pair
    /// (asked for with `?veth=remove`); the caller then leaves the links
    /// alone. Absent (false) from daemons that never do.
    #[serde(default)]
    pub veth_removal: bool,
}

/// `{"endpoint": Endpoint | null}`: the answer to
/// `DELETE /endpoints/{container_id}/{ifname}?allocation=keep`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unregistered {
    /// The endpoint removed; null when there was none.
    pub endpoint: Option<super::endpoint::Endpoint>,
}
