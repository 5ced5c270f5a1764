#!/usr/bin/env bash
# libcni end to end: two dual-stack pods (netns) networked through
# AddNetworkList by the Go driver, as containerd and CRI-O do; pod<->pod and
# pod<->host pings over both families (on Sarena's eBPF dataplane, IPv6
# pod<->pod through the programs, by their counters); CheckNetworkList
# passes, then fails once the pod's IPv6 address, then every address, is
# removed; DelNetworkList (pod b after its netns is already gone), DEL again
# (idempotent); nothing left behind. E2E_DUAL_STACK=0: IPv4 only.
# Usage: e2e/test-libcni.sh [sarena|ref|custom]   (default sarena)
set -euo pipefail
# shellcheck source=e2e/lib.sh
source "$(dirname "$0")/lib.sh"

e2e_init libcni
pick_subnet
[ "${E2E_DUAL_STACK:-1}" = 0 ] || pick_subnet6
mode_setup "${1:-sarena}"
ensure_driver
host_address
CONF="$WORK/net.conflist"
write_conflist "$CONF"

declare -A IP IP6 HOSTIF NS ID
for p in a b; do
  pod_add se "$p" -args "$(pod_args "$p" "K8S_POD_INFRA_CONTAINER_ID=e2e-$RUN_ID-$p")"
  out=$POD_RESULT
  assert_result_ok "$out"
  HOSTIF[$p]=$(host_if_for "${IP[$p]}")
  [[ -n ${HOSTIF[$p]} && ${HOSTIF[$p]} != "$HOST_DUMMY" ]] || fail "no host route to ${IP[$p]}"
  ip -n "${NS[$p]}" -4 -o addr show dev eth0 | grep -F " ${IP[$p]}/" >/dev/null ||
    fail "pod $p: eth0 does not carry ${IP[$p]}"
  if [ -n "${POD_SUBNET6:-}" ]; then
    IP6[$p]=$(jq -r '[.result.ips[].address | select(contains(":"))][0] // empty' <<<"$out" | cut -d/ -f1)
    [ -n "${IP6[$p]}" ] || fail "pod $p: no IPv6 address in the result: $out"
    [ "$(host_if_for "${IP6[$p]}")" = "${HOSTIF[$p]}" ] ||
      fail "the host routes ${IP6[$p]} elsewhere than ${HOSTIF[$p]}"
    addr6=$(ip -n "${NS[$p]}" -6 -o addr show dev eth0)
    grep -qF " ${IP6[$p]}/" <<<"$addr6" || fail "pod $p: eth0 does not carry ${IP6[$p]}: $addr6"
    ! grep -q tentative <<<"$addr6" || fail "pod $p: an address is still tentative: $addr6"
  fi
  pass "ADD pod $p: ${IP[$p]} ${IP6[$p]:-} via host link ${HOSTIF[$p]} ($(jq -r .elapsedMs <<<"$out") ms)"
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
if [ -n "${POD_SUBNET6:-}" ]; then
  EBPF6=0
  if [ "$MODE" = sarena ] && [ "${SARENA_DATAPLANE:-ebpf}" = ebpf ] && [ -n "$SARENA_PIN_DIR" ]; then
    EBPF6=1
    redirected0=$(ebpf_counter "${HOSTIF[a]}" ipv6_redirected_packets)
  fi
  ping_ok "pod a -> pod b over IPv6" ip netns exec "${NS[a]}" ping -c1 -W3 "${IP6[b]}"
  ping_ok "pod b -> pod a over IPv6" ip netns exec "${NS[b]}" ping -c1 -W3 "${IP6[a]}"
  ping_ok "pod a -> host over IPv6" ip netns exec "${NS[a]}" ping -c1 -W3 "$HOST_IP6"
  ping_ok "host -> pod a over IPv6" ping -c1 -W3 "${IP6[a]}"
  ping_ok "host -> pod b over IPv6" ping -c1 -W3 "${IP6[b]}"
  if [ "$EBPF6" = 1 ]; then
    redirected=$(($(ebpf_counter "${HOSTIF[a]}" ipv6_redirected_packets) - redirected0))
    [ "$redirected" -ge 1 ] || fail "eBPF: pod a's IPv6 echo to pod b was not redirected"
    [ "$(ebpf_counter "${HOSTIF[a]}" ndp_replies)" -ge 1 ] || fail "eBPF: no neighbour advertisement for pod a"
    [ "$(ebpf_counter "${HOSTIF[a]}" drops)" = 0 ] || fail "eBPF: pod a's frames were dropped"
    pass "eBPF: IPv6 pod a -> pod b redirected by the programs ($redirected frames)"
  fi
fi

for p in a b; do
  out=$(drv check "$CONF" "${ID[$p]}" "/run/netns/${NS[$p]}") || fail "CHECK pod $p: $out"
done
pass "CHECK both pods"

# CHECK must notice a pod that lost its IPv6 address, then every address.
if [ -n "${POD_SUBNET6:-}" ]; then
  ip -n "${NS[a]}" -6 addr del "${IP6[a]}/64" dev eth0
  if out=$(drv check "$CONF" "${ID[a]}" "/run/netns/${NS[a]}"); then
    fail "CHECK passed although pod a's eth0 lost ${IP6[a]}"
  fi
  pass "CHECK fails once pod a's IPv6 address is gone: $(jq -r .error <<<"$out")"
fi
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
  [ -z "${IP6[$p]:-}" ] || assert_gone "${IP6[$p]}" ""
  ! ip netns list | grep -w "${NS[$p]}" >/dev/null || fail "netns ${NS[$p]} still exists"
done
assert_no_cache "$WORK/cni-cache"
mode_assert_released
