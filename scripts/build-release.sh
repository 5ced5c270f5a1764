#!/usr/bin/env bash
# Builds Sarena's release binaries as they ship, and gathers them in one
# directory (printed on stdout; what SARENA_BIN_DIR points at):
#   target/sarena-bin/  sarena-daemon, sarena (the CLI), sarena-test-dns
#                       (test infrastructure) from target/release, and the
#                       two plugins, sarena-cni and sarena-netavark,
#                       statically linked (static-pie) from target/<host>/release.
# The plugins are static because a runtime executes them once per container:
# being loaded as a dynamically linked program (mapping and initialising
# libc, libm and libgcc_s, tearing them down at exit) costs each run ~0.3 ms
# (scripts/plugin-ab.sh: STATUS 3.21 -> 2.93 ms, ADD 6.20 -> 5.84 ms), and a
# static one runs on any host the runtime copies it to, whatever its glibc.
# static-pie keeps ASLR. Cargo has no
# per-package rustflags, so the plugins are built for the explicit host
# target, where the flag reaches their crates and not the build scripts and
# proc macros; the daemon stays dynamic (static glibc cannot resolve names
# through NSS, and kube-rs resolves the API server's).
# Idempotent: a no-op when everything is up to date.
# Usage: scripts/build-release.sh   (CARGO_BUILD_ARGS: extra cargo arguments, e.g. --locked)
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
cd "$REPO"
read -r -a extra <<<"${CARGO_BUILD_ARGS:-}"

HOST=$(rustc -vV | sed -n 's/^host: //p')
[ -n "$HOST" ] || {
  echo "build-release.sh: cannot tell the host target from rustc -vV" >&2
  exit 1
}
cargo build --release "${extra[@]}" -p sarena-daemon -p sarena-cli -p sarena-test-dns >&2
# The target's own RUSTFLAGS variable: with --target, it reaches the target's
# crates only.
flags_var="CARGO_TARGET_$(tr 'a-z-' 'A-Z_' <<<"$HOST")_RUSTFLAGS"
env "$flags_var=-C target-feature=+crt-static" \
  cargo build --release "${extra[@]}" --target "$HOST" -p sarena-cni -p sarena-netavark >&2

BIN=$REPO/target/sarena-bin
mkdir -p "$BIN"
for b in sarena-daemon sarena sarena-test-dns; do
  ln -sfn "../release/$b" "$BIN/$b"
done
for b in sarena-cni sarena-netavark; do
  ln -sfn "../$HOST/release/$b" "$BIN/$b"
  if ldd "$BIN/$b" 2>/dev/null | grep -q '=>'; then
    echo "build-release.sh: $BIN/$b is not statically linked" >&2
    exit 1
  fi
done
echo "$BIN"
