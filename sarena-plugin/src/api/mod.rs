//! The daemon's REST API: request/response types, the traits every backend
//! implements (the HTTP client, the in-process node state, mocks) split by
//! who calls them — [`Daemon`] for the plugin, [`Inspect`] for operators,
//! [`NodeApi`] for both — and the errors with their stable machine-readable
//! kinds.

mod bandwidth;
mod bodies;
mod client;
mod daemon;
mod endpoint;
mod error;
mod events;
mod events_packet;
mod identity;
mod inspect;
mod mode;
mod network;
mod path;
mod policy;
mod status;
mod token;
mod types;

pub use crate::cni::validate::MAX_IFNAME_LEN;
pub use bandwidth::{BandwidthLimits, BandwidthStatus};
pub use bodies::{Deleted, Released, Unregistered};
pub use client::{DEFAULT_SOCKET, DEFAULT_TIMEOUT, HttpDaemon};
pub use daemon::Daemon;
#[cfg(any(test, feature = "mocks"))]
pub use daemon::MockDaemon;
pub use endpoint::{Endpoint, EndpointCreate, EndpointSpec};
pub use error::{ApiErrorBody, ApiErrorKind, DaemonError};
pub use events::{
    CountBy, EventDirection, EventFilter, EventFilterError, EventKind, EventLine, EventRecord,
    EventsChange, EventsSettings, EventsStatus, FLOW_PATH_NAMES, FlowMode, PacketSummary,
    WatchedPod, event_record, events_status,
};
pub use identity::{
    Labels, MAX_LABEL_KEY_LEN, MAX_LABEL_VALUE_LEN, MAX_LABELS, PodIdentity, bound_labels,
};
pub use inspect::{Inspect, NodeApi, registry_status};
#[cfg(any(test, feature = "mocks"))]
pub use inspect::{MockInspect, MockNodeApi};
pub use mode::DataplaneMode;
pub use network::{
    MasqueradeStatus, MtuSource, MtuStatus, NetworkStatus, PeersStatus, RejectedPeerStatus,
    VxlanFilterStatus,
};
pub use path::{
    MAX_BODY_BYTES, SegmentError, allocation_path, decode_segment, encode_segment, endpoint_path,
    endpoint_stats_path, validate_attachment, validate_container_id, validate_ifname,
};
pub use policy::{
    PolicyDecision, PolicyEndpoint, PolicyExplanation, PolicyParty, PolicyProtocol, PolicyQuery,
    PolicyQueryError, PolicyVerdict, no_policy,
};
pub use status::{
    DaemonStatus, DataplaneCounters, DataplaneStatus, DeleteQueueStatus, EndpointStats,
    HostRoutingStatus, KubernetesStatus, PoolUsage, ProgramsStatus,
};
pub use token::{
    DEFAULT_TOKEN_FILE, MAX_TOKEN_LEN, MIN_TOKEN_LEN, read_token_file, token_file_for,
    token_problem,
};
pub use types::*;

/// The versioned base path every route lives under.
pub const API_BASE: &str = "/v1";
