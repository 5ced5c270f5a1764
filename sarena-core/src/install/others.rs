//! Other networks' configs in the conf dir: set aside on request (renamed
//! to `NAME.sarena-bak`, which libcni does not load) and put back at
//! uninstall.

use std::fs;
use std::path::{Path, PathBuf};

use super::atomic::{list, sync_dir};
use super::{InstallError, SET_ASIDE_SUFFIX, is_loadable};

/// Renames every network config of `conf_dir` but `ours`; returns the new paths.
pub(super) fn set_aside(conf_dir: &Path, ours: &str) -> Result<Vec<PathBuf>, InstallError> {
    let mut moved = Vec::new();
    for path in list(conf_dir)? {
        let Some(name) = path.file_name().and_then(|f| f.to_str()) else {
            continue;
        };
        if name == ours || !is_network_config(&path, name)? {
            continue;
        }
        let aside = conf_dir.join(format!("{name}{SET_ASIDE_SUFFIX}"));
        fs::rename(&path, &aside).map_err(|e| InstallError::io("rename", &path, e))?;
        moved.push(aside);
    }
    if !moved.is_empty() {
        sync_dir(conf_dir)?;
    }
    Ok(moved)
}

/// Puts back every set-aside config whose name is free again; returns the
/// restored paths.
pub(super) fn restore(conf_dir: &Path) -> Result<Vec<PathBuf>, InstallError> {
    let mut restored = Vec::new();
    let entries = match list(conf_dir) {
        Ok(entries) => entries,
        Err(InstallError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            return Ok(restored);
        }
        Err(e) => return Err(e),
    };
    for path in entries {
        let Some(original) = path
            .file_name()
            .and_then(|f| f.to_str())
            .and_then(|f| f.strip_suffix(SET_ASIDE_SUFFIX))
        else {
            continue;
        };
        let target = conf_dir.join(original);
        if fs::symlink_metadata(&target).is_ok() {
            continue; // never over a config that is there now
        }
        fs::rename(&path, &target).map_err(|e| InstallError::io("rename", &path, e))?;
        restored.push(target);
    }
    Ok(restored)
}

/// Every set-aside config of `conf_dir`, each with whether its original
/// name is free (so that [`restore`] would put it back).
pub(super) fn list_set_aside(conf_dir: &Path) -> Result<Vec<(PathBuf, bool)>, InstallError> {
    let entries = match list(conf_dir) {
        Ok(entries) => entries,
        Err(InstallError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Vec::new());
        }
        Err(e) => return Err(e),
    };
    Ok(entries
        .into_iter()
        .filter_map(|path| {
            let original = path
                .file_name()
                .and_then(|f| f.to_str())
                .and_then(|f| f.strip_suffix(SET_ASIDE_SUFFIX))?;
            let free = fs::symlink_metadata(conf_dir.join(original)).is_err();
            Some((path, free))
        })
        .collect())
}

/// A regular file (or a link to one) with an extension libcni loads.
fn is_network_config(path: &Path, name: &str) -> Result<bool, InstallError> {
    if !is_loadable(name) {
        return Ok(false);
    }
    match fs::metadata(path) {
        Ok(meta) => Ok(meta.is_file()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(InstallError::io("stat", path, e)),
    }
}
