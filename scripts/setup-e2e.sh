#!/usr/bin/env bash
# Idempotent installation of what the test command (scripts/test.sh) needs
# beyond scripts/setup.sh: the linters' tools, the real CNI clients the
# end-to-end tests drive (libcni via the Go driver, podman, containerd) and
# the tools they use. The demo does not need any of it.
# Runtime configuration is NOT installed globally: each e2e script writes its
# own private config into a unique temp dir at test time.
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=scripts/apt.sh
. scripts/apt.sh

log() { printf '[setup-e2e] %s\n' "$*" >&2; }

if [ "$(id -u)" != 0 ]; then
  log "not root: skipping package installation (the e2e tests need root anyway)"
  exit 0
fi

E2E_PACKAGES=(
  shellcheck python3-yaml # scripts/test.sh: the shell lint, the DaemonSet check
  containernetworking-plugins # reference plugins: ptp host-local portmap bandwidth tuning
  golang-go golang-github-appc-cni-dev # libcni driver, built offline in GOPATH mode
  podman runc # podman 4.3 with its CNI backend
  containerd # containerd 1.6 (ctr run --cni)
  busybox-static # container rootfs
  iproute2 iptables nftables iputils-ping iputils-arping iperf3 jq curl
  socat bpftool # the Services and anti-spoofing tests: servers/clients, eBPF counters
)
ensure_packages "${E2E_PACKAGES[@]}"

# The Go driver is built on demand by e2e/lib.sh (into a temp dir), so there
# is nothing more to do here.
log "done"
