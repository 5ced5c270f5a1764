//! The real backends: [`Plugin::connect`] (the daemon's HTTP client and the
//! rtnetlink links backend), its failures turned into CNI errors. Kept in one
//! place so that tests (and other embedders) can pass their own plugin to
//! [`crate::run::run`].

use sarena_plugin::api::{DEFAULT_SOCKET, DaemonError};
use sarena_plugin::cni::{CniError, ErrorCode, NetConf};
use sarena_plugin::error_chain;
use sarena_plugin::plugin::{ConnectError, Plugin};

/// The plugin for `conf`: the daemon client for its `daemon-endpoint` (default:
/// the daemon's well-known socket; building it does no I/O, the first call
/// connects) and the links backend (a netlink socket in the host netns). Must be
/// called inside a tokio runtime (the netlink socket is driven by it).
pub(crate) fn connect(conf: &NetConf) -> Result<Plugin, CniError> {
    let endpoint = conf.daemon_endpoint.as_deref();
    let token_file = conf.daemon_token_file.as_deref();
    Plugin::connect_with_token(endpoint, token_file).map_err(|e| match e {
        ConnectError::Daemon(e @ DaemonError::TokenFile { .. }) => CniError::new(
            ErrorCode::InvalidConfig,
            "cannot read the daemon's token (network config field `daemon-token-file`)",
        )
        .with_details(error_chain(&e)),
        ConnectError::Daemon(e) => CniError::new(
            ErrorCode::InvalidConfig,
            format!(
                "invalid network config field `daemon-endpoint` {:?}",
                endpoint.unwrap_or(DEFAULT_SOCKET)
            ),
        )
        .with_details(error_chain(&e)),
        ConnectError::Links(e) => CniError::new(ErrorCode::Kernel, "cannot open a netlink socket")
            .with_details(error_chain(&e)),
    })
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

    #[tokio::test]
    async fn daemon_client_for_every_endpoint_form() {
        for e in [
            None,
            Some("/tmp/x.sock"),
            Some("unix:///tmp/x.sock"),
            Some("http://127.0.0.1:9"),
        ] {
            assert!(connect(&conf(e)).is_ok(), "{e:?}");
        }
    }

    #[test]
    fn a_host_name_endpoint_is_a_config_error() {
        // The config accepts host names; the client does no DNS.
        let err = connect(&conf(Some("http://daemon.example:80")))
            .err()
            .unwrap();
        assert_eq!(err.code, ErrorCode::InvalidConfig);
        assert!(err.msg.contains("daemon-endpoint"), "{}", err.msg);
    }

    #[tokio::test]
    async fn both_backends_are_built_inside_a_runtime() {
        assert!(connect(&conf(None)).is_ok());
    }

    #[tokio::test]
    async fn the_default_endpoint_is_the_daemons_socket() {
        let plugin = connect(&conf(None)).unwrap();
        // Without a daemon on this machine, the default socket is unreachable, and
        // the error names it.
        if !std::path::Path::new(DEFAULT_SOCKET).exists() {
            let err = plugin.status().await.unwrap_err();
            assert!(error_chain(&err).contains(DEFAULT_SOCKET), "{err}");
        }
    }
}
