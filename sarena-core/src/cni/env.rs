//! The `CNI_*` environment variables.

use std::path::PathBuf;

use super::args::CniArgs;

/// `CNI_COMMAND`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Command {
    /// ADD.
    Add,
    /// DEL.
    Del,
    /// CHECK.
    Check,
    /// STATUS.
    Status,
    /// GC.
    Gc,
    /// VERSION.
    Version,
}

/// The environment of one plugin invocation, validated for its command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CniEnv {
    /// `CNI_COMMAND`.
    pub command: Command,
    /// `CNI_CONTAINERID` (required by ADD, CHECK, DEL).
    pub container_id: Option<String>,
    /// `CNI_NETNS` (required by ADD and CHECK; DEL may have none).
    pub netns: Option<PathBuf>,
    /// `CNI_IFNAME` (required by ADD, CHECK, DEL).
    pub ifname: Option<String>,
    /// `CNI_ARGS`.
    pub args: CniArgs,
    /// `CNI_PATH`, split on `:`.
    pub path: Vec<PathBuf>,
}
