//! The bpffs layout under the pin directory:
//!
//! ```text
//! <pin_dir>/maps/SARENA_ENDPOINTS            pod address → endpoint
//! <pin_dir>/maps/SARENA_ENDPOINTS6           pod IPv6 address → endpoint
//! <pin_dir>/maps/SARENA_VETHS                host ifindex → endpoint
//! <pin_dir>/maps/SARENA_COUNTERS_V2          host ifindex → per-CPU counters
//! <pin_dir>/maps/SARENA_HOST_FLOWS_V2        host ifindex → its flows table (LRU): the pod ↔ pod
//!                                            flows the host stack handled, by the pod that started them
//! <pin_dir>/maps/SARENA_IPCACHE              address prefix → identity (NetworkPolicy)
//! <pin_dir>/maps/SARENA_POLICY               allow entries of every endpoint (NetworkPolicy)
//! <pin_dir>/maps/SARENA_POLICY_FLOWS         host ifindex → its answerable flows (LRU)
//! <pin_dir>/maps/SARENA_HOST_FLOWS           generation 2's node-wide flows table (upgrade.rs)
//! <pin_dir>/maps/SARENA_LAYOUT               the layout generation of the pins (upgrade.rs)
//! <pin_dir>/maps/SARENA_COUNTERS             release 0.1.0's counters (upgrade.rs, handover.rs)
//! <pin_dir>/links/<ifindex>_<ifname>_ingress tcx link of from_container (earlier versions)
//! <pin_dir>/links/<ifindex>_<ifname>_egress  tcx link of to_container (earlier versions)
//! ```
//!
//! bpffs refuses names with a dot (reserved by the kernel), hence `_`; a host
//! veth whose name has a dot cannot be attached (Sarena's are `lxc` + hex).
//!
//! Sarena now attaches with tc filters (see [`super::tc`]); the `links/` pins
//! are what versions that used tcx left, read only to remove them.
//!
//! A pinned tcx link stays attached while its pin exists, whatever happens to
//! the daemon; removing the pin (with no fd left open) detaches it. The pins are
//! the record of what is attached: the ifindex in the name tells a link on a
//! recreated interface of the same name from the current one.

use std::path::{Path, PathBuf};

use aya::programs::tc::TcAttachType;

/// The object's maps pinned by path rather than by their definition: BTF
/// map definitions (the only ones that can describe a map of maps) carry no
/// pinning attribute in aya-ebpf, so the loader is told where each goes.
pub const PINNED_BY_PATH: [&str; 2] = [
    sarena_common::HOST_FLOWS_MAP,
    sarena_common::policy::POLICY_FLOWS_MAP,
];

/// Which hook of the host-side veth a link sits on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Direction {
    /// Ingress: `from_container`.
    Ingress,
    /// Egress: `to_container`.
    Egress,
}

impl Direction {
    /// Both hooks.
    pub const ALL: [Direction; 2] = [Direction::Ingress, Direction::Egress];

    /// `ingress` or `egress`.
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Ingress => "ingress",
            Direction::Egress => "egress",
        }
    }

    pub(super) fn attach_type(self) -> TcAttachType {
        match self {
            Direction::Ingress => TcAttachType::Ingress,
            Direction::Egress => TcAttachType::Egress,
        }
    }

    /// The name of the program on this hook.
    pub fn program(self) -> &'static str {
        match self {
            Direction::Ingress => sarena_common::FROM_CONTAINER_PROG,
            Direction::Egress => sarena_common::TO_CONTAINER_PROG,
        }
    }
}

impl std::fmt::Display for Direction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One pinned tcx link.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PinnedAttachment {
    /// Ifindex of the host-side veth when the link was made.
    pub ifindex: u32,
    /// Name of the host-side veth.
    pub ifname: String,
    /// Hook.
    pub direction: Direction,
}

impl PinnedAttachment {
    /// The pin's file name.
    pub fn file_name(&self) -> String {
        format!(
            "{}_{}_{}",
            self.ifindex,
            self.ifname,
            self.direction.as_str()
        )
    }

    /// Parses a pin's file name; `None` for anything else.
    pub fn parse(name: &str) -> Option<PinnedAttachment> {
        let (ifindex, rest) = name.split_once('_')?;
        let (ifname, direction) = rest.rsplit_once('_')?;
        let direction = match direction {
            "ingress" => Direction::Ingress,
            "egress" => Direction::Egress,
            _ => return None,
        };
        if ifname.is_empty() {
            return None;
        }
        Some(PinnedAttachment {
            ifindex: ifindex.parse().ok()?,
            ifname: ifname.to_owned(),
            direction,
        })
    }
}

/// `<pin_dir>/maps`.
pub fn maps_dir(pin_dir: &Path) -> PathBuf {
    pin_dir.join("maps")
}

/// `<pin_dir>/links`.
pub fn links_dir(pin_dir: &Path) -> PathBuf {
    pin_dir.join("links")
}

/// Every link pinned under `pin_dir`, sorted.
pub fn list_links(pin_dir: &Path) -> std::io::Result<Vec<PinnedAttachment>> {
    let dir = links_dir(pin_dir);
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut links = Vec::new();
    for entry in entries {
        let entry = entry?;
        if let Some(link) = entry.file_name().to_str().and_then(PinnedAttachment::parse) {
            links.push(link);
        }
    }
    links.sort();
    Ok(links)
}

/// Detaches the link pinned at `path` right away and removes the pin.
///
/// Removing the pin alone detaches the link only once the kernel frees the
/// inode (after an RCU grace period and a work item), so a caller looking
/// right after would still see the program; `BPF_LINK_DETACH` is synchronous.
/// A missing pin is fine.
pub fn detach_and_unpin(path: &Path) -> std::io::Result<()> {
    use std::os::fd::{FromRawFd, OwnedFd};
    use std::os::unix::ffi::OsStrExt;

    const BPF_OBJ_GET: libc::c_long = 7;
    const BPF_LINK_DETACH: libc::c_long = 34;

    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    // `union bpf_attr`, zeroed; BPF_OBJ_GET reads `pathname` (u64 at offset 0),
    // BPF_LINK_DETACH reads `link_fd` (u32 at offset 0).
    let mut attr = [0u64; 16];
    attr[0] = c_path.as_ptr() as u64;
    let size = std::mem::size_of_val(&attr) as libc::c_uint;
    // SAFETY: `attr` is a valid, zero-padded bpf_attr of `size` bytes and
    // `c_path` outlives the call.
    let fd = unsafe { libc::syscall(libc::SYS_bpf, BPF_OBJ_GET, attr.as_ptr(), size) };
    if fd < 0 {
        let e = std::io::Error::last_os_error();
        return match e.kind() {
            std::io::ErrorKind::NotFound => Ok(()),
            _ => Err(e),
        };
    }
    // SAFETY: the kernel just returned this fd to us; nothing else owns it.
    let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    let mut attr = [0u64; 16];
    attr[0] = u64::from(std::os::fd::AsRawFd::as_raw_fd(&fd) as u32);
    // SAFETY: as above; the link fd stays open for the call.
    let rc = unsafe { libc::syscall(libc::SYS_bpf, BPF_LINK_DETACH, attr.as_ptr(), size) };
    if rc < 0 {
        // Already detached (its interface is gone): nothing to do but unpin.
        tracing::debug!(path = %path.display(), error = %std::io::Error::last_os_error(), "BPF_LINK_DETACH");
    }
    drop(fd);
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pin_names_round_trip_even_with_underscores_in_the_ifname() {
        for (ifindex, ifname, direction) in [
            (7, "lxc0123456789ab", Direction::Ingress),
            (12, "veth_a_b", Direction::Egress),
        ] {
            let link = PinnedAttachment {
                ifindex,
                ifname: ifname.into(),
                direction,
            };
            assert_eq!(PinnedAttachment::parse(&link.file_name()), Some(link));
        }
    }

    #[test]
    fn foreign_names_are_ignored() {
        for name in [
            "",
            "x_lxc_ingress",
            "7_lxc_sideways",
            "7__ingress",
            "7ingress",
        ] {
            assert_eq!(PinnedAttachment::parse(name), None, "{name}");
        }
    }

    #[test]
    fn listing_a_missing_dir_is_empty() {
        let dir = tempfile::tempdir().unwrap();
        assert!(list_links(&dir.path().join("nope")).unwrap().is_empty());
        std::fs::create_dir_all(links_dir(dir.path())).unwrap();
        std::fs::write(links_dir(dir.path()).join("3_lxca_egress"), b"").unwrap();
        std::fs::write(links_dir(dir.path()).join("junk"), b"").unwrap();
        assert_eq!(
            list_links(dir.path()).unwrap(),
            vec![PinnedAttachment {
                ifindex: 3,
                ifname: "lxca".into(),
                direction: Direction::Egress
            }]
        );
    }
}
