//! [`run`]: one plugin call, from its arguments and stdin to the text to
//! print and whether it succeeded. Everything testable lives here; `main`
//! only does the I/O.

use std::ffi::OsString;

use sarena_plugin::error_chain;
use sarena_plugin::netavark::{
    self, ErrorReply, NetavarkError, NetworkSettings, Subcommand, decode_exec, decode_network,
};

use crate::backends::Backends;

/// Why a call failed, beyond what the plugin API's own errors say.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RunError {
    /// The subcommand failed.
    #[error(transparent)]
    Plugin(#[from] NetavarkError),
    /// Stdin could not be read.
    #[error("{subcommand}: cannot read stdin")]
    Stdin {
        /// The subcommand.
        subcommand: &'static str,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The async runtime could not start.
    #[error("cannot start the async runtime")]
    Runtime(#[source] std::io::Error),
    /// The answer could not be encoded (never expected).
    #[error("{subcommand}: cannot encode the answer")]
    Encode {
        /// The subcommand.
        subcommand: &'static str,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
}

/// Runs one call: `args` without the program name, `read_stdin` called
/// only by the subcommands that take input. Returns what to print (the
/// answer, or the error object) and whether the call succeeded.
pub(crate) fn run<A, S, R>(args: A, read_stdin: R, backends: &dyn Backends) -> (String, bool)
where
    A: IntoIterator<Item = S>,
    S: Into<OsString>,
    R: FnOnce() -> std::io::Result<Vec<u8>>,
{
    match execute(args, read_stdin, backends) {
        Ok(out) => (out, true),
        Err(e) => {
            let reply = ErrorReply {
                error: error_chain(&e),
            };
            let out = serde_json::to_string(&reply)
                .unwrap_or_else(|_| r#"{"error": "sarena-netavark failed"}"#.to_string());
            (format!("{out}\n"), false)
        }
    }
}

fn execute<A, S, R>(args: A, read_stdin: R, backends: &dyn Backends) -> Result<String, RunError>
where
    A: IntoIterator<Item = S>,
    S: Into<OsString>,
    R: FnOnce() -> std::io::Result<Vec<u8>>,
{
    let subcommand = Subcommand::parse(args)?;
    let name = subcommand.name();
    // Only the subcommands that take input read stdin (`info` takes none).
    let input = || {
        read_stdin().map_err(|source| RunError::Stdin {
            subcommand: name,
            source,
        })
    };
    match subcommand {
        Subcommand::Info => encode(name, &netavark::info(env!("CARGO_PKG_VERSION"))),
        Subcommand::Create => {
            let network = decode_network(&input()?)?;
            let settings = NetworkSettings::of(&network)?;
            let runtime = runtime()?;
            let _entered = runtime.enter();
            let daemon = backends.inspect(&network.name, &settings)?;
            let made = runtime.block_on(netavark::create(daemon.as_ref(), network))?;
            encode(name, &made)
        }
        Subcommand::Setup { netns } => {
            let exec = decode_exec(name, &input()?)?;
            let settings = NetworkSettings::of(&exec.network)?;
            let runtime = runtime()?;
            let _entered = runtime.enter();
            let plugin = backends.plugin(&exec.network.name, &settings)?;
            let block = runtime.block_on(netavark::setup(&plugin, &netns, &exec))?;
            encode(name, &block)
        }
        Subcommand::Teardown { netns } => {
            let exec = decode_exec(name, &input()?)?;
            // Nothing refused: whatever was set up must be torn down.
            let settings = NetworkSettings::for_teardown(&exec.network);
            let runtime = runtime()?;
            let _entered = runtime.enter();
            let plugin = backends.plugin(&exec.network.name, &settings)?;
            runtime.block_on(netavark::teardown(&plugin, &netns, &exec))?;
            Ok(String::new())
        }
    }
}

/// The current-thread runtime one call runs on.
fn runtime() -> Result<tokio::runtime::Runtime, RunError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(RunError::Runtime)
}

/// `value` as one line of JSON.
fn encode<T: serde::Serialize>(subcommand: &'static str, value: &T) -> Result<String, RunError> {
    serde_json::to_string(value)
        .map(|s| format!("{s}\n"))
        .map_err(|source| RunError::Encode { subcommand, source })
}

#[cfg(test)]
#[path = "run_tests.rs"]
mod tests;
