//! [`dispatch`]: one CNI invocation, from parsed environment and config to the
//! JSON to print.

use serde_json::Value;

use crate::cni::config::check_command_version;
use crate::cni::version::version_answer;
use crate::cni::{CniEnv, CniError, Command, NetConf, Version};

use super::Plugin;
use super::request::{AddRequest, CheckRequest, DelRequest, GcRequest};

/// Runs the command in `env` with `conf` on `plugin`.
///
/// Checks the config's `cniVersion` and that the command exists in it (CHECK needs
/// ≥ 0.4.0, STATUS and GC ≥ 1.1.0), then returns what to print on stdout: the
/// result in the config's `cniVersion` for ADD, the supported versions for VERSION,
/// nothing for the others. Errors are ready to print with [`CniError::to_json`].
pub async fn dispatch(
    plugin: &Plugin,
    env: &CniEnv,
    conf: &NetConf,
) -> Result<Option<Value>, CniError> {
    if env.command == Command::Version {
        return Ok(Some(version_output(conf)));
    }
    let version = conf.version()?;
    check_command_version(env.command, version)?;
    tracing::debug!(command = %env.command.as_str(), %version, "dispatching");
    match env.command {
        Command::Add => {
            let req = AddRequest::from_cni(env, conf)?;
            let result = plugin.add(&req).await?;
            Ok(Some(result.to_json(version)?))
        }
        Command::Del => {
            plugin.del(&DelRequest::from_cni(env, conf)?).await?;
            Ok(None)
        }
        Command::Check => {
            plugin.check(&CheckRequest::from_cni(env, conf)?).await?;
            Ok(None)
        }
        Command::Status => {
            plugin.status().await?;
            Ok(None)
        }
        Command::Gc => {
            plugin.gc(&GcRequest::from_cni(env, conf)?).await?;
            Ok(None)
        }
        Command::Version => Ok(Some(version_output(conf))),
    }
}

/// The answer to VERSION: the supported versions, echoing the config's `cniVersion`
/// when Sarena speaks it and the newest version otherwise (an absent, empty or newer
/// input never fails VERSION).
pub fn version_output(conf: &NetConf) -> Value {
    let echoed = conf
        .cni_version
        .as_deref()
        .and_then(|v| Version::parse(v).ok())
        .unwrap_or(Version::LATEST);
    version_answer(echoed.as_str())
}

#[cfg(test)]
#[path = "dispatch_tests.rs"]
mod tests;
