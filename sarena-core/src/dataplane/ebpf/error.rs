//! [`BpfError`]: what the eBPF dataplane's loader, maps and tc filters report,
//! with aya's error as the source; and the errno each aya error carries.

use std::path::PathBuf;

use aya::maps::MapError;
use aya::programs::ProgramError;
use aya::programs::tc::TcError;

use sarena_common::layouts::MapLayout;

use super::pins::Direction;
use crate::error_chain;

/// Errors of the eBPF dataplane (inside [`DataplaneError::Ebpf`](crate::dataplane::DataplaneError::Ebpf)).
#[derive(Debug, thiserror::Error)]
pub enum BpfError {
    /// The daemon carries no object to load.
    #[error(
        "eBPF load: no eBPF object: the daemon was built without the eBPF toolchain \
         (run scripts/setup-ebpf.sh and rebuild, or use dataplane = \"kernel\")"
    )]
    NoObject,
    /// The object could not be loaded (or its maps opened or pinned).
    #[error("eBPF load with maps under {}", .pin_dir.display())]
    Load {
        /// The pin directory.
        pin_dir: PathBuf,
        /// aya's error (its sources hold the details).
        #[source]
        source: Box<aya::EbpfError>,
    },
    /// The object's ELF could not be read (for its map definitions).
    #[error("eBPF parse object")]
    Parse {
        /// aya-obj's error.
        #[source]
        source: Box<aya_obj::ParseError>,
    },
    /// The pin directory could not be listed.
    #[error("eBPF inspect pins in {}", .dir.display())]
    PinDir {
        /// The `maps/` directory.
        dir: PathBuf,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// A pinned map could not be opened, inspected, read or removed.
    #[error("eBPF {call} {}", .path.display())]
    Pin {
        /// What was asked, e.g. `open pin`.
        call: &'static str,
        /// The pin.
        path: PathBuf,
        /// aya's error.
        #[source]
        source: Box<MapError>,
    },
    /// A pin has another layout than the one its name stands for. Nothing
    /// was changed.
    #[error(
        "eBPF pin {}: {found}, but {} that name as {expected}. No release pins two \
         layouts under one name, so this pin comes from a development build; nothing \
         was changed. Remove the pin directory (pods keep their links and traffic; \
         the next start re-creates the maps and re-attaches every endpoint, with \
         counters from zero) and start again",
        .pin.display(),
        if *.retired { "an earlier release pinned" } else { "this release pins" }
    )]
    PinLayout {
        /// The pin.
        pin: PathBuf,
        /// What the kernel reports of it.
        found: MapLayout,
        /// The layout of its name.
        expected: MapLayout,
        /// The name is an earlier generation's, no longer pinned by this one.
        retired: bool,
    },
    /// The pins were left by a newer release that older ones must not run on.
    /// Nothing was changed.
    #[error(
        "eBPF pins under {}: left by a Sarena of map layout generation {generation}, which \
         only generation {oldest_reader} or later may open; this daemon is generation {}. \
         Nothing was changed: run a release of generation {oldest_reader} or later \
         (docs/upgrade.md lists each release's generation), or remove \
         the pin directory to start this release's maps afresh",
        .pin_dir.display(),
        sarena_common::layouts::GENERATION
    )]
    PinsTooNew {
        /// The pin directory.
        pin_dir: PathBuf,
        /// The generation of the daemon that left them.
        generation: u32,
        /// The oldest generation that may open them.
        oldest_reader: u32,
    },
    /// The object has no program of that name.
    #[error("eBPF find program {program}: not in the object")]
    NoProgram {
        /// The program.
        program: &'static str,
    },
    /// The object has no map of that name.
    #[error("eBPF find map {map}: not in the object")]
    NoMap {
        /// The map.
        map: &'static str,
    },
    /// A program could not be found, loaded or inspected.
    #[error("eBPF {call} {program}")]
    Program {
        /// What was asked, e.g. `load program`.
        call: &'static str,
        /// The program.
        program: &'static str,
        /// aya's error (the verifier log is in it).
        #[source]
        source: Box<ProgramError>,
    },
    /// A map operation failed.
    #[error("eBPF {call} {object}")]
    Map {
        /// What was asked, e.g. `insert endpoint`.
        call: &'static str,
        /// The map, key or interface involved.
        object: String,
        /// aya's error.
        #[source]
        source: Box<MapError>,
    },
    /// A map refused a new entry because it holds as many as it can
    /// (`ENOSPC`): the NetworkPolicy loader counts these.
    #[error("eBPF {call} {object}: {map} is full")]
    MapFull {
        /// What was asked, e.g. `set ipcache entry`.
        call: &'static str,
        /// The map.
        map: &'static str,
        /// The entry.
        object: String,
        /// aya's error.
        #[source]
        source: Box<MapError>,
    },
    /// An entry that no map key can express (a port prefix longer than 16
    /// bits, an ipcache prefix the trie cannot hold).
    #[error("eBPF {call} {object}: {reason}")]
    BadEntry {
        /// What was asked.
        call: &'static str,
        /// The entry.
        object: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// Another program than Sarena's sits at Sarena's position on a hook
    /// Sarena shares with others (a node device): left alone.
    #[error("eBPF attach {program} on {direction} of {ifname}: the filter there runs {found}")]
    ForeignFilter {
        /// The device.
        ifname: String,
        /// The hook.
        direction: Direction,
        /// The program Sarena would attach.
        program: &'static str,
        /// The program found.
        found: String,
    },
    /// Some policy entries of an endpoint being attached could not be
    /// written (a full map): what they allow is denied.
    #[error("eBPF policy entries of {ifname}: {failed} not written")]
    PolicyEntries {
        /// The endpoint's host veth.
        ifname: String,
        /// How many writes failed.
        failed: usize,
    },
    /// Some writes of a policy update failed (a full map): what they
    /// would allow is denied until an update succeeds.
    #[error("eBPF policy update: {failed} of {} writes failed{}", failed + writes, full_list(full_maps))]
    PolicyWrites {
        /// Writes that failed.
        failed: usize,
        /// Writes made.
        writes: usize,
        /// The maps that were full, by name (empty: other failures).
        full_maps: Vec<&'static str>,
    },
    /// The host has no device of that name.
    #[error("eBPF attach {ifname}: no such device")]
    NoDevice {
        /// The device's name.
        ifname: String,
    },
    /// A pin dir to remove that is relative or has `.` or `..` in it.
    #[error("eBPF pins: the pin dir {} must be an absolute path without . or ..", .path.display())]
    PinDirPath {
        /// The path given.
        path: std::path::PathBuf,
    },
    /// The per-CPU counters of an interface could not be made.
    #[error("eBPF per-CPU counters for {ifname}")]
    Cpus {
        /// The interface.
        ifname: String,
        /// Cause (the possible CPUs could not be read).
        #[source]
        source: std::io::Error,
    },
    /// The host has another interface (or none) under the endpoint's name.
    #[error(
        "eBPF attach {ifname}: the registry says ifindex {registry}, the host has {}",
        .host.map_or("no such interface".to_string(), |i| i.to_string())
    )]
    IfindexMismatch {
        /// The host veth's name.
        ifname: String,
        /// Its ifindex in the registry.
        registry: u32,
        /// The ifindex the host has under that name.
        host: Option<u32>,
    },
    /// The `clsact` qdisc could not be added.
    #[error("eBPF add clsact qdisc on {ifname}")]
    Clsact {
        /// The interface.
        ifname: String,
        /// aya's error.
        #[source]
        source: TcError,
    },
    /// A tc filter could not be added, replaced or deleted.
    #[error("eBPF {call} on {direction} of {ifname}")]
    Filter {
        /// What was asked, e.g. `add filter`.
        call: &'static str,
        /// The interface.
        ifname: String,
        /// The hook.
        direction: Direction,
        /// aya's error.
        #[source]
        source: Box<ProgramError>,
    },
    /// The filter at Sarena's position could not be looked up for replacing.
    #[error("eBPF find filter on {direction} of {ifname}")]
    FindFilter {
        /// The interface.
        ifname: String,
        /// The hook.
        direction: Direction,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// An ifindex that netlink cannot carry.
    #[error("eBPF filter dump: ifindex {ifindex} out of range")]
    IfindexRange {
        /// The ifindex.
        ifindex: u32,
        /// Cause.
        #[source]
        source: std::num::TryFromIntError,
    },
    /// Independent steps of one operation failed (detach, reconcile); each is kept.
    #[error(
        "eBPF {call} {object}: {}",
        .errors.iter().map(|e| error_chain(e)).collect::<Vec<_>>().join("; ")
    )]
    Several {
        /// What was done.
        call: &'static str,
        /// The interface or pin directory.
        object: String,
        /// Every failure, in order.
        errors: Vec<BpfError>,
    },
}

impl BpfError {
    /// The OS error code behind the failure, when aya reports one (the
    /// first failure's for [`BpfError::Several`]).
    pub fn errno(&self) -> Option<i32> {
        match self {
            BpfError::Program { source, .. } | BpfError::Filter { source, .. } => {
                program_errno(source)
            }
            BpfError::Map { source, .. }
            | BpfError::Pin { source, .. }
            | BpfError::MapFull { source, .. } => map_errno(source),
            BpfError::Clsact { source, .. } => tc_errno(source),
            BpfError::Cpus { source, .. }
            | BpfError::FindFilter { source, .. }
            | BpfError::PinDir { source, .. } => source.raw_os_error(),
            BpfError::Several { errors, .. } => errors.first().and_then(BpfError::errno),
            BpfError::NoObject
            | BpfError::Parse { .. }
            | BpfError::PinLayout { .. }
            | BpfError::PinsTooNew { .. }
            | BpfError::Load { .. }
            | BpfError::NoProgram { .. }
            | BpfError::NoMap { .. }
            | BpfError::IfindexMismatch { .. }
            | BpfError::IfindexRange { .. }
            | BpfError::BadEntry { .. }
            | BpfError::NoDevice { .. }
            | BpfError::PinDirPath { .. }
            | BpfError::PolicyEntries { .. }
            | BpfError::PolicyWrites { .. }
            | BpfError::ForeignFilter { .. } => None,
        }
    }

    /// `Ok(())` for no failures, else [`BpfError::Several`] naming the step.
    pub(super) fn collect(
        call: &'static str,
        object: impl Into<String>,
        errors: Vec<BpfError>,
    ) -> Result<(), BpfError> {
        if errors.is_empty() {
            return Ok(());
        }
        Err(BpfError::Several {
            call,
            object: object.into(),
            errors,
        })
    }
}

/// The errno (positive) of a program operation, wherever aya put it.
pub(super) fn program_errno(e: &ProgramError) -> Option<i32> {
    let code = match e {
        ProgramError::LoadError { io_error, .. } | ProgramError::IOError(io_error) => {
            io_error.raw_os_error()
        }
        ProgramError::SyscallError(s) => s.io_error.raw_os_error(),
        ProgramError::NetlinkError(n) => n.raw_os_error(),
        ProgramError::TcError(t) => return tc_errno(t),
        ProgramError::MapError(m) => return map_errno(m),
        _ => None,
    };
    code.map(i32::abs)
}

/// The errno (positive) of a qdisc operation.
pub(super) fn tc_errno(e: &TcError) -> Option<i32> {
    let code = match e {
        TcError::NetlinkError(n) => n.raw_os_error(),
        TcError::IoError(io) => io.raw_os_error(),
        _ => None,
    };
    code.map(i32::abs)
}

/// The errno (positive) of a map operation.
pub(super) fn map_errno(e: &MapError) -> Option<i32> {
    match e {
        MapError::SyscallError(s) => s.io_error.raw_os_error().map(i32::abs),
        _ => None,
    }
}

/// A lookup or delete of a missing key (reported either way by aya).
pub(super) fn is_not_found(e: &MapError) -> bool {
    matches!(e, MapError::KeyNotFound) || map_errno(e) == Some(libc::ENOENT)
}

/// `; full: A, B` for a non-empty list of map names.
fn full_list(maps: &[&'static str]) -> String {
    if maps.is_empty() {
        String::new()
    } else {
        format!("; full: {}", maps.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errnos_are_found_where_aya_puts_them() {
        let io = || std::io::Error::from_raw_os_error(libc::EEXIST);
        assert_eq!(
            program_errno(&ProgramError::TcError(TcError::IoError(io()))),
            Some(libc::EEXIST)
        );
        assert_eq!(
            program_errno(&ProgramError::IOError(io())),
            Some(libc::EEXIST)
        );
        assert_eq!(program_errno(&ProgramError::NotAttached), None);
        let missing = MapError::SyscallError(aya::sys::SyscallError {
            call: "bpf_map_lookup_elem",
            io_error: std::io::Error::from_raw_os_error(libc::ENOENT),
        });
        assert!(is_not_found(&missing));
        assert!(is_not_found(&MapError::KeyNotFound));
        assert!(!is_not_found(&MapError::InvalidMapType { map_type: 0 }));
    }

    #[test]
    fn failures_are_listed_under_the_step() {
        let mismatch = |ifname: &str| BpfError::IfindexMismatch {
            ifname: ifname.into(),
            registry: 7,
            host: None,
        };
        let text = BpfError::collect(
            "reconcile",
            "/sys/fs/bpf/x",
            vec![mismatch("lxca"), mismatch("lxcb")],
        )
        .unwrap_err()
        .to_string();
        assert!(text.starts_with("eBPF reconcile /sys/fs/bpf/x: "), "{text}");
        assert!(
            text.contains("lxca") && text.contains("lxcb") && text.contains("no such interface"),
            "{text}"
        );
        assert!(BpfError::collect("detach", "lxca", vec![]).is_ok());
    }
}
