//! Preconditions of the privileged tests.
//!
//! A privileged test carries `#[ignore = "privileged: ..."]`: a plain `cargo
//! test` reports it as ignored, never as passed. It runs when asked for
//! (`cargo test -- --include-ignored` as root; scripts/test.sh does that),
//! and then a missing precondition fails it here with a message naming the
//! fix, under `CI=true` and everywhere else: a privileged test never passes
//! without having run.

use std::path::{Path, PathBuf};

/// Fails `test` unless the process runs as root.
pub fn require_root(test: &str) {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    require(test, euid == 0, "needs root");
}

/// Fails `test` with `missing` unless `met`.
pub fn require(test: &str, met: bool, missing: &str) {
    if met {
        return;
    }
    let ci = if std::env::var("CI").as_deref() == Ok("true") {
        " (CI=true: a privileged test that cannot run is a failure)"
    } else {
        ""
    };
    panic!(
        "{test}: {missing}{ci}. Privileged tests are #[ignore]d; run them as root \
         with `cargo test -- --include-ignored` (as scripts/test.sh does)"
    );
}

/// The eBPF object the daemon embeds: `SARENA_EBPF_OBJECT` (scripts/test.sh
/// exports it from sarena-daemon's build output; a relative path is taken
/// from the workspace root) or, without it, the newest
/// `<target>/<profile>/build/sarena-daemon-*/out/sarena-ebpf`. Fails `test`
/// when there is none, or it is empty (built without the eBPF toolchain).
pub fn require_ebpf_object(test: &str) -> Vec<u8> {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let path = std::env::var_os("SARENA_EBPF_OBJECT")
        .map(|p| workspace.join(p))
        .or_else(newest_daemon_object);
    let read = path.as_ref().map(std::fs::read);
    let missing = match (&path, &read) {
        (_, Some(Ok(bytes))) if !bytes.is_empty() => None,
        (Some(p), Some(Ok(_))) => Some(format!("the eBPF object {} is empty", p.display())),
        (Some(p), Some(Err(e))) => {
            Some(format!("cannot read the eBPF object {}: {e}", p.display()))
        }
        _ => Some("no eBPF object: SARENA_EBPF_OBJECT is unset and none was built".to_owned()),
    };
    if let Some(missing) = missing {
        require(
            test,
            false,
            &format!(
                "{missing}; build sarena-daemon with the eBPF toolchain (scripts/setup-ebpf.sh)"
            ),
        );
    }
    read.and_then(Result::ok).unwrap_or_default()
}

/// The newest non-empty object under the target directory this test binary
/// was built in (`<target>/<profile>/deps/<test>`).
fn newest_daemon_object() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let target = exe.ancestors().nth(3)?;
    newest_object_under(target)
}

fn newest_object_under(target: &Path) -> Option<PathBuf> {
    let mut found = Vec::new();
    for profile in std::fs::read_dir(target).ok()?.flatten() {
        let Ok(builds) = std::fs::read_dir(profile.path().join("build")) else {
            continue;
        };
        for build in builds.flatten() {
            if !build
                .file_name()
                .to_string_lossy()
                .starts_with("sarena-daemon-")
            {
                continue;
            }
            let object = build.path().join("out/sarena-ebpf");
            if let Ok(meta) = std::fs::metadata(&object)
                && meta.len() > 0
                && let Ok(modified) = meta.modified()
            {
                found.push((modified, object));
            }
        }
    }
    found.into_iter().max().map(|(_, p)| p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_precondition_fails_with_the_fix() {
        require("t", true, "never shown");
        let err =
            std::panic::catch_unwind(|| require("some_test", false, "needs root")).unwrap_err();
        let msg = err.downcast_ref::<String>().unwrap();
        assert!(msg.starts_with("some_test: needs root"), "{msg}");
        assert!(msg.contains("scripts/test.sh"), "{msg}");
    }

    #[test]
    fn the_newest_non_empty_object_wins() {
        let target = tempfile::tempdir().unwrap();
        let object = |profile: &str, build: &str, bytes: &[u8]| {
            let dir = target
                .path()
                .join(profile)
                .join("build")
                .join(build)
                .join("out");
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("sarena-ebpf"), bytes).unwrap();
            dir.join("sarena-ebpf")
        };
        assert_eq!(newest_object_under(target.path()), None);
        object("debug", "sarena-daemon-empty", b"");
        object("debug", "sarena-core-abc", b"not the daemon's");
        let old = object("debug", "sarena-daemon-old", b"old");
        assert_eq!(newest_object_under(target.path()), Some(old));
        std::thread::sleep(std::time::Duration::from_millis(20));
        let new = object("release", "sarena-daemon-new", b"new");
        assert_eq!(newest_object_under(target.path()), Some(new));
    }
}
