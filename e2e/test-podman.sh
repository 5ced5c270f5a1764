#!/usr/bin/env bash
# podman 4.3 with its CNI backend: two dual-stack containers from a
# busybox-static rootfs on the network under test ping each other and the
# host over both families (and the host pings them); `podman rm` tears them
# down; nothing is left (link, route, netns, libcni cache entry, IPAM
# state). E2E_DUAL_STACK=0: IPv4 only.
# podman runs entirely from private config: CONTAINERS_CONF (network_backend
# "cni", cni_plugin_dirs, network_config_dir, runc, cgroupfs, ulimits) and
# CONTAINERS_STORAGE_CONF (graphroot/runroot), all in the work dir.
# Usage: e2e/test-podman.sh [sarena|ref|custom]   (default sarena)
set -euo pipefail
# shellcheck source=e2e/lib.sh
source "$(dirname "$0")/lib.sh"

e2e_init podman
command -v podman >/dev/null || fail "podman missing: run scripts/setup-e2e.sh"
command -v runc >/dev/null || fail "runc missing: run scripts/setup-e2e.sh"
pick_subnet
[ "${E2E_DUAL_STACK:-1}" = 0 ] || pick_subnet6
mode_setup "${1:-sarena}"
host_address

PM="$WORK/podman"
mkdir -p "$PM"/{net.d,root,run,tmp}
write_conflist "$PM/net.d/$NET_NAME.conflist"
export CONTAINERS_CONF="$PM/containers.conf"
export CONTAINERS_STORAGE_CONF="$PM/storage.conf"
export CONTAINERS_REGISTRIES_CONF="$PM/registries.conf"
# runc sets the container's rlimits with prlimit; without CAP_SYS_RESOURCE
# (as in this sandbox) it cannot exceed the caller's hard limits, and podman's
# defaults (nofile 1048576) do: ask for modest limits, never above ours.
NOFILE=$(ulimit -Hn)
NOFILE=$((NOFILE > 4096 ? 4096 : NOFILE))
NPROC=$(ulimit -Hu)
NPROC=$((NPROC > 4096 ? 4096 : NPROC))
[ "$NOFILE" != unlimited ] || NOFILE=1048576
[ "$NPROC" != unlimited ] || NPROC=4194304
cat >"$CONTAINERS_CONF" <<EOF
[containers]
default_ulimits = ["nofile=$NOFILE:$NOFILE", "nproc=$NPROC:$NPROC"]
default_capabilities = ["CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT", "NET_RAW"]

[network]
network_backend = "cni"
cni_plugin_dirs = ["$PLUGIN_DIR"]
network_config_dir = "$PM/net.d"
default_network = "$NET_NAME"

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
events_logfile_path = "$PM/events.log"
tmp_dir = "$PM/tmp"
volume_path = "$PM/root/volumes"
EOF
cat >"$CONTAINERS_STORAGE_CONF" <<EOF
[storage]
driver = "vfs"
graphroot = "$PM/root"
runroot = "$PM/run"
EOF
: >"$CONTAINERS_REGISTRIES_CONF"

pm() { podman --log-level "${E2E_PODMAN_LOG:-error}" "$@"; }
net_backend=$(pm info --format '{{.Host.NetworkBackend}}')
[ "$net_backend" = cni ] || fail "podman uses network backend '$net_backend', not cni"
pm network inspect "$NET_NAME" >/dev/null || fail "podman does not see network $NET_NAME in $PM/net.d"
pass "podman $(pm version --format '{{.Client.Version}}') with the cni backend sees $NET_NAME"

# Containers live under the cgroup /$NET_NAME (--cgroup-parent), removed at
# exit. (conmon itself always goes to podman's shared libpod_parent/conmon.)
defer remove_cgroup "$NET_NAME"
declare -A C IP IP6 HOSTIF SANDBOX
for p in a b; do
  C[$p]="se-$RUN_ID-$p"
  make_rootfs "$WORK/rootfs-$p"
  defer podman rm -f -t 0 "${C[$p]}"
  pm run -d --name "${C[$p]}" --network "$NET_NAME" --cgroup-parent "/$NET_NAME" --rootfs "$WORK/rootfs-$p" \
    /bin/sh -c 'trap "exit 0" TERM; sleep 3600 & wait' >"$WORK/podman-run-$p.log" 2>&1 ||
    fail "podman run ${C[$p]}: $(cat "$WORK/podman-run-$p.log")"
  info=$(pm inspect "${C[$p]}")
  IP[$p]=$(jq -r --arg n "$NET_NAME" '.[0].NetworkSettings.Networks[$n].IPAddress' <<<"$info")
  mac=$(jq -r --arg n "$NET_NAME" '.[0].NetworkSettings.Networks[$n].MacAddress' <<<"$info")
  SANDBOX[$p]=$(jq -r '.[0].NetworkSettings.SandboxKey' <<<"$info")
  [[ -n ${IP[$p]} && ${IP[$p]} != null ]] || fail "podman inspect shows no IP for ${C[$p]}"
  [[ -n $mac && $mac != null ]] || fail "podman inspect shows no MAC for ${C[$p]}"
  pm exec "${C[$p]}" ip -4 -o addr show dev eth0 | grep -F " ${IP[$p]}/" >/dev/null ||
    fail "${C[$p]}: eth0 does not carry ${IP[$p]}"
  HOSTIF[$p]=$(host_if_for "${IP[$p]}")
  if [ -n "${POD_SUBNET6:-}" ]; then
    IP6[$p]=$(jq -r --arg n "$NET_NAME" '.[0].NetworkSettings.Networks[$n].GlobalIPv6Address' <<<"$info")
    [[ -n ${IP6[$p]} && ${IP6[$p]} != null ]] || fail "podman inspect shows no IPv6 for ${C[$p]}"
    pm exec "${C[$p]}" ip -6 -o addr show dev eth0 | grep -F " ${IP6[$p]}/" >/dev/null ||
      fail "${C[$p]}: eth0 does not carry ${IP6[$p]}"
    [ "$(host_if_for "${IP6[$p]}")" = "${HOSTIF[$p]}" ] ||
      fail "the host routes ${IP6[$p]} elsewhere than ${HOSTIF[$p]}"
  fi
  pass "podman run ${C[$p]}: ${IP[$p]} ${IP6[$p]:-} mac $mac via host link ${HOSTIF[$p]}, netns ${SANDBOX[$p]}"
done

mode_assert_holding 2

ping_ok "container a -> container b" pm exec "${C[a]}" ping -c1 -W3 "${IP[b]}"
ping_ok "container b -> container a" pm exec "${C[b]}" ping -c1 -W3 "${IP[a]}"
ping_ok "container a -> host" pm exec "${C[a]}" ping -c1 -W3 "$HOST_IP"
ping_ok "container b -> host" pm exec "${C[b]}" ping -c1 -W3 "$HOST_IP"
ping_ok "host -> container a" ping -c1 -W3 "${IP[a]}"
ping_ok "host -> container b" ping -c1 -W3 "${IP[b]}"
if [ -n "${POD_SUBNET6:-}" ]; then
  ping_ok "container a -> container b over IPv6" pm exec "${C[a]}" ping -c1 -W3 "${IP6[b]}"
  ping_ok "container b -> container a over IPv6" pm exec "${C[b]}" ping -c1 -W3 "${IP6[a]}"
  ping_ok "container a -> host over IPv6" pm exec "${C[a]}" ping -c1 -W3 "$HOST_IP6"
  ping_ok "host -> container b over IPv6" ping -c1 -W3 "${IP6[b]}"
fi

for p in a b; do
  pm rm -f -t 0 "${C[$p]}" >/dev/null || fail "podman rm ${C[$p]}"
done
pass "podman rm both containers"
[ -z "$(pm ps -aq)" ] || fail "podman still lists containers"

for p in a b; do
  assert_gone "${IP[$p]}" "${HOSTIF[$p]}"
  [ -z "${IP6[$p]:-}" ] || assert_gone "${IP6[$p]}" ""
  [ ! -e "${SANDBOX[$p]}" ] || fail "podman's netns ${SANDBOX[$p]} still exists"
done
pass "podman's netns files are gone"
# podman's libcni keeps its result cache in /var/lib/cni.
assert_no_cache /var/lib/cni "$PM"
mode_assert_released
