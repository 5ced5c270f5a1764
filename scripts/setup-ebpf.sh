#!/usr/bin/env bash
# Idempotent set-up of the eBPF toolchain: nightly's rust-src and a bpf-linker
# built against nightly's own libLLVM (so the linker and rustc agree on the
# LLVM version). Fast when already done. Called by scripts/setup.sh.
#
# Without it, the daemon still builds (AYA_BUILD_SKIP=1 or the build script
# notices the missing toolchain and embeds an empty object); only the eBPF
# dataplane mode is then unavailable.
set -euo pipefail

log() { printf '[setup-ebpf] %s\n' "$*" >&2; }

NIGHTLY="${SARENA_EBPF_TOOLCHAIN:-nightly}"
LLVM_FEATURE="${SARENA_BPF_LINKER_LLVM:-llvm-22}"

if ! command -v rustup >/dev/null 2>&1; then
  log "rustup not found: install Rust via rustup first"
  exit 1
fi

if ! rustup run "$NIGHTLY" rustc --version >/dev/null 2>&1; then
  log "installing the $NIGHTLY toolchain"
  rustup toolchain install "$NIGHTLY" --profile minimal
fi

sysroot="$(rustc +"$NIGHTLY" --print sysroot)"
if [ ! -d "$sysroot/lib/rustlib/src/rust/library" ]; then
  log "adding rust-src to $NIGHTLY"
  rustup component add rust-src --toolchain "$NIGHTLY"
fi

# bpf-linker, linked against the very libLLVM nightly ships.
llvm_lib="$(compgen -G "$sysroot/lib/libLLVM.so.*-rust-*" | head -n1 || true)"
if [ -z "$llvm_lib" ]; then
  log "no libLLVM in $sysroot/lib (is llvm-tools part of this nightly?)"
  exit 1
fi
stamp="${CARGO_HOME:-$HOME/.cargo}/.sarena-bpf-linker-llvm"
if rustup run "$NIGHTLY" bpf-linker --version >/dev/null 2>&1 \
  && [ "$(cat "$stamp" 2>/dev/null)" = "$llvm_lib" ]; then
  log "bpf-linker already built against $(basename "$llvm_lib")"
  exit 0
fi

prefix="${CARGO_HOME:-$HOME/.cargo}/sarena-llvm-prefix"
mkdir -p "$prefix/lib"
ln -sf "$llvm_lib" "$prefix/lib/libLLVM.so"
log "building bpf-linker against $(basename "$llvm_lib") (about a minute)"
# The rpath lets bpf-linker find libLLVM outside `rustup run` too.
RUSTFLAGS="-C link-arg=-Wl,-rpath,$sysroot/lib" LLVM_PREFIX="$prefix" cargo install bpf-linker --locked --force \
  --no-default-features --features "$LLVM_FEATURE"
printf '%s' "$llvm_lib" > "$stamp"
log "done"
