//! The bpffs layout under the pin directory:
//!
//! ```text
//! <pin_dir>/maps/SARENA_ENDPOINTS            pod address → endpoint
//! <pin_dir>/maps/SARENA_COUNTERS             host ifindex → per-CPU counters
//! <pin_dir>/links/<ifindex>.<ifname>.ingress tcx link of from_container
//! <pin_dir>/links/<ifindex>.<ifname>.egress  tcx link of to_container
//! ```
//!
//! A pinned tcx link stays attached while its pin exists, whatever happens to
//! the daemon; removing the pin (with no fd left open) detaches it. The pins are
//! the record of what is attached: the ifindex in the name tells a link on a
//! recreated interface of the same name from the current one.

use std::path::{Path, PathBuf};

use aya::programs::tc::TcAttachType;

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

    pub(super) fn program(self) -> &'static str {
        match self {
            Direction::Ingress => sarena_common::FROM_CONTAINER_PROG,
            Direction::Egress => sarena_common::TO_CONTAINER_PROG,
        }
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
            "{}.{}.{}",
            self.ifindex,
            self.ifname,
            self.direction.as_str()
        )
    }

    /// Parses a pin's file name; `None` for anything else.
    pub fn parse(name: &str) -> Option<PinnedAttachment> {
        let (ifindex, rest) = name.split_once('.')?;
        let (ifname, direction) = rest.rsplit_once('.')?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pin_names_round_trip_even_with_dots_in_the_ifname() {
        for (ifindex, ifname, direction) in [
            (7, "lxc0123456789ab", Direction::Ingress),
            (12, "eth0.100", Direction::Egress),
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
            "x.lxc.ingress",
            "7.lxc.sideways",
            "7..ingress",
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
        std::fs::write(links_dir(dir.path()).join("3.lxca.egress"), b"").unwrap();
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
