#!/usr/bin/env bash
# Idempotent set-up of everything Sarena's build, demo and tests need on a fresh
# Debian machine (run as root). Safe to run again: each step checks first.
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=scripts/apt.sh
. scripts/apt.sh

log() { printf '[setup] %s\n' "$*" >&2; }

# Debian packages the tests and the demo use (shellcheck: scripts/test.sh's
# lint of the shell scripts; python3-yaml: its check of the DaemonSet).
APT_PACKAGES=(iproute2 jq iputils-ping nftables curl shellcheck python3-yaml)
ensure_packages "${APT_PACKAGES[@]}"

# bpffs for the eBPF dataplane's pins.
if [ "$(id -u)" = 0 ] && ! mount | grep ' /sys/fs/bpf type bpf' >/dev/null; then
  log "mounting bpffs on /sys/fs/bpf"
  mount -t bpf bpf /sys/fs/bpf
fi

# The eBPF toolchain (nightly + rust-src + bpf-linker) for the programs the
# daemon embeds; fast when already installed.
bash scripts/setup-ebpf.sh

# Real CNI clients and reference plugins for the end-to-end tests (e2e/).
bash scripts/setup-e2e.sh

log "done"
