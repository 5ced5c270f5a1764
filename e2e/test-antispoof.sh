#!/usr/bin/env bash
# A pod can only speak as itself (issue 16), on a throwaway node netns.
#
# Three pods a, b, c. Pod a adds c's address and an outsider's (TEST-NET-3)
# to its eth0 and sends UDP from each of its three sources to pod b, to the
# node and to an "outside" netns behind the node's uplink. Asserts: the
# genuine datagrams arrive everywhere; the forged ones arrive nowhere on
# Sarena (eBPF and kernel dataplanes) and do arrive with the reference ptp
# (which proves the forging works); pod a's ARP request with c's address as
# sender and its gratuitous ARP for c's address get no answer and leave no
# neighbour entry on the node. The drops are counted: the eBPF counters
# (SpoofedSource, SpoofedArp) or the nftables counters of Sarena's table.
#
# Usage: e2e/test-antispoof.sh [all|ref|ebpf|kernel]   (all: the three in this run)
set -euo pipefail
# shellcheck source=e2e/lib.sh
source "$(dirname "$0")/lib.sh"

WHICH=${1:-all}
each_contender "$0" "$WHICH"

e2e_init "antispoof-$WHICH"
require_tools socat arping nft
contender_setup "$WHICH"

CONF="$WORK/net.conflist"
write_conflist "$CONF"
declare -A IP HOSTIF NS ID
for p in a b c; do
  pod_add sa "$p"
  HOSTIF[$p]=$(node_host_if "${IP[$p]}")
  pass "ADD pod $p: ${IP[$p]} via ${HOSTIF[$p]}"
done
ip -n "$OUT_NS" route add "$POD_SUBNET" via "$NODE_IP"
OUTSIDER="203.0.113.$((1 + RANDOM % 254))"

# Receivers: pod b, the node, the outside netns; each logs what it gets.
declare -A RX_NS=([b]="${NS[b]}" [node]="$NODE_NS" [outside]="$OUT_NS")
declare -A RX_IP=([b]="${IP[b]}" [node]="$NODE_IP" [outside]="$OUT_IP")
for t in b node outside; do
  : >"$WORK/rx-$t.log"
  ip netns exec "${RX_NS[$t]}" socat -u UDP-RECV:7000 "OPEN:$WORK/rx-$t.log,append" 2>>"$WORK/servers.log" &
  defer kill "$!"
done
sleep 0.5

# The kernel picks the primary address for pod a's own ARP requests, never
# the borrowed ones (the sysctl lives in pod a's netns).
ip netns exec "${NS[a]}" sysctl -qw net.ipv4.conf.eth0.arp_announce=2
# send SRC TAG: one datagram "TAG-to-T" from source SRC to every receiver T.
send() {
  local src=$1 tag=$2 t
  for t in b node outside; do
    echo "$tag-to-$t" | ip netns exec "${NS[a]}" socat -u - "UDP-SENDTO:${RX_IP[$t]}:7000,bind=$src" ||
      fail "socat could not send from $src"
  done
}

ip_drops0=0
arp_drops0=0
if [ "$WHICH" = ebpf ]; then
  ip_drops0=$(ebpf_counter "${HOSTIF[a]}" drop:4)
  arp_drops0=$(ebpf_counter "${HOSTIF[a]}" drop:5)
fi
# Genuine first: pod a's neighbour entry for its gateway is then resolved, so
# the forged datagrams below really leave the pod.
send "${IP[a]}" genuine
sleep 0.5
ip -n "${NS[a]}" addr add "${IP[c]}/32" dev eth0
ip -n "${NS[a]}" addr add "$OUTSIDER/32" dev eth0
FORGED=0
for _ in 1 2 3; do
  send "${IP[c]}" as-c
  send "$OUTSIDER" as-outsider
  FORGED=$((FORGED + 6))
done
send "${IP[a]}" genuine-again
sleep 1

for t in b node outside; do
  for tag in genuine genuine-again; do
    grep -qx "$tag-to-$t" "$WORK/rx-$t.log" || fail "$t did not get pod a's genuine datagram '$tag' (got: $(tr '\n' ' ' <"$WORK/rx-$t.log"))"
  done
  for tag in as-c as-outsider; do
    n=$(grep -cx "$tag-to-$t" "$WORK/rx-$t.log" || true)
    if [ "$MODE" = ref ]; then
      [ "$n" -gt 0 ] || fail "ref: the forged datagram $tag never reached $t: the harness does not forge"
    else
      [ "$n" = 0 ] || fail "$t received $n datagrams of pod a forged $tag"
    fi
  done
done
if [ "$MODE" = ref ]; then
  pass "ref (no anti-spoofing): pod b, the node and outside got the genuine and the forged datagrams"
else
  pass "pod b, the node and outside got pod a's genuine datagrams and none forged as pod c or $OUTSIDER"
fi

# ARP: a request with pod c's address as sender, and a gratuitous ARP for it.
gw_reply=0
ip netns exec "${NS[a]}" arping -q -c 2 -w 2 -I eth0 -s "${IP[c]}" "$POD_GATEWAY" && gw_reply=1
ip netns exec "${NS[a]}" arping -q -U -c 2 -I eth0 -s "${IP[c]}" "${IP[c]}" || true
ip netns exec "${NS[a]}" arping -q -c 1 -w 2 -I eth0 -s "${IP[a]}" "$POD_GATEWAY" ||
  fail "pod a's own ARP request for its gateway got no answer"
learned=$(node_exec ip -4 neigh show "${IP[c]}" dev "${HOSTIF[a]}")
if [ "$MODE" = ref ]; then
  [[ $gw_reply = 1 && -n $learned ]] ||
    fail "ref: the forged ARP got no answer or taught the node nothing (reply $gw_reply, '$learned')"
  pass "ref: pod a's ARP as pod c was answered and taught the node: $learned"
else
  [ "$gw_reply" = 0 ] || fail "pod a's ARP request as pod c was answered"
  [ -z "$learned" ] || fail "the node learned pod c's address on pod a's veth: $learned"
  pass "pod a's ARP as pod c (request and gratuitous) unanswered, nothing learned; its own ARP answered"
fi

case "$WHICH" in
  ebpf)
    ip_drops=$(($(ebpf_counter "${HOSTIF[a]}" drop:4) - ip_drops0))
    arp_drops=$(($(ebpf_counter "${HOSTIF[a]}" drop:5) - arp_drops0))
    [ "$ip_drops" -ge "$FORGED" ] || fail "eBPF SpoofedSource drops +$ip_drops, $FORGED forged datagrams sent"
    [ "$arp_drops" -ge 4 ] || fail "eBPF SpoofedArp drops +$arp_drops, 4 forged ARP sent"
    for p in b c; do
      [ "$(ebpf_counter "${HOSTIF[$p]}" drops)" = 0 ] || fail "eBPF: pod $p's genuine frames were dropped"
    done
    pass "eBPF counters of pod a: SpoofedSource +$ip_drops, SpoofedArp +$arp_drops; pods b, c no drop"
    ;;
  kernel)
    # nft_drops FAMILY: packets counted by the drop rule of Sarena's antispoof chain.
    nft_drops() {
      node_exec nft -j list chain "$1" sarena antispoof |
        jq '[.nftables[].rule? | select(.) | .expr[] | .counter? | select(.) | .packets] | add // 0'
    }
    ip_drops=$(nft_drops inet)
    arp_drops=$(nft_drops arp)
    [ "$ip_drops" -ge "$FORGED" ] || fail "nftables: $ip_drops IPv4 drops counted, $FORGED forged datagrams sent"
    [ "$arp_drops" -ge 4 ] || fail "nftables: $arp_drops ARP drops counted, 4 forged ARP sent"
    pass "nftables counters: $ip_drops IPv4 and $arp_drops ARP frames of pod a dropped"
    ;;
esac

for p in a b c; do
  out=$(drv del "$CONF" "${ID[$p]}" "/run/netns/${NS[$p]}") || fail "DEL pod $p: $out"
done
if [ "$WHICH" = kernel ]; then
  # (removed in the background, after the DEL's answer)
  for ((i = 0; i < 50; i++)); do
    left=$(node_exec nft -j list set inet sarena guarded | jq '[.nftables[].set? | select(.) | .elem[]?] | length')
    [ "$left" = 0 ] && break
    sleep 0.1
  done
  [ "$left" = 0 ] || fail "nftables: $left guarded interfaces left 5 s after DEL"
  pass "nftables: no guarded interface left after DEL"
fi
mode_assert_released
