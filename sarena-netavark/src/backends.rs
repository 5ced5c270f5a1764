//! [`Backends`]: what a subcommand talks to, from the network's settings:
//! the daemon's read API for `create`, the plugin (daemon client, netlink
//! links, deletion queue) for `setup` and `teardown`. [`Real`] builds the
//! real ones; the tests pass mocks.

use std::path::Path;

use sarena_plugin::api::{DEFAULT_SOCKET, HttpDaemon, Inspect};
use sarena_plugin::netavark::{NetavarkError, NetworkSettings};
use sarena_plugin::plugin::{ConnectError, DeleteQueue, Plugin};

/// The backends of one run. Called inside a tokio runtime.
pub(crate) trait Backends {
    /// The daemon's read API named by `settings`.
    fn inspect(
        &self,
        network: &str,
        settings: &NetworkSettings,
    ) -> Result<Box<dyn Inspect>, NetavarkError>;
    /// The plugin for `settings`.
    fn plugin(&self, network: &str, settings: &NetworkSettings) -> Result<Plugin, NetavarkError>;
}

/// The real daemon client and links backend.
pub(crate) struct Real;

fn endpoint(settings: &NetworkSettings) -> &str {
    settings
        .daemon_endpoint
        .as_deref()
        .unwrap_or(DEFAULT_SOCKET)
}

fn connect_error(network: &str, settings: &NetworkSettings, source: ConnectError) -> NetavarkError {
    NetavarkError::Connect {
        network: network.to_string(),
        endpoint: endpoint(settings).to_string(),
        source,
    }
}

impl Backends for Real {
    fn inspect(
        &self,
        network: &str,
        settings: &NetworkSettings,
    ) -> Result<Box<dyn Inspect>, NetavarkError> {
        let daemon =
            HttpDaemon::for_endpoint(endpoint(settings), settings.daemon_token_file.as_deref())
                .map_err(|e| connect_error(network, settings, ConnectError::Daemon(e)))?;
        Ok(Box::new(daemon))
    }

    fn plugin(&self, network: &str, settings: &NetworkSettings) -> Result<Plugin, NetavarkError> {
        let plugin = Plugin::connect_with_token(
            Some(endpoint(settings)),
            settings.daemon_token_file.as_deref(),
        )
        .map_err(|e| connect_error(network, settings, e))?;
        let queue_dir = settings
            .delete_queue_dir
            .as_deref()
            .unwrap_or(Path::new(DeleteQueue::DEFAULT_DIR));
        Ok(plugin.with_delete_queue(DeleteQueue::new(queue_dir)))
    }
}
