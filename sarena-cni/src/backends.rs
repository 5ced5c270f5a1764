//! Construction of the real backends: the daemon's HTTP client and the rtnetlink
//! links backend. Kept in one place so that tests (and other embedders) can pass
//! their own to [`crate::run::run`].

use std::sync::Arc;

use sarena_core::api::{DEFAULT_SOCKET, Daemon, HttpDaemon};
use sarena_core::cni::{CniError, ErrorCode, NetConf};
use sarena_core::links::{Links, RtnetlinkLinks};

/// What the plugin runs on: a daemon client and a links backend.
pub(crate) type Backends = (Arc<dyn Daemon>, Arc<dyn Links>);

/// The daemon client and links backend for `conf`. Must be called inside a tokio
/// runtime (the netlink socket is driven by it).
pub(crate) fn backends(conf: &NetConf) -> Result<Backends, CniError> {
    Ok((daemon(conf)?, links()?))
}

/// The daemon client for the config's `daemon-endpoint` (default: the daemon's
/// well-known socket). Building it does no I/O; the first call connects.
fn daemon(conf: &NetConf) -> Result<Arc<dyn Daemon>, CniError> {
    let endpoint = conf.daemon_endpoint.as_deref().unwrap_or(DEFAULT_SOCKET);
    let client = HttpDaemon::new(endpoint).map_err(|e| {
        CniError::new(
            ErrorCode::InvalidConfig,
            format!("invalid network config field `daemon-endpoint` {endpoint:?}"),
        )
        .with_details(e.to_string())
    })?;
    Ok(Arc::new(client))
}

/// The rtnetlink links backend (opens a netlink socket in the host netns).
fn links() -> Result<Arc<dyn Links>, CniError> {
    let links = RtnetlinkLinks::new().map_err(|e| {
        CniError::new(ErrorCode::Kernel, "cannot open a netlink socket").with_details(e.to_string())
    })?;
    Ok(Arc::new(links))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conf(endpoint: Option<&str>) -> NetConf {
        let mut v = serde_json::json!({"cniVersion": "1.1.0", "name": "n", "type": "sarena"});
        if let Some(e) = endpoint {
            v["daemon-endpoint"] = e.into();
        }
        NetConf::parse(v.to_string().as_bytes()).unwrap()
    }

    #[test]
    fn daemon_client_for_every_endpoint_form() {
        for e in [
            None,
            Some("/tmp/x.sock"),
            Some("unix:///tmp/x.sock"),
            Some("http://127.0.0.1:9"),
        ] {
            assert!(daemon(&conf(e)).is_ok(), "{e:?}");
        }
    }

    #[test]
    fn a_host_name_endpoint_is_a_config_error() {
        // The config accepts host names; the client does no DNS.
        let err = daemon(&conf(Some("http://daemon.example:80")))
            .err()
            .unwrap();
        assert_eq!(err.code, ErrorCode::InvalidConfig);
        assert!(err.msg.contains("daemon-endpoint"), "{}", err.msg);
    }

    #[tokio::test]
    async fn both_backends_are_built_inside_a_runtime() {
        assert!(backends(&conf(None)).is_ok());
    }

    #[tokio::test]
    async fn the_default_endpoint_is_the_daemons_socket() {
        let d = daemon(&conf(None)).unwrap();
        // Without a daemon on this machine, the default socket is unreachable, and
        // the error names it.
        if !std::path::Path::new(DEFAULT_SOCKET).exists() {
            let err = d.health().await.unwrap_err();
            assert!(err.to_string().contains(DEFAULT_SOCKET), "{err}");
        }
    }
}
