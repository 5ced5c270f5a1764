//! The `sarena` command line as a library: the commands over
//! [`sarena_core::api::HttpDaemon`], each giving a table (default) or JSON
//! (`-o json`, the API's own types, documented in docs/api.md).
//!
//! - `cli.rs`: the arguments ([`Cli`]);
//! - `status.rs` (also `health`), `endpoint.rs`, `ipam.rs`, `policy.rs`: one
//!   command each;
//! - `install.rs`: `install-cni`, the only command that does not talk to the
//!   daemon (it writes the node's CNI dirs);
//! - `table.rs`: tables, ages and sizes;
//! - `error.rs`: [`CliError`], one line each, never a chain of transport errors.
#![warn(missing_docs)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

mod cli;
mod endpoint;
mod error;
mod install;
mod ipam;
mod monitor;
mod policy;
mod status;
mod table;

use std::time::{SystemTime, UNIX_EPOCH};

use sarena_core::api::HttpDaemon;
use serde::Serialize;

pub use cli::{
    Cli, Command, EndpointCommand, InstallCniArgs, IpamCommand, MonitorArgs, MonitorCommand,
    OutputFormat, PolicyCommand,
};
pub use error::CliError;
pub use policy::PortArg;

/// Runs `cli`'s command against the daemon; `Ok` is what to print.
pub async fn run(cli: &Cli) -> Result<String, CliError> {
    let socket = cli.socket.to_string_lossy().into_owned();
    let connect = || {
        HttpDaemon::for_endpoint(&socket, cli.token_file.as_deref())
            .map(|d| d.with_timeout(cli.timeout.into()))
            .map_err(|e| CliError::from_daemon(&socket, e))
    };
    let now = now();
    let out = match &cli.command {
        Command::InstallCni(args) => return install::run(args, &cli.socket, cli.output),
        Command::Status => status::run(&connect()?, cli.output).await,
        Command::Endpoint(EndpointCommand::List) => {
            endpoint::list(&connect()?, cli.output, now).await
        }
        Command::Endpoint(EndpointCommand::Get {
            container_id,
            ifname,
        }) => endpoint::get(&connect()?, cli.output, container_id, ifname, now).await,
        Command::Ipam(IpamCommand::List) => ipam::list(&connect()?, cli.output, now).await,
        Command::Policy(PolicyCommand::List) => policy::list(&connect()?, cli.output).await,
        Command::Policy(PolicyCommand::Explain { from, to, port }) => {
            policy::explain(&connect()?, cli.output, from.clone(), to.clone(), *port).await
        }
        Command::Health => status::health(&connect()?, cli.output).await,
        Command::Monitor(args) => match &args.config {
            Some(MonitorCommand::Config {
                drops,
                flows,
                sample,
                pod,
            }) => {
                let change = sarena_core::api::EventsChange {
                    drops: *drops,
                    flows: *flows,
                    sample: *sample,
                    pod: pod.clone(),
                };
                monitor::config(&connect()?, cli.output, change).await
            }
            None => {
                let mut out = std::io::stdout().lock();
                monitor::stream(&connect()?, cli.output, args, &mut out).await
            }
        },
    };
    out.map_err(|e| match e {
        CliError::Daemon { source, .. } => CliError::from_daemon(&socket, *source),
        other => other,
    })
}

/// `value` as pretty JSON with a final newline.
fn json<T: Serialize>(value: &T) -> Result<String, CliError> {
    let mut text =
        serde_json::to_string_pretty(value).map_err(|source| CliError::Json { source })?;
    text.push('\n');
    Ok(text)
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
