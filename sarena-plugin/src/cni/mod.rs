//! The CNI protocol, spec 1.1.0 (with conversions down to 0.1.0).
//!
//! Parsing is strict where the spec is strict (environment, `CNI_ARGS`, names)
//! and lenient where it asks to be (unknown config fields are kept).

pub mod args;
pub mod bandwidth;
pub mod chain;
pub mod conf_dir;
pub mod config;
pub mod env;
pub mod error;
pub mod result;
pub mod validate;
pub mod version;

pub use args::CniArgs;
pub use config::{DEFAULT_LOG_MAX_BYTES, MIN_LOG_MAX_BYTES, NetConf};
pub use env::{CniEnv, Command};
pub use error::{CniError, ErrorCode};
pub use result::CniResult;
pub use version::Version;
