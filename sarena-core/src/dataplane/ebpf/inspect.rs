//! Before the loader creates or reuses anything: what the pin directory
//! holds, judged against the layouts this daemon knows
//! ([`sarena_common::layouts`]). A doubt fails here, with nothing touched.
//!
//! - A pin named like one of the object's maps must have the object's layout.
//! - A pin of an older generation ([`layouts::PINNED`] entries this
//!   generation no longer pins) must have that generation's layout; it is
//!   carried over and removed once every endpoint runs this release's
//!   programs (see `upgrade.rs`).
//! - The mark ([`layouts::MARK_MAP`]) must allow this generation.
//! - Any other pin is a newer release's own map: left alone.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use aya::maps::{Array, Map, MapData};
use aya_obj::maps::PinningType;
use sarena_common::layouts::{self, GENERATION, MARK_MAP, MapLayout, PinsMark};

use super::error::BpfError;
use super::pins;

/// The layouts this release pins, by name: the object's pinned maps as its
/// ELF defines them, and the mark.
pub(super) fn current_layouts(object: &[u8]) -> Result<BTreeMap<String, MapLayout>, BpfError> {
    let parsed = aya_obj::Object::parse(object).map_err(|source| BpfError::Parse {
        source: Box::new(source),
    })?;
    let mut current: BTreeMap<String, MapLayout> = parsed
        .maps
        .iter()
        .filter(|(name, map)| {
            map.pinning() == PinningType::ByName || pins::PINNED_BY_PATH.contains(&name.as_str())
        })
        .map(|(name, map)| {
            let layout = MapLayout {
                map_type: map.map_type(),
                key_size: map.key_size(),
                value_size: map.value_size(),
                max_entries: map.max_entries(),
                flags: map.map_flags(),
            };
            (name.clone(), layout)
        })
        .collect();
    if let Some(mark) = layouts::pinned_layout(MARK_MAP) {
        current.insert(MARK_MAP.to_owned(), mark.layout);
    }
    Ok(current)
}

/// A pin of an older generation, to migrate from and then remove.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct RetiredPin {
    /// Its name (a [`layouts::PINNED`] entry).
    pub name: &'static str,
    /// Its path.
    pub path: PathBuf,
}

/// What the pin directory holds, judged.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Inspection {
    /// Pins of an older generation.
    pub retired: Vec<RetiredPin>,
    /// Pins this release knows nothing of, left alone.
    pub unknown: Vec<String>,
    /// The mark, if one was found.
    pub mark: Option<PinsMark>,
}

/// Reads what `pin_dir` holds and judges it; see the module docs. A missing
/// directory is a fresh node.
pub(super) fn inspect(
    pin_dir: &Path,
    current: &BTreeMap<String, MapLayout>,
) -> Result<Inspection, BpfError> {
    let dir = pins::maps_dir(pin_dir);
    let names = list(&dir)?;
    let mut found = Vec::new();
    for name in names {
        let path = dir.join(&name);
        // Only the pins of a name this release knows are opened.
        let layout = match expected(&name, current) {
            Some(_) => Some(read_layout(&path)?),
            None => None,
        };
        found.push((name, layout));
    }
    // The mark is read only when it is one (a wrong layout is judged below).
    let mark_layout = current.get(MARK_MAP);
    let mark = match found
        .iter()
        .any(|(n, l)| n == MARK_MAP && l.as_ref() == mark_layout)
    {
        true => Some(read_mark(&dir.join(MARK_MAP))?),
        false => None,
    };
    judge(pin_dir, &found, current, mark)
}

/// What a pin named `name` must be: this release's layout, or an older
/// generation's (then the entry).
fn expected(
    name: &str,
    current: &BTreeMap<String, MapLayout>,
) -> Option<(MapLayout, Option<&'static str>)> {
    if let Some(layout) = current.get(name) {
        return Some((*layout, None));
    }
    let entry = layouts::pinned_layout(name)?;
    let retired = !entry.pinned_by(GENERATION);
    Some((entry.layout, retired.then_some(entry.name)))
}

/// The judgement of [`inspect`] on what was read: each pin's name and, for
/// the names this release knows, its layout. The mark is checked first (a
/// newer generation's pins are judged by it, not by their names).
pub(super) fn judge(
    pin_dir: &Path,
    found: &[(String, Option<MapLayout>)],
    current: &BTreeMap<String, MapLayout>,
    mark: Option<PinsMark>,
) -> Result<Inspection, BpfError> {
    if let Some(mark) = mark
        && mark.oldest_reader > GENERATION
    {
        return Err(BpfError::PinsTooNew {
            pin_dir: pin_dir.to_owned(),
            generation: mark.generation,
            oldest_reader: mark.oldest_reader,
        });
    }
    let mut inspection = Inspection {
        mark,
        ..Inspection::default()
    };
    let mut conflicts = Vec::new();
    for (name, layout) in found {
        let (Some((want, retired)), Some(have)) = (expected(name, current), layout) else {
            inspection.unknown.push(name.clone());
            continue;
        };
        let path = pins::maps_dir(pin_dir).join(name);
        if *have != want {
            conflicts.push(BpfError::PinLayout {
                pin: path,
                found: *have,
                expected: want,
                retired: retired.is_some(),
            });
        } else if let Some(name) = retired {
            inspection.retired.push(RetiredPin { name, path });
        }
    }
    if conflicts.len() == 1
        && let Some(conflict) = conflicts.pop()
    {
        return Err(conflict);
    }
    BpfError::collect("inspect pins", pin_dir.display().to_string(), conflicts)?;
    Ok(inspection)
}

/// The names of the pins in `dir` (not directories), sorted.
fn list(dir: &Path) -> Result<Vec<String>, BpfError> {
    let io_error = |source| BpfError::PinDir {
        dir: dir.to_owned(),
        source,
    };
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_error(e)),
    };
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(io_error)?;
        if entry.file_type().map_err(io_error)?.is_dir() {
            continue;
        }
        if let Some(name) = entry.file_name().to_str() {
            names.push(name.to_owned());
        }
    }
    names.sort();
    Ok(names)
}

fn pin_error(call: &'static str, path: &Path) -> impl FnOnce(aya::maps::MapError) -> BpfError {
    let path = path.to_owned();
    move |source| BpfError::Pin {
        call,
        path,
        source: Box::new(source),
    }
}

/// The kernel's account of the map pinned at `path`.
pub(super) fn read_layout(path: &Path) -> Result<MapLayout, BpfError> {
    let data = MapData::from_pin(path).map_err(pin_error("open pin", path))?;
    let info = data.info().map_err(pin_error("map info", path))?;
    Ok(MapLayout {
        // A type aya does not know is none of Sarena's.
        map_type: info.map_type().map_or(u32::MAX, |t| t as u32),
        key_size: info.key_size(),
        value_size: info.value_size(),
        max_entries: info.max_entries(),
        flags: info.map_flags(),
    })
}

/// The mark pinned at `path` (its layout already checked).
fn read_mark(path: &Path) -> Result<PinsMark, BpfError> {
    let data = MapData::from_pin(path).map_err(pin_error("open pin", path))?;
    let mark: Array<MapData, PinsMark> =
        Array::try_from(Map::Array(data)).map_err(pin_error("open mark", path))?;
    mark.get(&0, 0).map_err(pin_error("read mark", path))
}

#[cfg(test)]
#[path = "inspect_tests.rs"]
mod tests;
