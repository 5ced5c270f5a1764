#!/usr/bin/env bash
# build-image.sh: Sarena's container image, built offline (no registry, no
# docker): sarena-daemon, sarena-cni, the `sarena` CLI, `nft` (the daemon
# runs it at set-up for its masquerade and anti-spoofing tables, in eBPF mode
# too) and `test` (the uninstall pod's readiness probe), each with the
# shared libraries `ldd` lists, in one layer written by scripts/mkimage.py.
# The tar is a docker-archive, which
# `ctr -n k8s.io images import` and `docker load` take; the same binaries
# give the same bytes (the same image ID). deploy/Dockerfile builds the same
# image with docker or buildah.
#
# Usage: scripts/build-image.sh [-o FILE] [-t TAG] [--format docker|oci|both]
#   -o FILE   the image tar [target/sarena-image.tar]
#   -t TAG    [sarena.local/sarena:VERSION], VERSION from sarena-daemon --version
#             (deploy/kubernetes/20-daemonset.yaml runs sarena.local/sarena:0.1.0)
#   SARENA_BIN_DIR=DIR  take the three binaries from DIR; default: run
#             scripts/build-release.sh (a no-op when up to date) and take
#             target/sarena-bin
# Prints the tag and the tar's path on stdout.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
log() { printf '[build-image] %s\n' "$*" >&2; }
die() {
  log "ERROR: $*"
  exit 1
}

OUT=$REPO/target/sarena-image.tar TAG="" FORMAT=docker
while [ $# -gt 0 ]; do
  case $1 in
    -o) OUT=${2:?-o FILE} && shift 2 ;;
    -t) TAG=${2:?-t TAG} && shift 2 ;;
    --format) FORMAT=${2:?--format docker|oci|both} && shift 2 ;;
    -h | --help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//' && exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done

if [ -z "${SARENA_BIN_DIR:-}" ]; then
  log "scripts/build-release.sh (the plugin statically linked)"
  SARENA_BIN_DIR=$(bash "$REPO/scripts/build-release.sh")
fi
for b in sarena-daemon sarena-cni sarena; do
  [ -x "$SARENA_BIN_DIR/$b" ] || die "$SARENA_BIN_DIR/$b missing"
done
NFT=$(command -v nft) || die "nft not installed (apt-get install nftables)"
# the uninstall pod's readiness probe (deploy/kubernetes/uninstall/): `test -e`
[ -x /usr/bin/test ] || die "/usr/bin/test missing (coreutils)"
VERSION=$("$SARENA_BIN_DIR/sarena-daemon" --version | awk '{print $2}')
[ -n "$VERSION" ] || die "cannot read the version of $SARENA_BIN_DIR/sarena-daemon"
TAG=${TAG:-sarena.local/sarena:$VERSION}

mkdir -p "$(dirname "$OUT")"
tmp=$(mktemp "$OUT.XXXXXX")
trap 'rm -f "$tmp"' EXIT
python3 "$REPO/scripts/mkimage.py" -o "$tmp" -t "$TAG" --format "$FORMAT" \
  --bin /usr/bin/sarena-daemon "$SARENA_BIN_DIR/sarena-daemon" \
  --bin /usr/bin/sarena-cni "$SARENA_BIN_DIR/sarena-cni" \
  --bin /usr/bin/sarena "$SARENA_BIN_DIR/sarena" \
  --bin /usr/sbin/nft "$NFT" \
  --bin /usr/bin/test /usr/bin/test \
  --dir /tmp --chmod 1777 /tmp \
  --dir /run/sarena --dir /var/lib/sarena --dir /etc/sarena \
  --dir /etc/cni/net.d --dir /opt/cni/bin \
  --entrypoint /usr/bin/sarena-daemon \
  --label "org.opencontainers.image.title=sarena" \
  --label "org.opencontainers.image.version=$VERSION" \
  --label "org.opencontainers.image.description=Sarena CNI: node daemon, plugin and CLI" >&2
mv "$tmp" "$OUT"
trap - EXIT
log "$TAG: $OUT ($(du -h "$OUT" | cut -f1))"
printf '%s %s\n' "$TAG" "$OUT"
