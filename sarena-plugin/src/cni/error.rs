//! CNI error codes and the error object a plugin prints on failure.

use serde::{Deserialize, Serialize};

/// The well-known CNI error codes (spec §"Error"), plus Sarena's own (≥ 100).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(into = "u32", try_from = "u32")]
pub enum ErrorCode {
    /// 1: incompatible CNI version.
    IncompatibleVersion,
    /// 2: unsupported field in the network configuration.
    UnsupportedField,
    /// 3: container unknown or does not exist.
    UnknownContainer,
    /// 4: invalid necessary environment variables.
    InvalidEnvironment,
    /// 5: I/O failure.
    Io,
    /// 6: failed to decode content.
    Decode,
    /// 7: invalid network config.
    InvalidConfig,
    /// 11: try again later.
    TryAgainLater,
    /// 50: the plugin is not available (cannot service ADD requests).
    PluginNotAvailable,
    /// 51: the plugin is not available, and existing containers may be affected.
    PluginNotAvailableExistingAffected,
    /// 100: the daemon answered with an error.
    Daemon,
    /// 101: a netlink / kernel operation failed.
    Kernel,
    /// 102: CHECK found the container's network differs from what ADD set up.
    CheckFailed,
    /// 999: an internal error.
    Internal,
}

impl ErrorCode {
    /// The numeric code as printed in the error JSON.
    pub fn as_u32(self) -> u32 {
        match self {
            ErrorCode::IncompatibleVersion => 1,
            ErrorCode::UnsupportedField => 2,
            ErrorCode::UnknownContainer => 3,
            ErrorCode::InvalidEnvironment => 4,
            ErrorCode::Io => 5,
            ErrorCode::Decode => 6,
            ErrorCode::InvalidConfig => 7,
            ErrorCode::TryAgainLater => 11,
            ErrorCode::PluginNotAvailable => 50,
            ErrorCode::PluginNotAvailableExistingAffected => 51,
            ErrorCode::Daemon => 100,
            ErrorCode::Kernel => 101,
            ErrorCode::CheckFailed => 102,
            ErrorCode::Internal => 999,
        }
    }
}

impl From<ErrorCode> for u32 {
    fn from(code: ErrorCode) -> u32 {
        code.as_u32()
    }
}

impl TryFrom<u32> for ErrorCode {
    type Error = String;
    fn try_from(value: u32) -> Result<Self, Self::Error> {
        Ok(match value {
            1 => ErrorCode::IncompatibleVersion,
            2 => ErrorCode::UnsupportedField,
            3 => ErrorCode::UnknownContainer,
            4 => ErrorCode::InvalidEnvironment,
            5 => ErrorCode::Io,
            6 => ErrorCode::Decode,
            7 => ErrorCode::InvalidConfig,
            11 => ErrorCode::TryAgainLater,
            50 => ErrorCode::PluginNotAvailable,
            51 => ErrorCode::PluginNotAvailableExistingAffected,
            100 => ErrorCode::Daemon,
            101 => ErrorCode::Kernel,
            102 => ErrorCode::CheckFailed,
            999 => ErrorCode::Internal,
            other => return Err(format!("unknown CNI error code {other}")),
        })
    }
}

/// A CNI error: what the plugin prints on stdout (with `cniVersion`) before
/// exiting non-zero.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("CNI error {}: {msg}{}", code.as_u32(), if details.is_empty() { String::new() } else { format!(" ({details})") })]
pub struct CniError {
    /// The error code.
    pub code: ErrorCode,
    /// A short message; names the offending field or variable.
    pub msg: String,
    /// Longer details, e.g. the underlying cause.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub details: String,
}

impl CniError {
    /// A new error with empty details.
    pub fn new(code: ErrorCode, msg: impl Into<String>) -> Self {
        CniError {
            code,
            msg: msg.into(),
            details: String::new(),
        }
    }

    /// Sets the details.
    pub fn with_details(mut self, details: impl Into<String>) -> Self {
        self.details = details.into();
        self
    }

    /// The JSON object printed on stdout, in the given CNI version.
    pub fn to_json(&self, cni_version: &str) -> serde_json::Value {
        let mut obj = serde_json::json!({
            "cniVersion": cni_version,
            "code": self.code.as_u32(),
            "msg": self.msg,
        });
        if !self.details.is_empty() {
            obj["details"] = serde_json::Value::String(self.details.clone());
        }
        obj
    }
}
