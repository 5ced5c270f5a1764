#!/usr/bin/env bash
# Installs a real netavark (podman's network stack, which runs external
# plugins since 1.6) the way a user would: `cargo install` from the crate
# registry, with the Debian build dependency it needs (protoc). For
# e2e/test-netavark.sh; Debian bookworm's own netavark (1.4) predates
# plugins. Run as root; idempotent: a second run takes a second.
#
# Output ($SARENA_NETAVARK_CACHE, default /var/cache/sarena-netavark):
#   $VERSION/bin/netavark   (printed on stdout when done)
# Work files: target/ (cargo's build dir, kept so that a rebuild is quick).
# Environment: SARENA_NETAVARK_CACHE, SARENA_NETAVARK_VERSION (2.1.0),
# SARENA_NETAVARK_NICE (19).
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)

# shellcheck source=scripts/apt.sh
. "$REPO/scripts/apt.sh"

log() { printf '[setup-netavark] %s\n' "$*" >&2; }
[ "$(id -u)" = 0 ] || {
  log "ERROR: run as root (apt-get)"
  exit 1
}

VERSION=${SARENA_NETAVARK_VERSION:-2.1.0}
CACHE=${SARENA_NETAVARK_CACHE:-/var/cache/sarena-netavark}
mkdir -p "$CACHE"
CACHE=$(cd "$CACHE" && pwd)
BIN=$CACHE/$VERSION/bin/netavark

exec 9>"$CACHE/.lock"
# scripts/test.sh starts this in the background; the test runs it again to
# wait for that build (and to check the cache) instead of failing.
if ! flock -n 9; then
  log "waiting for another setup-netavark.sh (it holds $CACHE/.lock)"
  waited=$SECONDS
  flock 9
  log "waited $((SECONDS - waited)) s for the other setup-netavark.sh"
fi

if [ -x "$BIN" ] && [ "$("$BIN" --version 2>/dev/null)" = "netavark $VERSION" ]; then
  echo "$BIN"
  exit 0
fi
ensure_packages protobuf-compiler gcc libc6-dev
started=$SECONDS
log "building netavark $VERSION (cargo install --locked, log $CACHE/build.log)"
# From the cache dir: the repository's toolchain files do not apply.
if ! (cd "$CACHE" && nice -n "${SARENA_NETAVARK_NICE:-19}" \
  cargo install --locked --force "netavark@$VERSION" --root "$CACHE/$VERSION" \
  --target-dir "$CACHE/target") >"$CACHE/build.log" 2>&1; then
  tail -n 30 "$CACHE/build.log" >&2
  log "ERROR: cargo install netavark@$VERSION failed (log above: $CACHE/build.log)"
  exit 1
fi
[ "$("$BIN" --version)" = "netavark $VERSION" ] || {
  log "ERROR: $BIN does not say it is netavark $VERSION"
  exit 1
}
log "netavark $VERSION built in $((SECONDS - started)) s"
echo "$BIN"
