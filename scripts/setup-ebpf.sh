#!/usr/bin/env bash
# Idempotent set-up of the eBPF toolchain: the pinned nightly (the channel of
# sarena-ebpf/sarena-ebpf-programs/rust-toolchain.toml) with rust-src, and
# bpf-linker BPF_LINKER_VERSION built against that nightly's own libLLVM (so
# the linker and rustc agree on the LLVM version). Fast when already done.
# Called by scripts/setup.sh and deploy/Dockerfile.
#
# Moving to another nightly or bpf-linker: change the channel in that file,
# or BPF_LINKER_VERSION below, and run this script again.
#
# Without it, the daemon still builds (AYA_BUILD_SKIP=1 or the build script
# notices the missing toolchain and embeds an empty object); only the eBPF
# dataplane mode is then unavailable.
set -euo pipefail

log() { printf '[setup-ebpf] %s\n' "$*" >&2; }

# bpf-linker's version: the one pin of the linker.
BPF_LINKER_VERSION=0.13.0
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
toolchain_file="$root/sarena-ebpf/sarena-ebpf-programs/rust-toolchain.toml"
NIGHTLY="$(sed -n 's/^channel *= *"\(.*\)"/\1/p' "$toolchain_file")"
if [ -z "$NIGHTLY" ]; then
  log "no channel in $toolchain_file"
  exit 1
fi
LLVM_FEATURE="${SARENA_BPF_LINKER_LLVM:-llvm-22}"

if ! command -v rustup >/dev/null 2>&1; then
  log "rustup not found: install Rust via rustup first"
  exit 1
fi

if ! rustup run "$NIGHTLY" rustc --version >/dev/null 2>&1; then
  log "installing the $NIGHTLY toolchain"
  rustup toolchain install "$NIGHTLY" --profile minimal
fi
# the components the toolchain file names (rust-src for build-std; rustfmt
# and clippy for scripts/test.sh); a no-op when present
rustup component add rust-src rustfmt clippy --toolchain "$NIGHTLY"

sysroot="$(rustc +"$NIGHTLY" --print sysroot)"

# bpf-linker, linked against the very libLLVM nightly ships.
llvm_lib="$(compgen -G "$sysroot/lib/libLLVM.so.*-rust-*" | head -n1 || true)"
if [ -z "$llvm_lib" ]; then
  log "no libLLVM in $sysroot/lib (is llvm-tools part of this nightly?)"
  exit 1
fi
stamp="${CARGO_HOME:-$HOME/.cargo}/.sarena-bpf-linker-llvm"
want="$BPF_LINKER_VERSION $llvm_lib"
if rustup run "$NIGHTLY" bpf-linker --version >/dev/null 2>&1 \
  && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  log "bpf-linker $BPF_LINKER_VERSION already built against $(basename "$llvm_lib") of $NIGHTLY"
  exit 0
fi

prefix="${CARGO_HOME:-$HOME/.cargo}/sarena-llvm-prefix"
mkdir -p "$prefix/lib"
ln -sf "$llvm_lib" "$prefix/lib/libLLVM.so"
log "building bpf-linker $BPF_LINKER_VERSION against $(basename "$llvm_lib") of $NIGHTLY (about a minute)"
# The rpath lets bpf-linker find libLLVM outside `rustup run` too.
RUSTFLAGS="-C link-arg=-Wl,-rpath,$sysroot/lib" LLVM_PREFIX="$prefix" cargo install bpf-linker --version "=$BPF_LINKER_VERSION" --locked --force \
  --no-default-features --features "$LLVM_FEATURE"
printf '%s' "$want" > "$stamp"
log "done"
