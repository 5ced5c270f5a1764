#!/usr/bin/env bash
# Idempotent set-up of what Sarena's build and demo need on a fresh Debian
# machine (run as root): a few Debian packages, bpffs and the pinned eBPF
# toolchain. Safe to run again: each step checks first. The tests need more
# (linters, real CNI runtimes, Kubernetes): scripts/test.sh runs
# scripts/setup-e2e.sh and scripts/setup-k8s.sh too.
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=scripts/apt.sh
. scripts/apt.sh

log() { printf '[setup] %s\n' "$*" >&2; }

# What scripts/demo.sh and the daemon use: ip, jq and curl for the demo's
# steps, ping for its traffic, nft for the daemon's masquerade and VXLAN
# tables.
APT_PACKAGES=(iproute2 jq iputils-ping nftables curl)
ensure_packages "${APT_PACKAGES[@]}"

# bpffs for the eBPF dataplane's pins.
if [ "$(id -u)" = 0 ] && ! mount | grep ' /sys/fs/bpf type bpf' >/dev/null; then
  log "mounting bpffs on /sys/fs/bpf"
  mount -t bpf bpf /sys/fs/bpf
fi

# The eBPF toolchain (the pinned nightly + rust-src + bpf-linker) for the
# programs the daemon embeds; fast when already installed.
bash scripts/setup-ebpf.sh

log "done"
