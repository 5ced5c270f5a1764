//! Removing the eBPF dataplane from a node without loading it: no
//! [`super::AyaDataplane`] is opened (its `open` would pin the maps anew),
//! nothing is created. For the uninstall, in this order:
//!
//! 1. [`remove_network_hooks`]: `to_network` / `from_network` on the node
//!    devices, recognised by position (prio 1, handle 1), name, and the
//!    maps they use: those pinned under the pin dir, which tells this
//!    node's filters from those of another Sarena sharing the bpffs;
//! 2. [`remove_added_clsacts`]: the `clsact` qdiscs the host-changes ledger
//!    says Sarena added, once no filter is left on them;
//! 3. [`remove_pins`]: the tcx links of earlier releases, then the pin
//!    directory (the maps and programs are freed with their last user).
//!
//! Pod veths (`lxc…`) are skipped: their filters and qdiscs go with them.
//! Every function returns one human line per object removed (or that would
//! be, in a dry run); an empty list means nothing of Sarena's was there.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use futures_util::TryStreamExt;
use rtnetlink::packet_route::tc::TcMessage;

use super::error::BpfError;
use super::network_hook::is_network_hook;
use super::pins::{self, Direction};
use super::qdisc;
use super::reconcile::{interfaces, programs_using};
use super::tc::{self, HANDLE, PRIORITY, TcAttachment};
use crate::dataplane::DataplaneError;
use crate::host_ledger::Ledger;
use crate::netlink::{self, NetlinkError};

/// One thing found (and removed unless dry run), e.g.
/// `removed filter to_network from eth0 egress`.
pub type Found = Vec<String>;

/// The prefix of pod veths, whose filters go with the veth.
const POD_VETH_PREFIX: &str = "lxc";

/// The name of a pin dir's parent shared by the nodes of one bpffs
/// (`/sys/fs/bpf/sarena-node/$NODE`), removed once empty.
const SHARED_PARENT: &str = "sarena-node";

/// `removed` or `would remove`.
fn verb(dry_run: bool) -> &'static str {
    if dry_run { "would remove" } else { "removed" }
}

fn host_handle() -> Result<rtnetlink::Handle, DataplaneError> {
    netlink::host_handle().map_err(|source| DataplaneError::Socket { source })
}

/// Removes Sarena's node-device filters of the pin dir `pin_dir` from every
/// interface of the current network namespace but the pod veths: the
/// filters at Sarena's position running `to_network` or `from_network`
/// whose program uses a map pinned under `pin_dir/maps` (ingress first, as
/// `detach_network_hook`). Such a filter that uses none of them (another
/// pin dir's, or any when `pin_dir` has no maps: a wrong `--bpf-pin-dir`,
/// a node that never ran the eBPF dataplane) is kept, with a line saying
/// so: only what is provably this node's goes.
pub async fn remove_network_hooks(pin_dir: &Path, dry_run: bool) -> Result<Found, DataplaneError> {
    let pinned = pinned_map_ids(pin_dir)?;
    let ours = if pinned.is_empty() {
        BTreeSet::new()
    } else {
        programs_using(&pinned)
    };
    let handle = host_handle()?;
    let mut lines = Vec::new();
    for (ifindex, ifname) in interfaces() {
        if ifname.starts_with(POD_VETH_PREFIX) {
            continue;
        }
        let found = tc::query(&handle, ifindex).await?;
        // Ingress first: no answer is delivered directly once the flows
        // stop being recorded.
        for direction in [Direction::Ingress, Direction::Egress] {
            let Some(filter) = found.iter().find(|a| a.direction == direction) else {
                continue;
            };
            if !is_network_hook(&filter.program) {
                continue;
            }
            if !is_ours(filter, &ours) {
                lines.push(format!(
                    "kept filter {} on {ifname} {direction}: it uses no map pinned under {}",
                    filter.program,
                    pin_dir.display()
                ));
                continue;
            }
            if !dry_run {
                tc::detach(&ifname, direction)?;
                // Checked, not assumed: a filter still there keeps the
                // programs running with their pins about to go.
                let after = tc::query(&handle, ifindex).await?;
                if after
                    .iter()
                    .any(|a| a.direction == direction && a.program_id == filter.program_id)
                {
                    lines.push(format!(
                        "left filter {} on {ifname} {direction}: still attached after the detach",
                        filter.program
                    ));
                    continue;
                }
            }
            lines.push(format!(
                "{} filter {} from {ifname} {direction}",
                verb(dry_run),
                filter.program
            ));
        }
    }
    Ok(lines)
}

/// Whether `filter` (at Sarena's position) is one of the node-device
/// programs of the dataplane whose programs are `ours`.
fn is_ours(filter: &TcAttachment, ours: &BTreeSet<u32>) -> bool {
    is_network_hook(&filter.program) && ours.contains(&filter.program_id)
}

/// The kernel ids of the maps pinned under `pin_dir/maps` (none when the
/// directory is missing).
fn pinned_map_ids(pin_dir: &Path) -> Result<BTreeSet<u32>, DataplaneError> {
    let dir = pins::maps_dir(pin_dir);
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeSet::new()),
        Err(source) => {
            return Err(DataplaneError::Io {
                call: "list pinned maps",
                path: dir,
                source,
            });
        }
    };
    let mut ids = BTreeSet::new();
    for entry in entries {
        let path = entry
            .map_err(|source| DataplaneError::Io {
                call: "list pinned maps",
                path: dir.clone(),
                source,
            })?
            .path();
        let info = aya::maps::MapInfo::from_pin(&path).map_err(|source| BpfError::Pin {
            call: "open pin",
            path: path.clone(),
            source: Box::new(source),
        })?;
        ids.insert(info.id());
    }
    Ok(ids)
}

/// Removes the `clsact` qdiscs `ledger` says Sarena added, on the devices
/// that still have the recorded (ifindex, name), once no filter is left on
/// either hook; with filters left the qdisc stays (`left clsact on DEV:
/// filters of others remain`). A device gone or renamed took its qdisc
/// with it. In a dry run, Sarena's own node-device filters (which the
/// hooks step would remove first) do not count.
pub async fn remove_added_clsacts(ledger: &Ledger, dry_run: bool) -> Result<Found, DataplaneError> {
    let handle = host_handle()?;
    let mut lines = Vec::new();
    for added in &ledger.clsact {
        let ifname = added.ifname.as_str();
        let current = nix::net::if_::if_nametoindex(ifname).ok();
        if current != Some(added.ifindex) || !qdisc::has_clsact(&handle, added.ifindex).await? {
            continue;
        }
        if others_filters(&handle, added.ifindex, dry_run).await? {
            lines.push(format!("left clsact on {ifname}: filters of others remain"));
            continue;
        }
        if !dry_run {
            qdisc::remove_clsact(&handle, added.ifindex).await?;
        }
        lines.push(format!("{} clsact from {ifname}", verb(dry_run)));
    }
    Ok(lines)
}

/// Whether a filter is on either hook of `ifindex`; with `skip_ours`,
/// Sarena's node-device filters (and their chain's head) do not count.
async fn others_filters(
    handle: &rtnetlink::Handle,
    ifindex: u32,
    skip_ours: bool,
) -> Result<bool, DataplaneError> {
    let index =
        i32::try_from(ifindex).map_err(|source| BpfError::IfindexRange { ifindex, source })?;
    for direction in Direction::ALL {
        let request = handle.traffic_filter(index).get();
        let request = match direction {
            Direction::Ingress => request.ingress(),
            Direction::Egress => request.egress(),
        };
        let messages: Vec<TcMessage> = match request.execute().try_collect().await {
            Ok(messages) => messages,
            Err(e) if matches!(netlink::errno(&e), Some(libc::EINVAL | libc::ENOENT)) => Vec::new(),
            Err(e) => {
                let object = format!("{direction} of ifindex {ifindex}");
                return Err(NetlinkError::new("filter dump", object, e).into());
            }
        };
        let ours_at_our_position = skip_ours
            && messages.iter().any(|m| {
                at_our_position(m)
                    && tc::bpf_filter(direction, &m.attributes)
                        .is_some_and(|a| is_network_hook(&a.program))
            });
        let others = messages.iter().any(|m| {
            let prio = m.header.info >> 16;
            !(ours_at_our_position && prio == u32::from(PRIORITY))
        });
        if others {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Whether the filter `message` sits at Sarena's priority and handle.
fn at_our_position(message: &TcMessage) -> bool {
    message.header.info >> 16 == u32::from(PRIORITY)
        && u32::from(message.header.handle) == u32::from(HANDLE)
}

/// Removes the pin dir `pin_dir`: the tcx links of earlier releases pinned
/// under `links/` first (detached synchronously), then the maps pinned
/// under `maps/` (Sarena's names, `SARENA_*`), then the directories once
/// empty, then the parent when that is `sarena-node` and empty (other
/// nodes' dirs on a shared bpffs keep it). Nothing else is removed: a pin
/// dir that holds other entries (a `--bpf-pin-dir` naming a shared
/// directory) is kept, with a line saying so. `pin_dir` must be absolute,
/// without `.` or `..`.
pub fn remove_pins(pin_dir: &Path, dry_run: bool) -> Result<Found, DataplaneError> {
    if !is_plain_absolute(pin_dir) {
        return Err(BpfError::PinDirPath {
            path: pin_dir.to_owned(),
        }
        .into());
    }
    let mut lines = Vec::new();
    let io = |call, path: &Path| {
        let path = path.to_owned();
        move |source| DataplaneError::Io { call, path, source }
    };
    let links = pins::list_links(pin_dir).map_err(io("list pins", &pins::links_dir(pin_dir)))?;
    for link in links {
        let path = pins::links_dir(pin_dir).join(link.file_name());
        if !dry_run {
            pins::detach_and_unpin(&path).map_err(io("remove pin", &path))?;
        }
        lines.push(format!(
            "{} pinned tcx link {} ({} of {})",
            verb(dry_run),
            path.display(),
            link.direction,
            link.ifname
        ));
    }
    let existed = pin_dir.exists();
    let maps = pins::maps_dir(pin_dir);
    let mut pinned = 0;
    for name in names_in(&maps).map_err(io("list pins", &maps))? {
        if !name.starts_with(MAP_PREFIX) {
            continue;
        }
        let path = maps.join(&name);
        if !dry_run {
            remove_missing_ok(std::fs::remove_file(&path)).map_err(io("remove pin", &path))?;
        }
        pinned += 1;
    }
    if !dry_run {
        for dir in [pins::links_dir(pin_dir), maps.clone(), pin_dir.to_owned()] {
            match std::fs::remove_dir(&dir) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) if e.kind() == std::io::ErrorKind::DirectoryNotEmpty => {
                    let others = names_in(&dir).map_err(io("list", &dir))?.join(", ");
                    lines.push(format!(
                        "kept {}: holds entries not Sarena's: {others}",
                        dir.display()
                    ));
                    return Ok(lines);
                }
                Err(e) => return Err(io("remove", &dir)(e)),
            }
        }
    }
    if pinned > 0 || existed {
        lines.push(format!("{} pin dir {}", verb(dry_run), pin_dir.display()));
    }
    if let Some(parent) = shared_parent(pin_dir)
        && is_empty_but(&parent, pin_dir).map_err(io("list", &parent))?
    {
        if !dry_run {
            remove_missing_ok(std::fs::remove_dir(&parent)).map_err(io("remove", &parent))?;
        }
        lines.push(format!("{} directory {}", verb(dry_run), parent.display()));
    }
    Ok(lines)
}

/// The prefix of every map Sarena pins (`sarena_common`'s map names).
const MAP_PREFIX: &str = "SARENA_";

/// Whether `path` is absolute, not `/`, and has no `.` or `..` component,
/// so that what it names is what it says (never a parent by `a/..`): the
/// rule for every directory the uninstall removes.
pub(crate) fn is_plain_absolute(path: &Path) -> bool {
    use std::path::Component;
    path.is_absolute()
        && path.parent().is_some()
        && path
            .components()
            .all(|c| matches!(c, Component::RootDir | Component::Normal(_)))
}

/// The names in `dir`, sorted (none when it is missing).
fn names_in(dir: &Path) -> std::io::Result<Vec<String>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut names = Vec::new();
    for entry in entries {
        names.push(entry?.file_name().to_string_lossy().into_owned());
    }
    names.sort();
    Ok(names)
}

/// `result`, with "already gone" as success.
fn remove_missing_ok(result: std::io::Result<()>) -> std::io::Result<()> {
    match result {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

/// `pin_dir`'s parent when it is the shared `sarena-node` directory.
fn shared_parent(pin_dir: &Path) -> Option<PathBuf> {
    let parent = pin_dir.parent()?;
    (parent.file_name()? == SHARED_PARENT).then(|| parent.to_owned())
}

/// Whether `dir` exists and holds nothing but (possibly) `child`.
fn is_empty_but(dir: &Path, child: &Path) -> std::io::Result<bool> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    for entry in entries {
        if entry?.path() != child {
            return Ok(false);
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(program: &str, program_id: u32) -> TcAttachment {
        TcAttachment {
            direction: Direction::Egress,
            program: program.into(),
            program_id,
            tag: 0,
        }
    }

    #[test]
    fn a_hook_is_ours_by_name_and_by_the_maps_its_program_uses() {
        let ours = BTreeSet::from([10, 11]);
        assert!(is_ours(&filter("to_network", 10), &ours));
        assert!(is_ours(&filter("from_network", 11), &ours));
        // Another pin dir's load of the same program.
        assert!(!is_ours(&filter("to_network", 20), &ours));
        // A pod program, or a foreign one, at our position.
        assert!(!is_ours(&filter("to_container", 10), &ours));
        assert!(!is_ours(&filter("cil_from_netdev", 10), &ours));
        // No maps pinned: nothing is provably ours.
        assert!(!is_ours(&filter("to_network", 20), &BTreeSet::new()));
    }

    #[test]
    fn a_pin_dir_that_is_not_a_plain_absolute_path_is_refused() {
        for bad in ["relative/sarena", "/", "/sys/fs/bpf/x/.."] {
            let err = remove_pins(Path::new(bad), false).unwrap_err();
            let text = crate::error_chain(&err);
            assert!(text.contains("absolute path"), "{bad}: {text}");
        }
    }

    #[test]
    fn only_sarenas_pins_go_and_a_dir_with_others_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let pin_dir = dir.path().join("sarena-node").join("n1");
        std::fs::create_dir_all(pin_dir.join("maps")).unwrap();
        std::fs::write(pin_dir.join("maps/SARENA_ENDPOINTS"), b"").unwrap();
        std::fs::write(pin_dir.join("maps/theirs"), b"").unwrap();
        let lines = remove_pins(&pin_dir, false).unwrap();
        assert!(!pin_dir.join("maps/SARENA_ENDPOINTS").exists());
        assert!(pin_dir.join("maps/theirs").exists(), "{lines:?}");
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with("kept ") && l.contains("theirs")),
            "{lines:?}"
        );

        std::fs::remove_file(pin_dir.join("maps/theirs")).unwrap();
        std::fs::write(pin_dir.join("maps/SARENA_POLICY"), b"").unwrap();
        let lines = remove_pins(&pin_dir, false).unwrap();
        assert!(!pin_dir.exists() && !dir.path().join("sarena-node").exists());
        assert_eq!(lines.len(), 2, "{lines:?}");
    }

    #[test]
    fn missing_pins_are_nothing_to_remove() {
        let dir = tempfile::tempdir().unwrap();
        let pin_dir = dir.path().join("sarena");
        assert!(pinned_map_ids(&pin_dir).unwrap().is_empty());
        assert!(remove_pins(&pin_dir, false).unwrap().is_empty());
    }

    #[test]
    fn the_shared_parent_goes_only_when_empty() {
        let dir = tempfile::tempdir().unwrap();
        let parent = dir.path().join(SHARED_PARENT);
        let (mine, other) = (parent.join("n1"), parent.join("n2"));
        std::fs::create_dir_all(&mine).unwrap();
        std::fs::create_dir_all(&other).unwrap();

        let dry = remove_pins(&mine, true).unwrap();
        assert_eq!(
            dry,
            vec![format!("would remove pin dir {}", mine.display())]
        );
        assert!(mine.exists());

        let lines = remove_pins(&mine, false).unwrap();
        assert_eq!(lines, vec![format!("removed pin dir {}", mine.display())]);
        assert!(
            !mine.exists() && parent.exists(),
            "another node's dir keeps it"
        );

        assert_eq!(
            remove_pins(&other, true).unwrap(),
            vec![
                format!("would remove pin dir {}", other.display()),
                format!("would remove directory {}", parent.display()),
            ]
        );
        remove_pins(&other, false).unwrap();
        assert!(!parent.exists());
        assert!(remove_pins(&other, false).unwrap().is_empty());
    }

    #[test]
    fn a_parent_of_another_name_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let pin_dir = dir.path().join("bpf").join("sarena");
        std::fs::create_dir_all(&pin_dir).unwrap();
        remove_pins(&pin_dir, false).unwrap();
        assert!(dir.path().join("bpf").exists());
    }
}
