//! The uninstall's file steps: the conflist, the plugin and its log, the
//! set-aside configs, the run and state directories. Everything here
//! blocks (file I/O).

use std::fs;
use std::io::ErrorKind;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::{Line, StepError};
use crate::durable;
use crate::install::{InstallError, Installer, PLUGIN_NAME};

pub(super) use crate::host_ledger::LEDGER_FILE;

fn install_error(e: InstallError) -> StepError {
    match e {
        InstallError::NotSarenas { path, reason } => StepError::NotSarenas { path, reason },
        InstallError::Io { call, path, source } => StepError::Io { call, path, source },
        e => StepError::call("installer")(Box::new(e)),
    }
}

/// The temporary files [`durable::replace`] left for `name` in `dir`.
fn temps_of(dir: &Path, name: &str) -> Result<Vec<PathBuf>, StepError> {
    let read = match fs::read_dir(dir) {
        Ok(read) => read,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(StepError::io("read dir", dir, e)),
    };
    let mut temps = Vec::new();
    for entry in read {
        let entry = entry.map_err(|e| StepError::io("read dir", dir, e))?;
        if durable::is_temp_of(&entry.file_name().to_string_lossy(), Some(name)) {
            temps.push(entry.path());
        }
    }
    temps.sort();
    Ok(temps)
}

/// Removes the file at `path` if it is there (or, in a dry run, says it
/// would); its line, if it was there.
fn remove_file(path: &Path, what: &str, dry_run: bool) -> Result<Option<Line>, StepError> {
    match fs::symlink_metadata(path) {
        Ok(_) => {}
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(StepError::io("stat", path, e)),
    }
    if !dry_run {
        match fs::remove_file(path) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(StepError::io("remove", path, e)),
        }
    }
    Ok(Some(Line::removed(
        format!("{what} {}", path.display()),
        dry_run,
    )))
}

/// The plugin's `log-file` in a conflist that calls `sarena-cni`.
pub(super) fn log_file_of(conflist: &[u8]) -> Option<PathBuf> {
    let value: serde_json::Value = serde_json::from_slice(conflist).ok()?;
    value
        .get("plugins")?
        .as_array()?
        .iter()
        .filter(|p| p.get("type").and_then(|t| t.as_str()) == Some(PLUGIN_NAME))
        .find_map(|p| p.get("log-file")?.as_str().map(PathBuf::from))
}

/// Step [`super::Step::Conflist`]: Sarena's conflist (refused when the
/// file of that name is another network's) and its temporary files; also
/// the plugin's log file the conflist names, for the plugin step.
///
/// The log file's path is noted in `run_dir` ([`PLUGIN_LOG_NOTE`]) before
/// the conflist goes, so that a run killed in between still finds it; the
/// note is read back by [`noted_plugin_log`] and goes with the run dir.
pub(super) fn conflist(
    installer: &Installer,
    run_dir: &Path,
    dry_run: bool,
) -> Result<(Vec<Line>, Option<PathBuf>), StepError> {
    let path = installer.conflist_path();
    let body = installer.read_conflist().map_err(install_error)?;
    let log_file = body.as_deref().and_then(log_file_of);
    if !dry_run
        && let Some(log) = &log_file
        && dir_exists(run_dir)?
    {
        durable::replace(
            run_dir,
            PLUGIN_LOG_NOTE,
            log.as_os_str().as_encoded_bytes(),
            0o600,
        )
        .map_err(|e| StepError::Io {
            call: e.call,
            path: e.path,
            source: e.source,
        })?;
    }
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut lines = Vec::new();
    if body.is_some() {
        lines.push(Line::removed(
            format!("conflist {}", path.display()),
            dry_run,
        ));
    }
    for temp in temps_of(installer.conf_dir(), &name)? {
        lines.push(Line::removed(
            format!("temporary file {}", temp.display()),
            dry_run,
        ));
    }
    if !dry_run {
        installer.remove_conflist().map_err(install_error)?;
    }
    Ok((lines, log_file))
}

/// The file in the run dir noting the plugin's log file (see
/// [`conflist`]).
pub(super) const PLUGIN_LOG_NOTE: &str = "plugin-log-path";

/// The plugin's log file noted in `run_dir` by an earlier [`conflist`],
/// if any.
pub(super) fn noted_plugin_log(run_dir: &Path) -> Option<PathBuf> {
    let text = fs::read(run_dir.join(PLUGIN_LOG_NOTE)).ok()?;
    let path = PathBuf::from(String::from_utf8(text).ok()?);
    path.is_absolute().then_some(path)
}

/// Step [`super::Step::Plugin`]: `BIN/sarena-cni`, its temporary files, and
/// the plugin's log file and its rotation (`.1`) when `log_file` is known.
pub(super) fn plugin(
    bin_dir: &Path,
    log_file: Option<&Path>,
    dry_run: bool,
) -> Result<Vec<Line>, StepError> {
    let mut lines = Vec::new();
    lines.extend(remove_file(&bin_dir.join(PLUGIN_NAME), "plugin", dry_run)?);
    for temp in temps_of(bin_dir, PLUGIN_NAME)? {
        lines.extend(remove_file(&temp, "temporary file", dry_run)?);
    }
    if let Some(log) = log_file {
        lines.extend(remove_file(log, "plugin log", dry_run)?);
        let rotated = PathBuf::from(format!("{}.1", log.display()));
        lines.extend(remove_file(&rotated, "plugin log", dry_run)?);
    }
    Ok(lines)
}

/// Step [`super::Step::SetAside`]: other networks' configs put back under
/// their names; one whose name is taken again is left.
pub(super) fn set_aside(installer: &Installer, dry_run: bool) -> Result<Vec<Line>, StepError> {
    let found = installer.set_aside_configs().map_err(install_error)?;
    let mut lines = Vec::new();
    for (path, free) in &found {
        let object = format!("set-aside config {}", path.display());
        if !free {
            lines.push(Line::left(
                object,
                "a config of its original name is there now",
            ));
        } else if dry_run {
            lines.push(Line::restored(object, true));
        }
    }
    if !dry_run {
        for restored in installer.restore_set_aside().map_err(install_error)? {
            lines.push(Line::restored(
                format!("set-aside config {}", restored.display()),
                false,
            ));
        }
    }
    Ok(lines)
}

/// Whether `dir` is a mount point: another device than its parent's.
fn is_mount_point(dir: &Path) -> Result<bool, StepError> {
    let meta = fs::metadata(dir).map_err(|e| StepError::io("stat", dir, e))?;
    let parent = dir.parent().unwrap_or(Path::new("/"));
    let parent_meta = fs::metadata(parent).map_err(|e| StepError::io("stat", parent, e))?;
    Ok(meta.dev() != parent_meta.dev() || meta.ino() == parent_meta.ino())
}

/// Removes `dir` once empty; a mount point (or a directory rmdir finds
/// busy) stays, empty, with a "kept" line.
fn remove_empty_dir(dir: &Path, what: &str, dry_run: bool) -> Result<Option<Line>, StepError> {
    let kept = || {
        Line::kept(
            format!("{what} {}", dir.display()),
            "a mount point here (empty)",
        )
    };
    if is_mount_point(dir)? {
        return Ok(Some(kept()));
    }
    if !dry_run {
        match fs::remove_dir(dir) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => return Ok(Some(kept())),
            Err(e) => return Err(StepError::io("rmdir", dir, e)),
        }
    }
    Ok(Some(Line::removed(
        format!("{what} {}", dir.display()),
        dry_run,
    )))
}

/// Whether `dir` exists (as a directory).
fn dir_exists(dir: &Path) -> Result<bool, StepError> {
    match fs::symlink_metadata(dir) {
        Ok(meta) => Ok(meta.is_dir()),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(false),
        Err(e) => Err(StepError::io("stat", dir, e)),
    }
}

/// The entries of `dir`, sorted.
fn entries(dir: &Path) -> Result<Vec<PathBuf>, StepError> {
    durable::list(dir).map_err(|e| StepError::Io {
        call: e.call,
        path: e.path,
        source: e.source,
    })
}

/// Step [`super::Step::RunDir`]: the socket's directory. Sarena's entries
/// (the socket, the server's transient `.NAME.bind-*` directories, the
/// host-changes ledger and its temporary files) go; then the directory,
/// unless it holds something else or is a mount point (kept, either
/// way).
pub(super) fn run_dir(socket: &Path, dry_run: bool) -> Result<Vec<Line>, StepError> {
    let Some(dir) = socket.parent().filter(|d| !d.as_os_str().is_empty()) else {
        return Ok(Vec::new());
    };
    check_plain_absolute(dir)?;
    if !dir_exists(dir)? {
        return Ok(Vec::new());
    }
    let socket_name = socket
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let bind_prefix = format!(".{socket_name}.bind-");
    let mut lines = Vec::new();
    let mut foreign = Vec::new();
    for path in entries(dir)? {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if name == socket_name {
            lines.extend(remove_file(&path, "socket", dry_run)?);
        } else if name == LEDGER_FILE || durable::is_temp_of(&name, Some(LEDGER_FILE)) {
            lines.extend(remove_file(&path, "host-changes ledger", dry_run)?);
        } else if name == PLUGIN_LOG_NOTE || durable::is_temp_of(&name, Some(PLUGIN_LOG_NOTE)) {
            lines.extend(remove_file(&path, "plugin log note", dry_run)?);
        } else if name.starts_with(&bind_prefix) {
            if !dry_run {
                fs::remove_dir_all(&path).map_err(|e| StepError::io("remove", &path, e))?;
            }
            lines.push(Line::removed(
                format!("socket bind dir {}", path.display()),
                dry_run,
            ));
        } else {
            foreign.push(name);
        }
    }
    // Not Sarena's directory after all with foreign files (a --socket in a
    // shared dir).
    close_dir(dir, "run dir", &foreign, lines, dry_run)
}

/// Ends a directory step once Sarena's entries are handled (`lines`): a
/// directory holding `foreign` entries is kept with a line naming them, an
/// empty mount point with nothing of Sarena's is left silently, anything
/// else is removed once empty.
fn close_dir(
    dir: &Path,
    what: &str,
    foreign: &[String],
    mut lines: Vec<Line>,
    dry_run: bool,
) -> Result<Vec<Line>, StepError> {
    if !foreign.is_empty() {
        lines.push(Line::kept(
            format!("{what} {}", dir.display()),
            format!("holds files not Sarena's: {}", foreign.join(", ")),
        ));
        return Ok(lines);
    }
    if lines.is_empty() && is_mount_point(dir)? {
        return Ok(lines); // an empty mount point: nothing of Sarena's
    }
    lines.extend(remove_empty_dir(dir, what, dry_run)?);
    Ok(lines)
}

/// The entries of the state directory that are Sarena's: the registry,
/// the daemon's lock, the Kubernetes session, the default API token and
/// deletion queue (plus [`durable`]'s temporary files of any of them).
const STATE_ENTRIES: [&str; 5] = [
    crate::store::STATE_FILE,
    crate::store::LOCK_FILE,
    crate::cluster::SESSION_FILE,
    crate::store::API_TOKEN_FILE,
    crate::store::DELETE_QUEUE_DIR,
];

/// Step [`super::Step::StateDir`]: Sarena's entries of the state
/// directory (registry, lock, session, token, deletion queue), then the
/// directory once empty; one holding anything else is kept with a line
/// naming it, and a mount point is emptied of Sarena's entries and kept.
pub(super) fn state_dir(dir: &Path, dry_run: bool) -> Result<Vec<Line>, StepError> {
    check_plain_absolute(dir)?;
    if !dir_exists(dir)? {
        return Ok(Vec::new());
    }
    let mut lines = Vec::new();
    let mut foreign = Vec::new();
    let mut ours = 0;
    for path in entries(dir)? {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if STATE_ENTRIES.contains(&name.as_str()) || durable::is_temp_of(&name, None) {
            if !dry_run {
                remove_any(&path)?;
            }
            ours += 1;
        } else {
            foreign.push(name);
        }
    }
    if ours > 0 {
        lines.push(Line::removed(
            format!("contents of state dir {} ({ours} entries)", dir.display()),
            dry_run,
        ));
    }
    close_dir(dir, "state dir", &foreign, lines, dry_run)
}

/// Refuses a directory to remove that is relative, `/`, or has `.` or
/// `..` in it: what it names must be what it says.
fn check_plain_absolute(dir: &Path) -> Result<(), StepError> {
    if crate::dataplane::ebpf::teardown::is_plain_absolute(dir) {
        Ok(())
    } else {
        Err(StepError::NotSarenas {
            path: dir.to_owned(),
            reason: "not an absolute path without . or .. (refused)".to_owned(),
        })
    }
}

/// Removes a file or a directory tree.
fn remove_any(path: &Path) -> Result<(), StepError> {
    let meta = fs::symlink_metadata(path).map_err(|e| StepError::io("stat", path, e))?;
    let removed = if meta.is_dir() {
        fs::remove_dir_all(path)
    } else {
        fs::remove_file(path)
    };
    match removed {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
        Err(e) => Err(StepError::io("remove", path, e)),
    }
}
