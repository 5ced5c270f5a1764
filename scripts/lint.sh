#!/usr/bin/env bash
# The lints: formatting, clippy (warnings are errors), rustdoc, and the
# crates' packaging. scripts/test.sh runs `fmt` first and `compiled` in the
# background during the end-to-end tests.
# Usage: scripts/lint.sh [fmt|compiled|all]   (default all)
#   fmt       cargo fmt --check (the workspace, the eBPF programs): seconds
#   compiled  clippy (every target; the daemon's fault-injection feature;
#             the eBPF programs for the bpf target), cargo doc, cargo package
#             (verified): ~10 minutes on two cores from nothing
# Environment: SARENA_LINT_TIMES=FILE  append "step  N s" lines to FILE.
# Under CI=true the crates are packaged as committed (no --allow-dirty).
set -euo pipefail
cd "$(dirname "$0")/.."

WHAT=${1:-all}
case $WHAT in
  fmt | compiled | all) ;;
  -h | --help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//' && exit 0 ;;
  *) echo "usage: scripts/lint.sh [fmt|compiled|all]" >&2 && exit 2 ;;
esac

# step NAME CMD...: runs CMD, its time appended to SARENA_LINT_TIMES. (CMD
# runs where `set -e` does not apply: the functions below chain with &&.)
step() {
  local name=$1 started=$SECONDS rc=0
  shift
  echo "== lint: $name"
  "$@" || rc=$?
  if [ -n "${SARENA_LINT_TIMES:-}" ]; then
    printf '%-56s %6d s\n' "$name$([ "$rc" = 0 ] || echo " (failed)")" $((SECONDS - started)) >>"$SARENA_LINT_TIMES"
  fi
  return "$rc"
}

fmt_check() {
  cargo fmt --all -- --check &&
    # here the directory's rust-toolchain.toml picks the pinned nightly
    (cd sarena-ebpf/sarena-ebpf-programs && cargo fmt -- --check)
}

clippy() {
  cargo clippy --workspace --all-targets -- -D warnings &&
    # The test-only fault injection (e2e/test-upgrade.sh builds the daemon with it).
    cargo clippy -p sarena-daemon --features fault-injection -- -D warnings
}

ebpf_clippy() (
  cd sarena-ebpf/sarena-ebpf-programs &&
    cargo clippy --release --target bpfel-unknown-none -Z build-std=core \
      --target-dir ../../target/ebpf-clippy -- -D warnings
)

# forget_verified NAME VERSION: drops what an earlier verification left of
# NAME-VERSION as a registry crate: its unpacked sources (cargo unpacks a
# name-version once per registry, and the temporary registry's id is its
# path, the same on every run of a checkout) and its builds in target/debug
# (fingerprinted by the unpacked files' mtimes, which the .crate fixes). Left
# there, the next verification builds the dependents against the old code
# (seen: "could not find `events` in `sarena_common`" on a CI machine).
forget_verified() {
  local name=$1 version=$2 dir hash
  for dir in "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/"$name-$version"; do
    case $dir in
      */index.crates.io-*/*) ;; # never ours: ours are not on crates.io
      *) [ ! -e "$dir" ] || rm -rf "$dir" ;;
    esac
  done
  for dir in target/debug/deps/"${name//-/_}"-*.d; do
    if ! [ -e "$dir" ] || ! grep -q '/registry/src/' "$dir"; then continue; fi
    hash=${dir##*-}
    rm -rf "target/debug/.fingerprint/$name-${hash%.d}"
  done
}

# Every crate to be published (`publish` not false) packages, and each
# .crate builds on its own (cargo verifies them against each other through a
# temporary local registry). The packaged sarena-daemon has no
# ../sarena-ebpf: it must build on stable with no eBPF object
# (SARENA_EBPF_REQUIRED unset here) and say so. The packaged crates do not
# carry the workspace's [profile.dev]: it is given again so the verification
# reuses target/debug's dependencies (keep in step with Cargo.toml). ~3
# minutes on two cores, most of it sarena-core compiled once per dependent.
package() {
  local crates crate published=() dirty=(--allow-dirty)
  # A clean clone (CI) packages as committed; elsewhere, the work tree as it is.
  if [ "${CI:-}" = "true" ]; then dirty=(); fi
  mapfile -t crates < <(cargo metadata --no-deps --format-version 1 |
    jq -r '.packages[] | select(.publish != []) | "\(.name) \(.version)"')
  [ "${#crates[@]}" -gt 0 ] || return 1
  for crate in "${crates[@]}"; do
    # "name version"
    forget_verified "${crate%% *}" "${crate#* }"
    published+=("--package=${crate%% *}")
  done
  mkdir -p target
  # (pipefail: the status is cargo's)
  env -u SARENA_EBPF_REQUIRED cargo package "${published[@]}" "${dirty[@]}" \
    --config 'profile.dev.debug="line-tables-only"' \
    --config 'profile.dev.package."*".debug=false' 2>&1 | tee target/package.log || return 1
  grep -q "no eBPF programs' sources at .*(a packaged sarena-daemon)" target/package.log || {
    echo "error: the packaged sarena-daemon's build script did not report its missing eBPF sources" >&2
    return 1
  }
}

if [ "$WHAT" != compiled ]; then
  step "cargo fmt --check" fmt_check
fi
if [ "$WHAT" != fmt ]; then
  step "cargo clippy (all targets; fault-injection)" clippy
  step "cargo doc (rustdoc warnings are errors)" env RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps
  step "crates package (cargo package, verified)" package
  step "eBPF programs: clippy (pinned nightly, bpf target)" ebpf_clippy
fi
