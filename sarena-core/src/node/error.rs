//! [`NodeError`] and the API error kind each of its variants is served with.

use std::net::IpAddr;

use ipnet::IpNet;

use super::config::ConfigError;
use crate::api::{ApiErrorKind, Attachment, DaemonError};
use crate::ipam::{IpamError, PoolConfigError};
use crate::store::StoreError;

/// Errors of the node state.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Address management refused the request.
    #[error(transparent)]
    Ipam(#[from] IpamError),
    /// A request field is invalid.
    #[error("invalid {field}: {reason}")]
    InvalidRequest {
        /// The field.
        field: &'static str,
        /// Why.
        reason: String,
    },
    /// A requested address belongs to another owner.
    #[error("address {address} is allocated to {owner:?}")]
    AddressOwned {
        /// The address.
        address: IpAddr,
        /// Its owner.
        owner: Attachment,
    },
    /// The owner already holds an allocation that does not match the request.
    #[error(
        "{owner:?} already holds {held:?} from pool {pool:?}, which does not match the request"
    )]
    AllocationMismatch {
        /// Owner.
        owner: Attachment,
        /// Addresses it holds.
        held: Vec<IpAddr>,
        /// Its pool.
        pool: String,
    },
    /// `endpoint/create` for an owner without an allocation.
    #[error("{owner:?} holds no allocation: call ipam/allocate first")]
    NoAllocation {
        /// Owner.
        owner: Attachment,
    },
    /// `endpoint/create` with addresses other than the owner's allocation.
    #[error("endpoint addresses {given:?} of {owner:?} do not match its allocation {allocated:?}")]
    AddressMismatch {
        /// Owner.
        owner: Attachment,
        /// What the owner holds.
        allocated: Vec<IpNet>,
        /// What the request said.
        given: Vec<IpNet>,
    },
    /// An endpoint with a different body already exists for the owner.
    #[error(
        "an endpoint for {owner:?} already exists with different parameters (host ifname {host_ifname})"
    )]
    EndpointExists {
        /// Owner.
        owner: Attachment,
        /// The existing endpoint's host interface.
        host_ifname: String,
    },
    /// A bare release of an allocation an endpoint still uses.
    #[error("{owner:?} has an endpoint; delete the endpoint to release its addresses")]
    EndpointHoldsAllocation {
        /// Owner.
        owner: Attachment,
    },
    /// The store is inconsistent in a way the node refuses to serve.
    #[error(
        "state store invariant broken: address {address} is owned by both {first:?} and {second:?}"
    )]
    DoubleOwner {
        /// The address.
        address: IpAddr,
        /// One owner.
        first: Attachment,
        /// Another owner.
        second: Attachment,
    },
    /// The operation ran but the commit it was part of was lost (the state
    /// store failed before it was durable): nothing of it was kept.
    #[error("not kept: {reason}; retry")]
    NotKept {
        /// Why.
        reason: String,
    },
    /// A panic elsewhere left the in-memory state unusable.
    #[error("node state is unusable after an internal panic")]
    Poisoned,
    /// A blocking task of the node failed (panicked or was cancelled).
    #[error("node task failed")]
    Task {
        /// Cause.
        #[source]
        source: tokio::task::JoinError,
    },
}

impl NodeError {
    /// The API error kind this error is served with.
    pub fn kind(&self) -> ApiErrorKind {
        match self {
            NodeError::Ipam(e) => match e {
                IpamError::Exhausted { .. } => ApiErrorKind::PoolExhausted,
                IpamError::InUse { .. } => ApiErrorKind::Conflict,
                IpamError::UnknownPool { .. }
                | IpamError::OutsidePools { .. }
                | IpamError::NotInPool { .. }
                | IpamError::Unusable { .. }
                | IpamError::DuplicateFamily { .. } => ApiErrorKind::BadRequest,
            },
            // The file failed (a full disk): refused for now, not for good.
            NodeError::Store(e) if e.is_io() => ApiErrorKind::Unavailable,
            NodeError::InvalidRequest { .. } => ApiErrorKind::BadRequest,
            NodeError::AddressOwned { .. }
            | NodeError::AllocationMismatch { .. }
            | NodeError::AddressMismatch { .. }
            | NodeError::EndpointExists { .. }
            | NodeError::EndpointHoldsAllocation { .. }
            | NodeError::Store(StoreError::AddressTaken { .. }) => ApiErrorKind::Conflict,
            NodeError::NoAllocation { .. } => ApiErrorKind::NotFound,
            NodeError::Poisoned | NodeError::NotKept { .. } => ApiErrorKind::Unavailable,
            NodeError::Config(_)
            | NodeError::Store(_)
            | NodeError::DoubleOwner { .. }
            | NodeError::Task { .. } => ApiErrorKind::Internal,
        }
    }
}

impl From<PoolConfigError> for NodeError {
    fn from(e: PoolConfigError) -> Self {
        NodeError::Config(e.into())
    }
}

impl From<NodeError> for DaemonError {
    fn from(e: NodeError) -> Self {
        DaemonError::local(e.kind(), e)
    }
}
