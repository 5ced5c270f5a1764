//! Construction of the real backends: the daemon's HTTP client and the rtnetlink
//! links backend. Kept in one place so that tests (and other embedders) can pass
//! their own to [`crate::run::run`].

use std::sync::Arc;

use sarena_core::api::{DEFAULT_SOCKET, Daemon, DaemonError, HttpDaemon};
use sarena_core::cni::{CniError, ErrorCode, NetConf};
use sarena_core::links::{Links, RtnetlinkLinks};

/// What the plugin runs on: a daemon client and a links backend.
pub(crate) type Backends = (Arc<dyn Daemon>, Arc<dyn Links>);

/// The daemon client for the config's `daemon-endpoint` (default: the daemon's
/// well-known Unix socket) and the rtnetlink links backend. Must be called inside
/// a tokio runtime. Nothing is connected to the daemon yet.
pub(crate) fn backends(conf: &NetConf) -> Result<Backends, CniError> {
    let endpoint = conf.daemon_endpoint.as_deref().unwrap_or(DEFAULT_SOCKET);
    let daemon = HttpDaemon::new(endpoint).map_err(|e| match &e {
        DaemonError::InvalidEndpoint { reason, .. } => CniError::new(
            ErrorCode::InvalidConfig,
            format!("invalid network config field `daemon-endpoint` {endpoint:?}: {reason}"),
        ),
        _ => CniError::new(ErrorCode::Internal, "cannot build the daemon client")
            .with_details(e.to_string()),
    })?;
    let links = RtnetlinkLinks::new().map_err(|e| {
        CniError::new(ErrorCode::Kernel, "cannot open a netlink socket").with_details(e.to_string())
    })?;
    Ok((Arc::new(daemon), Arc::new(links)))
}
