//! The workspace's binaries (`sarena-daemon`, `sarena-cni`) as built for
//! the running test.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

/// `<target>/<profile>/<name>`, the binary of the workspace package `name`
/// built with the same profile as the running test binary
/// (`<target>/<profile>/deps/<test>`). A package's own integration tests
/// always find it (cargo builds it for them); for another package's tests it
/// is built with `cargo build -p <name>` when missing.
pub fn workspace_binary(name: &str) -> PathBuf {
    package_binary(name, name)
}

/// [`workspace_binary`] for a binary `name` of the workspace package
/// `package` (e.g. `sarena` of `sarena-cli`).
pub fn package_binary(package: &str, name: &str) -> PathBuf {
    static BUILD: Mutex<()> = Mutex::new(());
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .unwrap_or_else(|| panic!("odd test binary path {}", exe.display()));
    let binary = profile_dir.join(name);
    let _one_build_at_a_time = BUILD.lock().unwrap_or_else(|e| e.into_inner());
    if binary.is_file() {
        return binary;
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args(["build", "-p", package, "--bin", name, "--target-dir"])
        .arg(profile_dir.parent().unwrap())
        .current_dir(env!("CARGO_MANIFEST_DIR"));
    match profile_dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") => {}
        Some(profile) => {
            cmd.args(["--profile", profile]);
        }
        None => panic!("odd test binary path {}", exe.display()),
    }
    let status = cmd.status().unwrap();
    assert!(
        status.success() && binary.is_file(),
        "cargo build -p {package} did not leave {}",
        binary.display()
    );
    binary
}
