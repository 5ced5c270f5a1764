//! [`run`]: one plugin invocation, from environment and stdin to the text to
//! print and the exit code. Everything testable lives here; `main` only does I/O.

use sarena_plugin::cni::version::decode_cni_version;
use sarena_plugin::cni::{CniEnv, CniError, Command, ErrorCode, NetConf, Version};
use sarena_plugin::error_chain;
use sarena_plugin::phases;
use sarena_plugin::plugin::{DeleteQueue, Plugin, dispatch, version_output};
use serde_json::Value;

use crate::logging;

/// The largest network config accepted on stdin.
pub(crate) const MAX_STDIN: usize = 1 << 20;

/// Runs one invocation: `lookup` reads a `CNI_*` variable, `stdin` is what the
/// runtime sent (at most [`MAX_STDIN`] + 1 bytes), `make_plugin` builds the
/// plugin over its daemon client and links backend (not called for VERSION);
/// its deletion queue is set from the config. Returns the complete
/// stdout text and the exit code (0 or 1).
pub(crate) fn run<L, B>(lookup: L, stdin: &[u8], make_plugin: B) -> (String, i32)
where
    L: Fn(&str) -> Option<String>,
    B: FnOnce(&NetConf) -> Result<Plugin, CniError>,
{
    // Before the config is known, errors are printed in the version the input
    // asked for (if it is one we speak) and logged to stderr.
    let early_version = sniff_version(stdin);
    let early = || logging::dispatch(None, false);
    if stdin.len() > MAX_STDIN {
        let e = CniError::new(
            ErrorCode::Decode,
            format!("stdin: network config larger than {} bytes", MAX_STDIN),
        );
        return fail(&early(), &e, early_version);
    }
    let parsing = phases::start(|| "parse env and config");
    let env = match CniEnv::from_lookup(lookup) {
        Ok(env) => env,
        Err(e) => return fail(&early(), &e, early_version),
    };
    let conf = match parse_conf(env.command, stdin) {
        Ok(conf) => conf,
        Err(e) => return fail(&early(), &e, early_version),
    };
    let version = conf
        .cni_version
        .as_deref()
        .and_then(|v| Version::parse(v).ok());
    drop(parsing);
    let log_file = conf.log_file.as_deref().map(|p| (p, conf.log_max_bytes()));
    let log = {
        let _phase = phases::start(|| "logging set-up");
        logging::dispatch(log_file, conf.enable_debug)
    };
    tracing::dispatcher::with_default(&log, || {
        tracing::debug!(command = env.command.as_str(), container_id = ?env.container_id,
            ifname = ?env.ifname, netns = ?env.netns, "invoked");
        match execute(&env, &conf, make_plugin) {
            Ok(Some(out)) => {
                tracing::info!(command = env.command.as_str(), container_id = ?env.container_id, "ok");
                tracing::debug!(output = %out, "result");
                (format!("{out}\n"), 0)
            }
            Ok(None) => {
                tracing::info!(command = env.command.as_str(), container_id = ?env.container_id, "ok");
                (String::new(), 0)
            }
            Err(e) => fail(&log, &e, version),
        }
    })
}

/// Parses stdin. VERSION only needs `cniVersion` and tolerates an empty or
/// undecodable stdin; every other command needs a valid config.
fn parse_conf(command: Command, stdin: &[u8]) -> Result<NetConf, CniError> {
    if command == Command::Version {
        return Ok(NetConf {
            cni_version: sniff_raw_version(stdin),
            ..NetConf::default()
        });
    }
    NetConf::parse(stdin)
}

fn execute<B>(env: &CniEnv, conf: &NetConf, make_plugin: B) -> Result<Option<Value>, CniError>
where
    B: FnOnce(&NetConf) -> Result<Plugin, CniError>,
{
    if env.command == Command::Version {
        return Ok(Some(version_output(conf)));
    }
    let starting = phases::start(|| "runtime start");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| {
            CniError::new(ErrorCode::Io, "cannot start the async runtime")
                .with_details(error_chain(&e))
        })?;
    drop(starting);
    let plugin = {
        let _phase = phases::start(|| "plugin set-up (client, netlink socket)");
        let _entered = runtime.enter();
        make_plugin(conf)?
    };
    let queue_dir = conf
        .delete_queue_dir
        .clone()
        .unwrap_or_else(|| DeleteQueue::DEFAULT_DIR.into());
    let plugin = plugin.with_delete_queue(DeleteQueue::new(queue_dir));
    let _phase = phases::start(|| format!("command {}", env.command.as_str()));
    runtime.block_on(dispatch(&plugin, env, conf))
}

/// Logs `e` and renders it; `version` is the config's when known and supported.
fn fail(log: &tracing::Dispatch, e: &CniError, version: Option<Version>) -> (String, i32) {
    tracing::dispatcher::with_default(log, || {
        tracing::error!(code = e.code.as_u32(), msg = %e.msg, details = %e.details, "failed");
    });
    let version = version.unwrap_or(Version::LATEST);
    (format!("{}\n", e.to_json(version.as_str())), 1)
}

/// The error printed when `run` itself panicked (a bug).
pub(crate) fn internal_error(msg: &str) -> (String, i32) {
    (
        format!(
            "{}\n",
            CniError::new(ErrorCode::Internal, msg).to_json(Version::LATEST.as_str())
        ),
        1,
    )
}

/// The error printed when stdin cannot be read.
pub(crate) fn io_error(msg: &str) -> (String, i32) {
    (
        format!(
            "{}\n",
            CniError::new(ErrorCode::Io, msg).to_json(Version::LATEST.as_str())
        ),
        1,
    )
}

/// The `cniVersion` string of stdin, if stdin is a JSON object that has one.
fn sniff_raw_version(stdin: &[u8]) -> Option<String> {
    decode_cni_version(stdin).ok().flatten()
}

/// The supported version named by stdin's `cniVersion`, if any.
fn sniff_version(stdin: &[u8]) -> Option<Version> {
    if stdin.len() > MAX_STDIN {
        return None;
    }
    sniff_raw_version(stdin).and_then(|v| Version::parse(&v).ok())
}

#[cfg(test)]
#[path = "run_tests.rs"]
mod tests;
