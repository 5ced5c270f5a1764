//! Small JSON answers that have no type of their own in [`super::types`].

use serde::{Deserialize, Serialize};

/// `{"released": bool}`: the answer to `DELETE /ipam/allocations/{container_id}/{ifname}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Released {
    /// False when there was nothing to release.
    pub released: bool,
}

/// `{"deleted": bool}`: the answer to `DELETE /endpoints/{container_id}/{ifname}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Deleted {
    /// False when neither an endpoint nor an allocation existed.
    pub deleted: bool,
}
