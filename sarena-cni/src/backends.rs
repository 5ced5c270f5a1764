//! Construction of the real backends: the daemon's HTTP client and the links
//! backend. Kept in one place so that tests (and other embedders) can pass their own.

use std::sync::Arc;

use sarena_core::api::Daemon;
use sarena_core::cni::{CniError, ErrorCode, NetConf};
use sarena_core::links::Links;

/// What the plugin runs on: a daemon client and a links backend.
pub(crate) type Backends = (Arc<dyn Daemon>, Arc<dyn Links>);

/// The daemon client and links backend for `conf`.
pub(crate) fn backends(conf: &NetConf) -> Result<Backends, CniError> {
    Ok((daemon(conf)?, links()?))
}

/// The daemon client for the config's `daemon-endpoint`.
fn daemon(_conf: &NetConf) -> Result<Arc<dyn Daemon>, CniError> {
    Err(CniError::new(ErrorCode::Internal, "backend not built yet")
        .with_details("the daemon HTTP client is not wired into sarena-cni yet"))
}

/// The rtnetlink links backend.
fn links() -> Result<Arc<dyn Links>, CniError> {
    Err(CniError::new(ErrorCode::Internal, "backend not built yet")
        .with_details("the rtnetlink links backend is not wired into sarena-cni yet"))
}
