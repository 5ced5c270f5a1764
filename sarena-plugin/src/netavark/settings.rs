//! [`NetworkSettings`]: what a Sarena network's config says to the plugin
//! (its driver options), after refusing every field that asks for
//! something Sarena does not do. `create`, `setup` and `teardown` all read
//! the network config through it: a config written by hand into podman's
//! network directory is checked as strictly as one made by `create`.

use std::path::PathBuf;

use crate::cni::config::endpoint_is_valid;
use crate::cni::version::truncate;

use super::error::NetavarkError;
use super::types::Network;

/// The network option naming the daemon's endpoint (a Unix socket path,
/// `unix://PATH` or `http://IP:PORT`; default [`crate::api::DEFAULT_SOCKET`]).
pub const OPT_DAEMON_ENDPOINT: &str = "daemon-endpoint";
/// The network option naming the file holding the daemon's API token
/// (for an `http://` endpoint).
pub const OPT_DAEMON_TOKEN_FILE: &str = "daemon-token-file";
/// The network option naming the deletion queue's directory (default
/// [`crate::plugin::DeleteQueue::DEFAULT_DIR`], where the daemon replays it).
pub const OPT_DELETE_QUEUE_DIR: &str = "delete-queue-dir";

/// The IPAM driver name `create` writes into the config: podman hands out
/// addresses itself for a network whose IPAM driver is unset or
/// `host-local`; with `sarena` it leaves them to the daemon.
pub const IPAM_DRIVER: &str = "sarena";

/// A Sarena network's settings, from its driver options.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetworkSettings {
    /// [`OPT_DAEMON_ENDPOINT`].
    pub daemon_endpoint: Option<String>,
    /// [`OPT_DAEMON_TOKEN_FILE`].
    pub daemon_token_file: Option<PathBuf>,
    /// [`OPT_DELETE_QUEUE_DIR`].
    pub delete_queue_dir: Option<PathBuf>,
}

impl NetworkSettings {
    /// Checks `network` and reads its options. Refused, each with an error
    /// naming the field: a host interface, `internal`, DNS, static routes,
    /// lease ranges, an IPAM driver other than [`IPAM_DRIVER`], an unknown
    /// or empty option, a relative path.
    pub fn of(network: &Network) -> Result<NetworkSettings, NetavarkError> {
        let refuse = |field: &str, reason: &str| NetavarkError::Unsupported {
            network: network.name.clone(),
            field: field.to_string(),
            reason: reason.to_string(),
        };
        if network
            .network_interface
            .as_deref()
            .is_some_and(|i| !i.is_empty())
        {
            return Err(refuse(
                "network_interface",
                "Sarena networks have no host bridge: each container gets its own veth; leave it unset",
            ));
        }
        if network.internal {
            return Err(refuse(
                "internal",
                "internal networks are not supported: Sarena's containers reach the host and, through it, other networks",
            ));
        }
        if network.dns_enabled {
            return Err(refuse(
                "dns_enabled",
                "DNS is not supported (netavark runs aardvark-dns for its bridge networks only): create the network with --disable-dns",
            ));
        }
        if network
            .network_dns_servers
            .as_ref()
            .is_some_and(|s| !s.is_empty())
        {
            return Err(refuse(
                "network_dns_servers",
                "DNS is not supported: leave it unset",
            ));
        }
        if network.routes.as_ref().is_some_and(|r| !r.is_empty()) {
            return Err(refuse(
                "routes",
                "static routes are not supported: the daemon sets each container's routes",
            ));
        }
        for (i, subnet) in network.subnets.iter().flatten().enumerate() {
            if subnet.lease_range.as_ref().is_some_and(|r| !r.is_null()) {
                return Err(refuse(
                    &format!("subnets[{i}].lease_range"),
                    "lease ranges are not supported: the daemon hands out addresses from its whole pool",
                ));
            }
        }
        for (key, value) in network.ipam_options.iter().flatten() {
            if key != "driver" {
                return Err(refuse(
                    &format!("ipam_options.{key}"),
                    "IPAM options are not supported: the Sarena daemon hands out the addresses",
                ));
            }
            if value != IPAM_DRIVER {
                return Err(refuse(
                    "ipam_options.driver",
                    &format!(
                        "IPAM driver {value:?} is not supported: the Sarena daemon hands out the addresses (omit --ipam-driver)"
                    ),
                ));
            }
        }
        let mut settings = NetworkSettings::default();
        for (key, value) in network.options.iter().flatten() {
            let field = format!("options.{}", truncate(key));
            if let Some(reason) = settings.take(key, value) {
                return Err(refuse(&field, &reason));
            }
        }
        Ok(settings)
    }

    /// What `teardown` reads of `network`: its options only, each that is
    /// valid; nothing is refused (a network edited since its containers
    /// were set up must not keep them from being torn down), an invalid or
    /// unknown option is left out with a warning.
    pub fn for_teardown(network: &Network) -> NetworkSettings {
        let mut settings = NetworkSettings::default();
        for (key, value) in network.options.iter().flatten() {
            if let Some(reason) = settings.take(key, value) {
                tracing::warn!(network = %network.name, option = %truncate(key), %reason,
                    "teardown: option left out");
            }
        }
        settings
    }

    /// Takes option `key` = `value`; `Some(why)` when it is refused.
    fn take(&mut self, key: &str, value: &str) -> Option<String> {
        if value.is_empty() {
            return Some("empty value".into());
        }
        match key {
            OPT_DAEMON_ENDPOINT if endpoint_is_valid(value) => {
                self.daemon_endpoint = Some(value.to_string());
            }
            OPT_DAEMON_ENDPOINT => {
                return Some(format!(
                    "{:?} is not an absolute socket path, unix://PATH or http://HOST:PORT",
                    truncate(value)
                ));
            }
            OPT_DAEMON_TOKEN_FILE | OPT_DELETE_QUEUE_DIR => {
                let path = PathBuf::from(value);
                if !path.is_absolute() {
                    return Some(format!("{:?} is not an absolute path", truncate(value)));
                }
                if key == OPT_DAEMON_TOKEN_FILE {
                    self.daemon_token_file = Some(path);
                } else {
                    self.delete_queue_dir = Some(path);
                }
            }
            _ => {
                return Some(format!(
                    "unknown option (a Sarena network takes {OPT_DAEMON_ENDPOINT}, {OPT_DAEMON_TOKEN_FILE} and {OPT_DELETE_QUEUE_DIR})"
                ));
            }
        }
        None
    }
}
