#!/usr/bin/env bash
# containerd 1.6 `ctr run --cni`: two containers from a busybox-static rootfs
# on the network under test ping each other and the host (and the host pings
# them); killing the task makes ctr send DEL (with an empty CNI_NETNS, no
# K8S_POD_* args); nothing is left (link, route, libcni cache entry, IPAM
# state, ctr errors).
#
# A private containerd (own config, root, state and socket; CRI disabled) is
# started and stopped by this script. ctr's --cni loads the first conflist of
# /etc/cni/net.d and plugins from /usr/lib/cni, with no way to point it
# elsewhere, so each ctr client runs in a private mount namespace where this
# run's conf dir (and, for a non-reference plugin dir, this run's plugin dir)
# are bind-mounted over those paths. The host's /etc/cni/net.d is untouched.
# Usage: e2e/test-containerd.sh [sarena|ref|custom]   (default sarena)
set -euo pipefail
# shellcheck source=e2e/lib.sh
source "$(dirname "$0")/lib.sh"

e2e_init containerd
{ command -v containerd >/dev/null && command -v ctr >/dev/null; } ||
  fail "containerd missing: run scripts/setup-e2e.sh"
command -v unshare >/dev/null || fail "unshare (util-linux) missing"
pick_subnet
mode_setup "${1:-sarena}"
host_address

CD="$WORK/containerd"
mkdir -p "$CD"/{root,state,net.d}
write_conflist "$CD/net.d/10-$NET_NAME.conflist"
SOCK="$CD/containerd.sock"
cat >"$CD/config.toml" <<EOF
version = 2
root = "$CD/root"
state = "$CD/state"
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = "$SOCK"
[ttrpc]
  address = "$SOCK.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
EOF
containerd --config "$CD/config.toml" >"$WORK/containerd.log" 2>&1 &
CTD_PID=$!
defer stop_pid "$CTD_PID"
NS_CTR="e2e-$RUN_ID"
ctr_() { ctr --address "$SOCK" --namespace "$NS_CTR" "$@"; }
# ctr_remove NAME PID: kills container NAME, waits for its `ctr run` (PID),
# and removes the task, the container and runc's state.
ctr_remove() {
  ctr_ task kill -s SIGKILL "$1"
  wait "$2"
  ctr_ task rm -f "$1"
  ctr_ container rm "$1"
  runc --root "$CD/runc" delete --force "$1"
}
for _ in $(seq 100); do
  ctr_ version >/dev/null 2>&1 && break
  kill -0 "$CTD_PID" 2>/dev/null || fail "containerd exited"
  sleep 0.1
done
ctr_ version >/dev/null 2>&1 || fail "containerd did not come up on $SOCK"
pass "private containerd $(ctr_ version | awk '/Server/{s=1} s&&/Version/{print $2; exit}') on $SOCK"

# The mounts ctr's CNI code sees.
MOUNTS="mount --bind '$CD/net.d' /etc/cni/net.d"
if [ "$PLUGIN_DIR" != /usr/lib/cni ]; then
  MOUNTS="$MOUNTS && mount --bind '$PLUGIN_DIR' /usr/lib/cni"
  [ -d /opt/cni/bin ] && MOUNTS="$MOUNTS && mount --bind '$PLUGIN_DIR' /opt/cni/bin"
fi
[ -d /etc/cni/net.d ] || fail "/etc/cni/net.d does not exist (installed by podman/containernetworking-plugins)"

# ctr puts containers in the cgroup /<namespace>/<id>; the namespace level
# outlives the containers: remove it (and anything left in it) at exit.
defer remove_cgroup "$NS_CTR"

declare -A C IP HOSTIF CTR_PID
for p in a b; do
  C[$p]="se-$RUN_ID-$p"
  make_rootfs "$WORK/rootfs-$p"
  # ctr run stays in the foreground: it sends DEL once the task exits.
  unshare --mount --propagation private bash -c "$MOUNTS && exec ctr --address '$SOCK' --namespace '$NS_CTR' \
    run --cni --runc-root '$CD/runc' --rootfs '$WORK/rootfs-$p' '${C[$p]}' /bin/sh -c 'sleep 3600'" \
    >"$WORK/ctr-run-$p.log" 2>&1 </dev/null &
  CTR_PID[$p]=$!
  defer ctr_remove "${C[$p]}" "${CTR_PID[$p]}"
  for _ in $(seq 100); do
    ctr_ task ls 2>/dev/null | grep "^${C[$p]} .*RUNNING" >/dev/null && break
    kill -0 "${CTR_PID[$p]}" 2>/dev/null || fail "ctr run ${C[$p]} exited: $(cat "$WORK/ctr-run-$p.log")"
    sleep 0.1
  done
  ctr_ task ls | grep "^${C[$p]} .*RUNNING" >/dev/null || fail "${C[$p]} not running after 10s"
  IP[$p]=$(ctr_ task exec --exec-id "ip-$RUN_ID" "${C[$p]}" /bin/ip -4 -o addr show dev eth0 |
    sed -n 's/.* inet \([0-9.]*\)\/.*/\1/p')
  [ -n "${IP[$p]}" ] || fail "${C[$p]} has no IPv4 address on eth0"
  [ "$MODE" = custom ] || [[ "${IP[$p]}" == "$POD_PREFIX".* ]] || fail "${C[$p]} got ${IP[$p]}, outside $POD_SUBNET"
  HOSTIF[$p]=$(host_if_for "${IP[$p]}")
  pass "ctr run --cni ${C[$p]}: ${IP[$p]} via host link ${HOSTIF[$p]}"
done
compgen -G "/var/lib/cni/results/$NET_NAME-*" >/dev/null || fail "ctr's libcni cached no result in /var/lib/cni"

mode_assert_holding 2

# ctr task exec runs without PATH: name binaries absolutely.
cexec() {
  local c=$1 cmd=$2
  shift 2
  ctr_ task exec --exec-id "x-$RANDOM$RANDOM" "$c" "/bin/$cmd" "$@"
}
ping_ok "container a -> container b" cexec "${C[a]}" ping -c1 -W3 "${IP[b]}"
ping_ok "container b -> container a" cexec "${C[b]}" ping -c1 -W3 "${IP[a]}"
ping_ok "container a -> host" cexec "${C[a]}" ping -c1 -W3 "$HOST_IP"
ping_ok "container b -> host" cexec "${C[b]}" ping -c1 -W3 "$HOST_IP"
ping_ok "host -> container a" ping -c1 -W3 "${IP[a]}"
ping_ok "host -> container b" ping -c1 -W3 "${IP[b]}"

for p in a b; do
  ctr_ task kill -s SIGKILL "${C[$p]}"
  rc=0
  wait "${CTR_PID[$p]}" || rc=$?
  # 137: the task died of SIGKILL, as asked.
  [ "$rc" = 137 ] || fail "ctr run ${C[$p]} exited $rc: $(cat "$WORK/ctr-run-$p.log")"
  ! grep -qi "network review\|level=error" "$WORK/ctr-run-$p.log" ||
    fail "ctr logged an error (DEL failed?): $(cat "$WORK/ctr-run-$p.log")"
  ctr_ container rm "${C[$p]}"
done
pass "tasks killed, ctr sent DEL with an empty netns, containers removed"
[ -z "$(ctr_ container ls -q)" ] || fail "containerd still lists containers"

for p in a b; do assert_gone "${IP[$p]}" "${HOSTIF[$p]}"; done
assert_no_cache /var/lib/cni
mode_assert_released
