//! [`NetavarkError`]: why a netavark plugin subcommand failed. Its message
//! (with its sources, [`crate::error_chain`]) is what netavark shows the
//! user, so each names the network, the container or the field at fault.

use std::net::IpAddr;

use ipnet::IpNet;

use crate::api::DaemonError;
use crate::cni::CniError;
use crate::plugin::{ConnectError, PluginError};

/// Errors of the netavark plugin subcommands.
#[derive(Debug, thiserror::Error)]
pub enum NetavarkError {
    /// The first argument is not a subcommand of the plugin API.
    #[error("unknown subcommand {0:?} (the plugin API has create, setup, teardown and info)")]
    UnknownSubcommand(String),
    /// `setup` or `teardown` without the container's netns path.
    #[error("{subcommand}: the network namespace path argument is missing")]
    MissingNetns {
        /// The subcommand.
        subcommand: &'static str,
    },
    /// Stdin is not the JSON the subcommand takes.
    #[error("{subcommand}: cannot decode the {what} on stdin")]
    Decode {
        /// The subcommand.
        subcommand: &'static str,
        /// What was expected (`network config`, `container config`).
        what: &'static str,
        /// The decoder's error.
        #[source]
        source: serde_json::Error,
    },
    /// A field of the network config asks for something Sarena does not do.
    #[error("network {network:?}: `{field}`: {reason}")]
    Unsupported {
        /// The network's name.
        network: String,
        /// The field (`options.KEY` for a driver option).
        field: String,
        /// Why, and what to do instead.
        reason: String,
    },
    /// A field of the container's input asks for something Sarena does not do.
    #[error("container {container:?} on network {network:?}: `{field}`: {reason}")]
    UnsupportedForContainer {
        /// The container's name.
        container: String,
        /// The network's name.
        network: String,
        /// The field.
        field: String,
        /// Why, and what to do instead.
        reason: String,
    },
    /// The container's input is invalid (its id, interface name or MAC).
    #[error("container {container:?} on network {network:?}: invalid input")]
    InvalidContainer {
        /// The container's name.
        container: String,
        /// The network's name.
        network: String,
        /// What is wrong, as the CNI side says it.
        #[source]
        source: CniError,
    },
    /// The daemon has no pool that serves containers outside Kubernetes
    /// namespaces.
    #[error(
        "network {network:?}: the Sarena daemon has no default pool (one without `namespaces`)"
    )]
    NoDefaultPool {
        /// The network's name.
        network: String,
    },
    /// A subnet asked for is not one of the daemon's default pools.
    #[error(
        "network {network:?}: subnet {subnet} is not one of the Sarena daemon's pools ({pools}); the daemon hands out the addresses, from its pools only"
    )]
    SubnetNotAPool {
        /// The network's name.
        network: String,
        /// The subnet asked for.
        subnet: IpNet,
        /// The daemon's default pools, comma-separated.
        pools: String,
    },
    /// Subnets asked for that leave out some of the daemon's default pools:
    /// the daemon hands out addresses from all of them.
    #[error(
        "network {network:?}: the subnets asked for ({asked}) leave out some of the Sarena daemon's pools ({pools}); the daemon hands out addresses from all of them: list them all, or none"
    )]
    SubnetsNotAllPools {
        /// The network's name.
        network: String,
        /// The subnets asked for, comma-separated.
        asked: String,
        /// The daemon's default pools, comma-separated.
        pools: String,
    },
    /// A gateway asked for is not its pool's.
    #[error(
        "network {network:?}: gateway {asked} of subnet {subnet} is not the pool's gateway {pool_gateway}"
    )]
    GatewayMismatch {
        /// The network's name.
        network: String,
        /// The subnet.
        subnet: IpNet,
        /// The gateway asked for.
        asked: IpAddr,
        /// The pool's gateway.
        pool_gateway: IpAddr,
    },
    /// `ipv6_enabled` without an IPv6 pool.
    #[error(
        "network {network:?}: `ipv6_enabled`: the Sarena daemon's pools ({pools}) have no IPv6 subnet"
    )]
    NoIpv6Pool {
        /// The network's name.
        network: String,
        /// The daemon's default pools, comma-separated.
        pools: String,
    },
    /// The daemon's pools could not be read.
    #[error("network {network:?}: cannot read the Sarena daemon's pools")]
    Pools {
        /// The network's name.
        network: String,
        /// The daemon client's error.
        #[source]
        source: DaemonError,
    },
    /// The daemon client or the netlink socket could not be set up.
    #[error(
        "network {network:?}: cannot set up the Sarena client (option `daemon-endpoint` {endpoint:?})"
    )]
    Connect {
        /// The network's name.
        network: String,
        /// The daemon endpoint used.
        endpoint: String,
        /// Why.
        #[source]
        source: ConnectError,
    },
    /// ADD or DEL failed.
    #[error("{operation} of container {container:?} on network {network:?} failed")]
    Operation {
        /// `setup` or `teardown`.
        operation: &'static str,
        /// The container's name.
        container: String,
        /// The network's name.
        network: String,
        /// The plugin sequence's error (boxed: it is large).
        #[source]
        source: Box<PluginError>,
    },
    /// ADD's result lacks the container's interface (a bug, never expected).
    #[error("setup of container {container:?}: the result has no interface {ifname:?} with a MAC")]
    NoInterface {
        /// The container's name.
        container: String,
        /// The interface asked for.
        ifname: String,
    },
}
