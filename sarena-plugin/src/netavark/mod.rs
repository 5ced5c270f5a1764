//! The netavark plugin API (1.0.0): Sarena as a network driver of netavark,
//! podman's network stack (netavark 1.6 and later run external plugins).
//!
//! netavark runs the plugin named by a network's `driver` from its plugin
//! directories, with one subcommand per call and JSON on stdin and stdout:
//!
//! - `create` (network config in and out): [`create`] checks the config
//!   and completes it from the daemon's pools;
//! - `setup NETNS` (container and network in, [`StatusBlock`] out):
//!   [`setup`], Sarena's ADD;
//! - `teardown NETNS` (same input, nothing out): [`teardown`], Sarena's DEL;
//! - `info`: [`info`].
//!
//! A failure prints [`ErrorReply`] and exits 1. The types are Sarena's own
//! ([`types`]), not the `netavark` crate's: that crate is netavark itself
//! (firewall drivers, a DHCP proxy, D-Bus), a dependency tree a plugin that
//! runs once per container does not need (see `sarena-netavark`'s README
//! for the measured difference).
//!
//! What Sarena does not do is refused with an error naming the field, never
//! ignored: port mappings, DNS, internal networks, static routes, lease
//! ranges, another IPAM driver, unknown options ([`NetworkSettings::of`],
//! [`add_request`]).

mod create;
mod error;
mod settings;
mod setup;
pub mod types;

pub use create::create;
pub use error::NetavarkError;
pub use settings::{
    IPAM_DRIVER, NetworkSettings, OPT_DAEMON_ENDPOINT, OPT_DAEMON_TOKEN_FILE, OPT_DELETE_QUEUE_DIR,
};
pub use setup::{add_request, del_request, setup, status_block, teardown};
pub use types::{
    API_VERSION, ErrorReply, Info, NetAddress, NetInterface, Network, NetworkPluginExec,
    PerNetworkOptions, PortMapping, StatusBlock, Subnet,
};

use std::path::PathBuf;

/// One call of the plugin, from its arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subcommand {
    /// `create`.
    Create,
    /// `setup NETNS`.
    Setup {
        /// The container's netns path.
        netns: PathBuf,
    },
    /// `teardown NETNS`.
    Teardown {
        /// The container's netns path.
        netns: PathBuf,
    },
    /// `info`, or no argument.
    Info,
}

impl Subcommand {
    /// The subcommand of the plugin's arguments (without the program name).
    pub fn parse<I, S>(args: I) -> Result<Subcommand, NetavarkError>
    where
        I: IntoIterator<Item = S>,
        S: Into<std::ffi::OsString>,
    {
        let mut args = args.into_iter().map(Into::into);
        let Some(first) = args.next() else {
            return Ok(Subcommand::Info);
        };
        let mut netns = |subcommand: &'static str| {
            args.next()
                .filter(|a| !a.is_empty())
                .map(PathBuf::from)
                .ok_or(NetavarkError::MissingNetns { subcommand })
        };
        match first.to_str() {
            Some("create") => Ok(Subcommand::Create),
            Some("setup") => Ok(Subcommand::Setup {
                netns: netns("setup")?,
            }),
            Some("teardown") => Ok(Subcommand::Teardown {
                netns: netns("teardown")?,
            }),
            Some("info") => Ok(Subcommand::Info),
            _ => Err(NetavarkError::UnknownSubcommand(
                first.to_string_lossy().into_owned(),
            )),
        }
    }

    /// Its name, for messages.
    pub fn name(&self) -> &'static str {
        match self {
            Subcommand::Create => "create",
            Subcommand::Setup { .. } => "setup",
            Subcommand::Teardown { .. } => "teardown",
            Subcommand::Info => "info",
        }
    }
}

/// `info`'s answer for a plugin of version `version`.
pub fn info(version: &str) -> Info {
    Info {
        version: version.to_string(),
        api_version: API_VERSION.to_string(),
        description: "Sarena: each container on its own veth, served by the Sarena node daemon"
            .into(),
    }
}

/// Decodes `create`'s input.
pub fn decode_network(stdin: &[u8]) -> Result<Network, NetavarkError> {
    serde_json::from_slice(stdin).map_err(|source| NetavarkError::Decode {
        subcommand: "create",
        what: "network config",
        source,
    })
}

/// Decodes `setup`'s or `teardown`'s input.
pub fn decode_exec(
    subcommand: &'static str,
    stdin: &[u8],
) -> Result<NetworkPluginExec, NetavarkError> {
    serde_json::from_slice(stdin).map_err(|source| NetavarkError::Decode {
        subcommand,
        what: "container and network config",
        source,
    })
}

#[cfg(test)]
mod tests;
