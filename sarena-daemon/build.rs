//! Builds the eBPF programs (`sarena-ebpf/sarena-ebpf-programs`) with the
//! pinned nightly and leaves the object at `$OUT_DIR/sarena-ebpf`, which
//! `src/ebpf_object.rs` embeds.
//!
//! The eBPF build needs the nightly pinned in
//! `sarena-ebpf/sarena-ebpf-programs/rust-toolchain.toml`, with rust-src,
//! and bpf-linker (`scripts/setup-ebpf.sh` sets up both). Without them, or with `AYA_BUILD_SKIP=1`, an
//! empty object is embedded and the daemon still builds; only the `ebpf`
//! dataplane mode then fails, at start-up, with a clear error. The same
//! holds without the programs' sources: the crate as packaged (`cargo
//! package`, crates.io) has no `../sarena-ebpf`. Set
//! `SARENA_EBPF_REQUIRED=1` to make a missing toolchain or missing sources
//! a build error.
//!
//! Why the object is empty reaches the daemon as `SARENA_EBPF_MISSING`
//! (`src/ebpf_object.rs`), for its start-up error.
use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

const OBJECT_NAME: &str = "sarena-ebpf";
const PROGRAMS_PACKAGE: &str = "sarena-ebpf-programs";
/// The programs' toolchain file, holding the one pin of the nightly.
const TOOLCHAIN_FILE: &str = "rust-toolchain.toml";

fn main() {
    println!("cargo:rerun-if-env-changed=AYA_BUILD_SKIP");
    println!("cargo:rerun-if-env-changed=SARENA_EBPF_REQUIRED");
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").unwrap_or_default());
    let manifest_dir = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let ebpf_dir = manifest_dir.join("..").join("sarena-ebpf");
    let programs = ebpf_dir.join(PROGRAMS_PACKAGE);
    let object = out_dir.join(OBJECT_NAME);
    let skip = env::var("AYA_BUILD_SKIP").is_ok_and(|v| v == "1" || v.eq_ignore_ascii_case("true"));
    let required = env::var("SARENA_EBPF_REQUIRED").is_ok_and(|v| v == "1");

    // The packaged crate: no programs to build, whatever the toolchain.
    if !programs.join("Cargo.toml").is_file() {
        println!("cargo:rerun-if-changed=build.rs");
        let missing = format!("no eBPF programs' sources at {}", programs.display());
        if required && !skip {
            fail(&format!(
                "{missing}; the eBPF object is built from the Sarena repository's \
                 sarena-ebpf directory (not in the packaged crate)"
            ));
        }
        println!(
            "cargo:warning={missing} (a packaged sarena-daemon): embedding no eBPF object; \
             the ebpf dataplane mode needs a daemon built from the Sarena repository"
        );
        embed_none(
            &object,
            "it was built without the eBPF programs' sources (the packaged crate, \
             e.g. from crates.io, has none)",
        );
        return;
    }
    println!(
        "cargo:rerun-if-changed={}",
        ebpf_dir.join("sarena-common").display()
    );
    println!("cargo:rerun-if-changed={}", programs.display());
    let toolchain_file = programs.join(TOOLCHAIN_FILE);
    println!("cargo:rerun-if-changed={}", toolchain_file.display());

    if skip {
        println!(
            "cargo:warning=AYA_BUILD_SKIP set: embedding no eBPF object (ebpf mode unavailable)"
        );
        embed_none(&object, "it was built with AYA_BUILD_SKIP=1");
        return;
    }
    let channel = match pinned_channel(&toolchain_file) {
        Ok(channel) => channel,
        Err(e) => fail(&e),
    };
    if let Err(missing) = toolchain_present(&channel) {
        if required {
            fail(&format!(
                "eBPF toolchain missing ({missing}); run scripts/setup-ebpf.sh"
            ));
        }
        println!(
            "cargo:warning=eBPF toolchain missing ({missing}): embedding no eBPF object; \
             run scripts/setup-ebpf.sh for the ebpf dataplane mode"
        );
        embed_none(
            &object,
            &format!("it was built without the eBPF toolchain ({missing})"),
        );
        return;
    }

    // One build of the programs per target dir, not per build-script run:
    // dev, check, doc, test and every feature set each run this script with
    // an OUT_DIR of their own, and a target dir under OUT_DIR (aya-build's)
    // compiled `core` for bpf from scratch each time (~1 minute each, seven
    // times in a test run).
    let target_dir = ebpf_target_dir(&out_dir);
    if let Err(e) = build_programs(&programs, &channel, &target_dir, &object) {
        fail(&format!("building the eBPF programs failed: {e}"));
    }
    if !object.exists() {
        fail(&format!("the eBPF build produced no {}", object.display()));
    }
    println!("cargo:rustc-env=SARENA_EBPF_MISSING=");
}

/// The `channel` of the programs' `rust-toolchain.toml`.
fn pinned_channel(file: &Path) -> Result<String, String> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    text.lines()
        .filter_map(|line| line.trim().strip_prefix("channel"))
        .filter_map(|rest| rest.trim_start().strip_prefix('='))
        .map(|value| value.trim().trim_matches('"').to_owned())
        .find(|channel| !channel.is_empty())
        .ok_or_else(|| format!("no `channel = \"...\"` in {}", file.display()))
}

/// `Err(what)` when the pinned nightly, its rust-src or bpf-linker is missing.
fn toolchain_present(channel: &str) -> Result<(), String> {
    let ok = |cmd: &mut Command| cmd.output().is_ok_and(|o| o.status.success());
    // Through rustup, as build_programs runs it: bpf-linker links nightly's
    // libLLVM, which rustup puts on the library path.
    if !ok(Command::new("rustup").args(["run", channel, "bpf-linker", "--version"])) {
        return Err(format!(
            "bpf-linker not found or not runnable with {channel}"
        ));
    }
    let sysroot = Command::new("rustup")
        .args(["run", channel, "rustc", "--print", "sysroot"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()))
        .ok_or(format!("the toolchain {channel} is not installed"))?;
    if !sysroot.join("lib/rustlib/src/rust/library").is_dir() {
        return Err(format!("rust-src is missing from {channel}"));
    }
    Ok(())
}

/// Where the programs are built: `ebpf-programs` in the target dir holding
/// `out_dir`, so every profile and feature set of the daemon shares one
/// build. Cargo's layout puts `out_dir` at `TARGET/PROFILE/build/PKG-HASH/out`
/// (`TARGET/TRIPLE/PROFILE/...` when cross-compiling): TARGET is the parent
/// of the `build` directory's parent. `out_dir` itself for any other layout.
/// (Not cargo's `CACHEDIR.TAG`: cargo writes none into a target dir that
/// existed before its first build.)
fn ebpf_target_dir(out_dir: &Path) -> PathBuf {
    out_dir
        .ancestors()
        .find(|dir| dir.file_name().is_some_and(|name| name == "build"))
        .and_then(Path::parent)
        .and_then(Path::parent)
        .map_or_else(
            || out_dir.join("ebpf-programs"),
            |dir| dir.join("ebpf-programs"),
        )
}

/// Builds the programs crate for the bpf target of this host's endianness
/// with the pinned `channel` (`cargo build --release -Z build-std=core`, BTF
/// emitted by bpf-linker), in `target_dir`, and copies the object to
/// `object`. A lock in `target_dir` serializes concurrent build-script runs
/// (the build and the copy: cargo's own lock covers only the build).
fn build_programs(
    programs: &Path,
    channel: &str,
    target_dir: &Path,
    object: &Path,
) -> Result<(), String> {
    let endian = env::var("CARGO_CFG_TARGET_ENDIAN").unwrap_or_default();
    let target = match endian.as_str() {
        "little" => "bpfel-unknown-none",
        "big" => "bpfeb-unknown-none",
        other => return Err(format!("unsupported target endianness {other:?}")),
    };
    let arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    // aya-ebpf's helpers for the host's registers are chosen by this cfg.
    let arch = if arch.starts_with("riscv64") {
        "riscv64"
    } else {
        arch.as_str()
    };
    std::fs::create_dir_all(target_dir)
        .map_err(|e| format!("cannot create {}: {e}", target_dir.display()))?;
    let lock_path = target_dir.join(".sarena-build.lock");
    let lock = std::fs::File::create(&lock_path)
        .map_err(|e| format!("cannot open {}: {e}", lock_path.display()))?;
    lock.lock()
        .map_err(|e| format!("cannot lock {}: {e}", lock_path.display()))?;
    let flags = [
        format!("--cfg=bpf_target_arch=\"{arch}\""),
        "-Cdebuginfo=2".to_owned(),
        "-Clink-arg=--btf".to_owned(),
    ]
    .join("\x1f");
    // The programs crate is its own workspace (excluded from the root one):
    // built from its directory, with the pinned toolchain through rustup
    // (bpf-linker links that nightly's libLLVM, which rustup puts on the
    // library path), and none of the outer build's compiler overrides.
    let output = Command::new("rustup")
        .args(["run", channel, "cargo", "build", "--release", "--bins"])
        .args(["--package", PROGRAMS_PACKAGE, "--target", target])
        .args(["-Z", "build-std=core", "--target-dir"])
        .arg(target_dir)
        .current_dir(programs)
        .env("CARGO_ENCODED_RUSTFLAGS", flags)
        .env_remove("RUSTC")
        .env_remove("RUSTC_WORKSPACE_WRAPPER")
        .env_remove("RUSTFLAGS")
        .output()
        .map_err(|e| format!("cannot run rustup run {channel} cargo: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "cargo build in {} ({}):\n{}",
            programs.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let built = target_dir.join(target).join("release").join(OBJECT_NAME);
    std::fs::copy(&built, object).map_err(|e| {
        format!(
            "cannot copy {} to {}: {e}",
            built.display(),
            object.display()
        )
    })?;
    // (the lock is released when `lock` is dropped)
    Ok(())
}

/// Embeds an empty object, and `why` (a clause after "this daemon has no
/// eBPF object: ") for the daemon's start-up error.
fn embed_none(object: &Path, why: &str) {
    if let Err(e) = std::fs::write(object, []) {
        fail(&format!("cannot write {}: {e}", object.display()));
    }
    println!("cargo:rustc-env=SARENA_EBPF_MISSING={why}");
}

fn fail(message: &str) -> ! {
    eprintln!("error: {message}");
    std::process::exit(1);
}
