//! Loading the object: the pins found judged first (`inspect.rs`), then maps
//! re-opened from (or pinned to) the pin directory, the programs loaded,
//! and what identifies them afterwards.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::{Arc, Mutex};

use aya::programs::tc::SchedClassifier;
use aya::{Ebpf, EbpfLoader};
use tokio::sync::OnceCell;

use sarena_common::peers::FROM_NETWORK_PROG;
use sarena_common::policy::TO_NETWORK_PROG;
use sarena_common::{
    FROM_CONTAINER_PROG, POD_EGRESS_PROG, TO_CONTAINER_BW_PROG, TO_CONTAINER_PROG,
};

use super::bandwidth::PacingMap;
use super::error::BpfError;
use super::fault::{KillAt, KillPoint};
use super::flow_keeper::TableKeeper;
use super::inspect;
use super::maps::Maps;
use super::pins;
use super::upgrade::Upgrade;
use super::{AyaDataplane, State};
use crate::dataplane::DataplaneError;

impl AyaDataplane {
    /// Loads `object` (the ELF built from `sarena-ebpf-programs`), re-opening
    /// the maps pinned under `pin_dir` by an earlier run or creating and
    /// pinning them. `pin_dir` must be on a bpffs; it is created if missing.
    /// Links pinned there earlier stay as they are until
    /// [`Dataplane::reconcile`](crate::dataplane::Dataplane::reconcile).
    ///
    /// First, before anything is created or reused, every pin found is
    /// judged against the layouts this release knows
    /// ([`sarena_common::layouts`]): a pin whose layout is not its name's, or
    /// a mark that does not allow this generation, fails here with nothing
    /// touched. Pins of the previous generation are taken over by
    /// reconcile (see [`BpfError::PinLayout`], [`BpfError::PinsTooNew`] and
    /// docs/upgrade.md).
    pub fn open(object: &[u8], pin_dir: &Path) -> Result<Self, DataplaneError> {
        if object.is_empty() {
            return Err(BpfError::NoObject.into());
        }
        let current = inspect::current_layouts(object)?;
        let inspection = inspect::inspect(pin_dir, &current)?;
        for dir in [pins::maps_dir(pin_dir), pins::links_dir(pin_dir)] {
            std::fs::create_dir_all(&dir).map_err(|source| DataplaneError::Io {
                call: "create pin dir",
                path: dir.clone(),
                source,
            })?;
        }
        let mut ebpf = loader(pin_dir)
            .load(object)
            .map_err(|source| BpfError::Load {
                pin_dir: pin_dir.to_owned(),
                source: Box::new(source),
            })?;
        let (tags, map_ids) = load_programs(&mut ebpf)?;
        let tables = Arc::new(TableKeeper::start(&pins::maps_dir(pin_dir)));
        let maps = Maps::take(&mut ebpf, Arc::clone(&tables))?;
        let policy = super::policy::PolicyLoader::open(super::policy::held_tables(&maps)?);
        let pacing = PacingMap::take(&mut ebpf)?;
        let peers = super::peer_maps::PeerMaps::take(&mut ebpf)?;
        let events = super::events::EventMaps::take(&mut ebpf)?;
        let upgrade = Upgrade::open(inspection)?;
        let kill_at = KillAt::from_env();
        if upgrade.migrating() {
            tracing::info!(pin_dir = %pin_dir.display(),
                "eBPF: pins of an earlier generation found; reconcile takes them over");
        }
        kill_at.kill_if(KillPoint::Loaded);
        Ok(AyaDataplane {
            pin_dir: pin_dir.to_owned(),
            object: object.to_vec(),
            state: Mutex::new(State {
                ebpf,
                tags,
                map_ids,
                maps,
                pacing,
                shaping: None,
                upgrade,
                policy,
                peers,
                events,
            }),
            tables,
            host_stack: None,
            host_updates: None,
            netlink: OnceCell::new(),
            netlink_turn: tokio::sync::Mutex::new(()),
            kill_at,
            ledger: None,
        })
    }
}

/// A loader that re-opens (or creates and pins) every pinned map of the
/// object under `pin_dir`: those pinned by name, and those pinned by path
/// ([`pins::PINNED_BY_PATH`]).
pub(super) fn loader<'a>(pin_dir: &Path) -> EbpfLoader<'a> {
    let mut loader = EbpfLoader::new();
    loader.default_map_pin_directory(pins::maps_dir(pin_dir));
    for name in pins::PINNED_BY_PATH {
        loader.map_pin_path(name, pins::maps_dir(pin_dir).join(name));
    }
    loader
}

/// Every program of the object: the two of every host veth, the paced
/// egress one, `pod_egress` (loaded here only for its tag: each limited
/// pod gets an instance of its own, see `pod_side.rs`), and `to_network`
/// and `from_network` (the node devices' egress and ingress, see
/// `network_hook.rs`).
const PROGRAMS: [&str; 6] = [
    FROM_CONTAINER_PROG,
    TO_CONTAINER_PROG,
    TO_CONTAINER_BW_PROG,
    POD_EGRESS_PROG,
    TO_NETWORK_PROG,
    FROM_NETWORK_PROG,
];

/// Loads the programs into the kernel; returns their tags by name and the
/// ids of the maps they use.
fn load_programs(
    ebpf: &mut Ebpf,
) -> Result<(BTreeMap<&'static str, u64>, BTreeSet<u32>), BpfError> {
    let mut tags = BTreeMap::new();
    let mut map_ids = BTreeSet::new();
    for name in PROGRAMS {
        let program_error = |call| {
            move |source| BpfError::Program {
                call,
                program: name,
                source: Box::new(source),
            }
        };
        let prog = program(ebpf, name)?;
        prog.load().map_err(program_error("load program"))?;
        let info = prog.info().map_err(program_error("program info"))?;
        tags.insert(name, info.tag());
        let ids = info.map_ids().map_err(program_error("program maps"))?;
        map_ids.extend(ids.unwrap_or_default());
    }
    Ok((tags, map_ids))
}

/// The classifier program `name` of the object.
pub(super) fn program<'a>(
    ebpf: &'a mut Ebpf,
    name: &'static str,
) -> Result<&'a mut SchedClassifier, BpfError> {
    ebpf.program_mut(name)
        .ok_or(BpfError::NoProgram { program: name })?
        .try_into()
        .map_err(|source| BpfError::Program {
            call: "find program",
            program: name,
            source: Box::new(source),
        })
}
