#!/usr/bin/env bash
# libcni end to end: two pods (netns) networked through AddNetworkList by the
# Go driver, as containerd and CRI-O do; pod<->pod and pod<->host pings;
# CheckNetworkList passes, then fails once the pod's address is removed;
# DelNetworkList (pod b after its netns is already gone), DEL again
# (idempotent); nothing left behind.
# Usage: e2e/test-libcni.sh [sarena|ref|custom]   (default sarena)
set -euo pipefail
# shellcheck source=e2e/lib.sh
source "$(dirname "$0")/lib.sh"

e2e_init libcni
pick_subnet
mode_setup "${1:-sarena}"
ensure_driver
host_address
CONF="$WORK/net.conflist"
write_conflist "$CONF"

declare -A IP HOSTIF NS ID
for p in a b; do
  NS[$p]="se-$RUN_ID-$p"
  ID[$p]="e2e-$RUN_ID-$p"
  new_netns "${NS[$p]}"
  defer "'$DRIVER' -conflist '$CONF' -plugin-dir '$PLUGIN_DIR' -cache-dir '$WORK/cni-cache' -id '${ID[$p]}' -netns '' del"
  out=$(drv add "$CONF" "${ID[$p]}" "/run/netns/${NS[$p]}" \
    -args "IgnoreUnknown=1;K8S_POD_NAMESPACE=e2e;K8S_POD_NAME=pod-$p;K8S_POD_INFRA_CONTAINER_ID=${ID[$p]}") ||
    fail "ADD pod $p: $out"
  assert_result_ok "$out"
  IP[$p]=$(jq -r '.result.ips[0].address' <<<"$out" | cut -d/ -f1)
  HOSTIF[$p]=$(host_if_for "${IP[$p]}")
  [ -n "${HOSTIF[$p]}" ] && [ "${HOSTIF[$p]}" != "$HOST_DUMMY" ] || fail "no host route to ${IP[$p]}"
  ip -n "${NS[$p]}" -4 -o addr show dev eth0 | grep -qF " ${IP[$p]}/" ||
    fail "pod $p: eth0 does not carry ${IP[$p]}"
  pass "ADD pod $p: ${IP[$p]} via host link ${HOSTIF[$p]} ($(jq -r .elapsedMs <<<"$out") ms)"
done
[ "${IP[a]}" != "${IP[b]}" ] || fail "both pods got ${IP[a]}"
mode_assert_holding 2

cached=$(drv cached "$CONF" "${ID[a]}" "/run/netns/${NS[a]}") || fail "cached: $cached"
jq -e '.result.ips | length > 0' <<<"$cached" >/dev/null || fail "no cached ADD result for pod a: $cached"
pass "libcni cached the ADD result"

ping_ok "pod a -> pod b" ip netns exec "${NS[a]}" ping -c1 -W3 "${IP[b]}"
ping_ok "pod b -> pod a" ip netns exec "${NS[b]}" ping -c1 -W3 "${IP[a]}"
ping_ok "pod a -> host" ip netns exec "${NS[a]}" ping -c1 -W3 "$HOST_IP"
ping_ok "pod b -> host" ip netns exec "${NS[b]}" ping -c1 -W3 "$HOST_IP"
ping_ok "host -> pod a" ping -c1 -W3 "${IP[a]}"
ping_ok "host -> pod b" ping -c1 -W3 "${IP[b]}"

for p in a b; do
  out=$(drv check "$CONF" "${ID[$p]}" "/run/netns/${NS[$p]}") || fail "CHECK pod $p: $out"
done
pass "CHECK both pods"

# CHECK must notice a pod that lost its address.
ip -n "${NS[a]}" addr flush dev eth0
if out=$(drv check "$CONF" "${ID[a]}" "/run/netns/${NS[a]}"); then
  fail "CHECK passed although pod a's eth0 has no address"
fi
pass "CHECK fails once pod a's address is gone: $(jq -r .error <<<"$out")"

out=$(drv del "$CONF" "${ID[a]}" "/run/netns/${NS[a]}") || fail "DEL pod a: $out"
pass "DEL pod a"
# Pod b: its netns is gone before DEL (a crashed sandbox).
ip netns del "${NS[b]}"
out=$(drv del "$CONF" "${ID[b]}" "/run/netns/${NS[b]}") || fail "DEL pod b after its netns went: $out"
pass "DEL pod b with its netns already gone"
for p in a b; do
  out=$(drv del "$CONF" "${ID[$p]}" "") || fail "second DEL pod $p: $out"
done
pass "DEL again is a no-op"

ip netns del "${NS[a]}"
for p in a b; do
  assert_gone "${IP[$p]}" "${HOSTIF[$p]}"
  ! ip netns list | grep -qw "${NS[$p]}" || fail "netns ${NS[$p]} still exists"
done
assert_no_cache "$WORK/cni-cache"
mode_assert_released
