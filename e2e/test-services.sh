#!/usr/bin/env bash
# Kubernetes Services, NodePort and hostPort on a throwaway node (issue 11).
#
# A node netns runs the plugin under test (its own sarena-daemon, or the
# reference ptp + host-local) and host netfilter rules of exactly the shapes
# kube-proxy writes, first in its iptables mode (KUBE-SERVICES from
# PREROUTING and OUTPUT, KUBE-SVC-*/KUBE-SEP-* with DNAT, statistic random
# across two endpoints, KUBE-MARK-MASQ 0x4000 and KUBE-POSTROUTING,
# KUBE-NODEPORTS, KUBE-FORWARD), then in its nftables mode (table ip
# kube-proxy: service-ips map, numgen random vmap, mark-for-masquerade,
# masquerading, nodeports). Four pods a, b, c, d: b and c serve TCP 8080
# (they answer their name), b serves a DNS-like UDP 5353 and a TCP echo on
# 9000, d serves TCP 8080 behind a hostPort of the chained reference portmap.
# Asserts, for each rule mode:
#   pod -> ClusterIP -> pod on the node (one endpoint; two endpoints, both
#   chosen over many connections), TCP and UDP; hairpin (b to itself via its
#   ClusterIP); host -> ClusterIP; NodePort from the host, a pod and the
#   outside netns; a long-lived connection through a ClusterIP;
# and once: hostPort from the host and from a pod; a pod -> pod connection
# opened before the Service rules appeared keeps working through both rule
# sets; on Sarena a daemon restart in the middle of a ClusterIP connection
# does not break it. On the eBPF dataplane the counters show direct pod <->
# pod traffic redirected (no host-stack flow) and the Service replies kept
# on the host stack, with no drop.
#
# Usage: e2e/test-services.sh [all|ref|ebpf|kernel]
#   all (default): ref, then Sarena eBPF, then Sarena kernel, in this run.
set -euo pipefail
# shellcheck source=e2e/lib.sh
source "$(dirname "$0")/lib.sh"

WHICH=${1:-all}
each_contender "$0" "$WHICH"

e2e_init "services-$WHICH"
require_tools socat nft iptables-restore
contender_setup "$WHICH"
EBPF=0
[ "$WHICH" = ebpf ] && EBPF=1

CONF="$WORK/net.conflist"
write_conflist "$CONF" '[{"type":"portmap","snat":true,"capabilities":{"portMappings":true}}]'
HOST_PORT=$((20000 + RANDOM % 20000))
declare -A IP HOSTIF NS ID
declare -A CAP=([a]='{}' [b]='{}' [c]='{}')
CAP[d]=$(jq -cn --argjson hp "$HOST_PORT" '{portMappings:[{hostPort:$hp, containerPort:8080, protocol:"tcp"}]}')
for p in a b c d; do
  pod_add sp "$p" -cap-args "${CAP[$p]}"
  HOSTIF[$p]=$(node_host_if "${IP[$p]}")
  pass "ADD pod $p: ${IP[$p]} via ${HOSTIF[$p]}"
done
mode_assert_holding 4
# The outside netns answers the pods (no masquerade on this node).
ip -n "$OUT_NS" route add "$POD_SUBNET" via "$NODE_IP"

# --- servers ------------------------------------------------------------------------

# serve POD SOCAT-ARGS...: a socat server in POD, stopped at exit with the
# children it forked for connections still open.
serve() {
  local pod=$1
  shift
  ip netns exec "${NS[$pod]}" socat "$@" >>"$WORK/servers.log" 2>&1 &
  defer stop_tree "$!"
}
serve b TCP-LISTEN:8080,fork,reuseaddr SYSTEM:'echo b'
serve c TCP-LISTEN:8080,fork,reuseaddr SYSTEM:'echo c'
serve d TCP-LISTEN:8080,fork,reuseaddr SYSTEM:'echo d'
# shellcheck disable=SC2016  # $q is the shell's that socat's SYSTEM runs
serve b UDP-RECVFROM:5353,fork SYSTEM:'read q; echo "dns-b $q"'
serve b TCP-LISTEN:9000,fork,reuseaddr EXEC:cat
for p in b c d; do
  wait_listening "${NS[$p]}" 8080
done

# netns_of WHERE: the netns of a pod, "node" or "outside".
netns_of() {
  case "$1" in
    node) echo "$NODE_NS" ;;
    outside) echo "$OUT_NS" ;;
    *) echo "${NS[$1]}" ;;
  esac
}
# tcp_get WHERE IP PORT: what a TCP server answers, from WHERE; empty when
# the connection fails.
tcp_get() {
  ip netns exec "$(netns_of "$1")" socat -T3 -u "TCP:$2:$3,connect-timeout=3" STDOUT 2>/dev/null || true
}
# expect_tcp WHAT WANT WHERE IP PORT
expect_tcp() {
  local what=$1 want=$2 got
  got=$(tcp_get "$3" "$4" "$5")
  [ "$got" = "$want" ] || fail "$what: $3 -> $4:$5 answered '$got', expected '$want'"
  pass "$what"
}

# A long-lived connection: open_conn NAME WHERE IP PORT, then talk NAME WORD
# (the echo server must send WORD back).
declare -A CONN_FD
open_conn() {
  local name=$1 fd ns
  ns=$(netns_of "$2")
  mkfifo "$WORK/$name.in"
  : >"$WORK/$name.out"
  ip netns exec "$ns" socat -T120 STDIO "TCP:$3:$4,connect-timeout=3" <"$WORK/$name.in" >>"$WORK/$name.out" 2>&1 &
  defer kill "$!"
  exec {fd}>"$WORK/$name.in"
  CONN_FD[$name]=$fd
}
talk() {
  local name=$1 word=$2 i
  echo "$word" >&"${CONN_FD[$name]}" || fail "connection $name: write failed"
  for ((i = 0; i < 50; i++)); do
    grep -qx "$word" "$WORK/$name.out" && return 0
    sleep 0.1
  done
  fail "connection $name: no echo of '$word' (got: $(tr '\n' ' ' <"$WORK/$name.out"))"
}

# counter IFNAME FIELD: eBPF counter, or 0 off the eBPF dataplane.
counter() {
  if [ "$EBPF" = 1 ]; then ebpf_counter "$@"; else echo 0; fi
}

# --- direct pod <-> pod: the fast path ---------------------------------------------------

red_a=$(counter "${HOSTIF[a]}" redirected_packets)
red_b=$(counter "${HOSTIF[b]}" redirected_packets)
hsf_a=$(counter "${HOSTIF[a]}" host_stack_flow_packets)
hsf_b=$(counter "${HOSTIF[b]}" host_stack_flow_packets)
for i in 1 2 3 4 5; do
  expect_tcp "direct pod a -> pod b:8080 (#$i)" b a "${IP[b]}" 8080
done
if [ "$EBPF" = 1 ]; then
  d_a=$(($(counter "${HOSTIF[a]}" redirected_packets) - red_a))
  d_b=$(($(counter "${HOSTIF[b]}" redirected_packets) - red_b))
  [[ $d_a -ge 15 && $d_b -ge 10 ]] ||
    fail "direct traffic not redirected by eBPF: a +$d_a, b +$d_b frames"
  [[ $(counter "${HOSTIF[a]}" host_stack_flow_packets) = "$hsf_a" &&
    $(counter "${HOSTIF[b]}" host_stack_flow_packets) = "$hsf_b" ]] ||
    fail "direct traffic went to the host stack as a host-stack flow"
  pass "eBPF counters: direct traffic redirected (a +$d_a, b +$d_b frames), no host-stack flow"
fi

# A connection opened before any Service rule exists.
open_conn pre a "${IP[b]}" 9000
talk pre before-rules

# --- hostPort through the chained portmap --------------------------------------------

expect_tcp "hostPort: node -> $NODE_IP:$HOST_PORT -> pod d" d node "$NODE_IP" "$HOST_PORT"
expect_tcp "hostPort: pod a -> $NODE_IP:$HOST_PORT -> pod d" d a "$NODE_IP" "$HOST_PORT"
expect_tcp "hostPort: outside -> $NODE_IP:$HOST_PORT -> pod d" d outside "$NODE_IP" "$HOST_PORT"

# --- kube-proxy's rules -------------------------------------------------------------------

SVC_NET="10.96.$((RANDOM % 256))"
SVC_ONE="$SVC_NET.10"  # tcp 80 -> b:8080, NodePort 30080
SVC_TWO="$SVC_NET.20"  # tcp 80 -> b:8080 | c:8080
SVC_DNS="$SVC_NET.53"  # udp 53 -> b:5353
SVC_ECHO="$SVC_NET.90" # tcp 90 -> b:9000
NODE_PORT=$((30000 + RANDOM % 2000))

kube_proxy_iptables() {
  local b=${IP[b]} c=${IP[c]} cmt='-m comment --comment'
  node_exec iptables-restore --noflush <<EOF
*nat
:KUBE-SERVICES - [0:0]
:KUBE-NODEPORTS - [0:0]
:KUBE-POSTROUTING - [0:0]
:KUBE-MARK-MASQ - [0:0]
:KUBE-SVC-ONE0000000000000 - [0:0]
:KUBE-SVC-TWO0000000000000 - [0:0]
:KUBE-SVC-DNS0000000000000 - [0:0]
:KUBE-SVC-ECHO000000000000 - [0:0]
:KUBE-EXT-ONE0000000000000 - [0:0]
:KUBE-SEP-ONEB000000000000 - [0:0]
:KUBE-SEP-TWOB000000000000 - [0:0]
:KUBE-SEP-TWOC000000000000 - [0:0]
:KUBE-SEP-DNSB000000000000 - [0:0]
:KUBE-SEP-ECHOB00000000000 - [0:0]
-A PREROUTING $cmt "kubernetes service portals" -j KUBE-SERVICES
-A OUTPUT $cmt "kubernetes service portals" -j KUBE-SERVICES
-A POSTROUTING $cmt "kubernetes postrouting rules" -j KUBE-POSTROUTING
-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000
-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN
-A KUBE-POSTROUTING -j MARK --set-xmark 0x4000/0x0
-A KUBE-POSTROUTING $cmt "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully
-A KUBE-SERVICES -d $SVC_ONE/32 -p tcp $cmt "e2e/one:http cluster IP" -m tcp --dport 80 -j KUBE-SVC-ONE0000000000000
-A KUBE-SERVICES -d $SVC_TWO/32 -p tcp $cmt "e2e/two:http cluster IP" -m tcp --dport 80 -j KUBE-SVC-TWO0000000000000
-A KUBE-SERVICES -d $SVC_DNS/32 -p udp $cmt "e2e/dns:dns cluster IP" -m udp --dport 53 -j KUBE-SVC-DNS0000000000000
-A KUBE-SERVICES -d $SVC_ECHO/32 -p tcp $cmt "e2e/echo:echo cluster IP" -m tcp --dport 90 -j KUBE-SVC-ECHO000000000000
-A KUBE-SERVICES $cmt "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS
-A KUBE-NODEPORTS -p tcp $cmt "e2e/one:http" -m tcp --dport $NODE_PORT -j KUBE-EXT-ONE0000000000000
-A KUBE-EXT-ONE0000000000000 $cmt "masquerade traffic for e2e/one:http external destinations" -j KUBE-MARK-MASQ
-A KUBE-EXT-ONE0000000000000 -j KUBE-SVC-ONE0000000000000
-A KUBE-SVC-ONE0000000000000 ! -s $POD_SUBNET -d $SVC_ONE/32 -p tcp $cmt "e2e/one:http cluster IP" -m tcp --dport 80 -j KUBE-MARK-MASQ
-A KUBE-SVC-ONE0000000000000 $cmt "e2e/one:http -> $b:8080" -j KUBE-SEP-ONEB000000000000
-A KUBE-SEP-ONEB000000000000 -s $b/32 $cmt "e2e/one:http" -j KUBE-MARK-MASQ
-A KUBE-SEP-ONEB000000000000 -p tcp $cmt "e2e/one:http" -m tcp -j DNAT --to-destination $b:8080
-A KUBE-SVC-TWO0000000000000 ! -s $POD_SUBNET -d $SVC_TWO/32 -p tcp $cmt "e2e/two:http cluster IP" -m tcp --dport 80 -j KUBE-MARK-MASQ
-A KUBE-SVC-TWO0000000000000 $cmt "e2e/two:http -> $b:8080" -m statistic --mode random --probability 0.50000000000 -j KUBE-SEP-TWOB000000000000
-A KUBE-SVC-TWO0000000000000 $cmt "e2e/two:http -> $c:8080" -j KUBE-SEP-TWOC000000000000
-A KUBE-SEP-TWOB000000000000 -s $b/32 $cmt "e2e/two:http" -j KUBE-MARK-MASQ
-A KUBE-SEP-TWOB000000000000 -p tcp $cmt "e2e/two:http" -m tcp -j DNAT --to-destination $b:8080
-A KUBE-SEP-TWOC000000000000 -s $c/32 $cmt "e2e/two:http" -j KUBE-MARK-MASQ
-A KUBE-SEP-TWOC000000000000 -p tcp $cmt "e2e/two:http" -m tcp -j DNAT --to-destination $c:8080
-A KUBE-SVC-DNS0000000000000 ! -s $POD_SUBNET -d $SVC_DNS/32 -p udp $cmt "e2e/dns:dns cluster IP" -m udp --dport 53 -j KUBE-MARK-MASQ
-A KUBE-SVC-DNS0000000000000 $cmt "e2e/dns:dns -> $b:5353" -j KUBE-SEP-DNSB000000000000
-A KUBE-SEP-DNSB000000000000 -s $b/32 $cmt "e2e/dns:dns" -j KUBE-MARK-MASQ
-A KUBE-SEP-DNSB000000000000 -p udp $cmt "e2e/dns:dns" -m udp -j DNAT --to-destination $b:5353
-A KUBE-SVC-ECHO000000000000 ! -s $POD_SUBNET -d $SVC_ECHO/32 -p tcp $cmt "e2e/echo:echo cluster IP" -m tcp --dport 90 -j KUBE-MARK-MASQ
-A KUBE-SVC-ECHO000000000000 $cmt "e2e/echo:echo -> $b:9000" -j KUBE-SEP-ECHOB00000000000
-A KUBE-SEP-ECHOB00000000000 -s $b/32 $cmt "e2e/echo:echo" -j KUBE-MARK-MASQ
-A KUBE-SEP-ECHOB00000000000 -p tcp $cmt "e2e/echo:echo" -m tcp -j DNAT --to-destination $b:9000
COMMIT
*filter
:KUBE-FORWARD - [0:0]
-A FORWARD $cmt "kubernetes forwarding rules" -j KUBE-FORWARD
-A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP
-A KUBE-FORWARD $cmt "kubernetes forwarding rules" -m mark --mark 0x4000/0x4000 -j ACCEPT
-A KUBE-FORWARD $cmt "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
COMMIT
EOF
}

kube_proxy_iptables_flush() {
  local c
  node_exec iptables -t nat -D PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
  node_exec iptables -t nat -D OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
  node_exec iptables -t nat -D POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING
  node_exec iptables -t filter -D FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD
  for c in $(node_exec iptables -t nat -S | awk '$1 == "-N" && $2 ~ /^KUBE-/ {print $2}'); do
    node_exec iptables -t nat -F "$c"
  done
  for c in $(node_exec iptables -t nat -S | awk '$1 == "-N" && $2 ~ /^KUBE-/ {print $2}'); do
    node_exec iptables -t nat -X "$c"
  done
  node_exec iptables -t filter -F KUBE-FORWARD
  node_exec iptables -t filter -X KUBE-FORWARD
}

kube_proxy_nft() {
  local b=${IP[b]} c=${IP[c]}
  local ep_one="endpoint-ONEB0000-e2e/one/tcp/http__$b/8080"
  local ep_two_b="endpoint-TWOB0000-e2e/two/tcp/http__$b/8080"
  local ep_two_c="endpoint-TWOC0000-e2e/two/tcp/http__$c/8080"
  local ep_dns="endpoint-DNSB0000-e2e/dns/udp/dns__$b/5353"
  local ep_echo="endpoint-ECHOB000-e2e/echo/tcp/echo__$b/9000"
  node_exec nft -f - <<EOF
table ip kube-proxy {
  comment "rules for kube-proxy"
  set cluster-ips { type ipv4_addr; elements = { $SVC_ONE, $SVC_TWO, $SVC_DNS, $SVC_ECHO } }
  map service-ips {
    type ipv4_addr . inet_proto . inet_service : verdict
    elements = { $SVC_ONE . tcp . 80 : goto service-ONE00000-e2e/one/tcp/http,
                 $SVC_TWO . tcp . 80 : goto service-TWO00000-e2e/two/tcp/http,
                 $SVC_DNS . udp . 53 : goto service-DNS00000-e2e/dns/udp/dns,
                 $SVC_ECHO . tcp . 90 : goto service-ECHO0000-e2e/echo/tcp/echo }
  }
  map service-nodeports {
    type inet_proto . inet_service : verdict
    elements = { tcp . $NODE_PORT : goto external-ONE00000-e2e/one/tcp/http }
  }
  chain nat-prerouting { type nat hook prerouting priority dstnat; policy accept; jump services; }
  chain nat-output { type nat hook output priority -100; policy accept; jump services; }
  chain nat-postrouting { type nat hook postrouting priority srcnat; policy accept; jump masquerading; }
  chain mark-for-masquerade { meta mark set meta mark | 0x00004000; }
  chain masquerading {
    meta mark & 0x00004000 == 0 return
    meta mark set meta mark ^ 0x00004000
    masquerade fully-random
  }
  chain services {
    ip daddr . meta l4proto . th dport vmap @service-ips
    fib daddr type local ip daddr != 127.0.0.0/8 meta l4proto . th dport vmap @service-nodeports
  }
  chain service-ONE00000-e2e/one/tcp/http {
    ip daddr $SVC_ONE tcp dport 80 ip saddr != $POD_SUBNET jump mark-for-masquerade
    numgen random mod 1 vmap { 0 : goto $ep_one }
  }
  chain external-ONE00000-e2e/one/tcp/http {
    jump mark-for-masquerade
    goto service-ONE00000-e2e/one/tcp/http
  }
  chain $ep_one { ip saddr $b jump mark-for-masquerade; meta l4proto tcp dnat to $b:8080; }
  chain service-TWO00000-e2e/two/tcp/http {
    ip daddr $SVC_TWO tcp dport 80 ip saddr != $POD_SUBNET jump mark-for-masquerade
    numgen random mod 2 vmap { 0 : goto $ep_two_b, 1 : goto $ep_two_c }
  }
  chain $ep_two_b { ip saddr $b jump mark-for-masquerade; meta l4proto tcp dnat to $b:8080; }
  chain $ep_two_c { ip saddr $c jump mark-for-masquerade; meta l4proto tcp dnat to $c:8080; }
  chain service-DNS00000-e2e/dns/udp/dns {
    ip daddr $SVC_DNS udp dport 53 ip saddr != $POD_SUBNET jump mark-for-masquerade
    numgen random mod 1 vmap { 0 : goto $ep_dns }
  }
  chain $ep_dns { ip saddr $b jump mark-for-masquerade; meta l4proto udp dnat to $b:5353; }
  chain service-ECHO0000-e2e/echo/tcp/echo {
    ip daddr $SVC_ECHO tcp dport 90 ip saddr != $POD_SUBNET jump mark-for-masquerade
    numgen random mod 1 vmap { 0 : goto $ep_echo }
  }
  chain $ep_echo { ip saddr $b jump mark-for-masquerade; meta l4proto tcp dnat to $b:9000; }
}
EOF
}

kube_proxy_nft_flush() {
  node_exec nft delete table ip kube-proxy
}

# service_cases RULES: every Service case under the rules just installed.
service_cases() {
  local rules=$1 seen_b=0 seen_c=0 i got
  talk pre "after-$rules-rules"
  pass "[$rules] the pod a -> pod b connection opened before the rules still works"
  expect_tcp "[$rules] pod a -> ClusterIP $SVC_ONE:80 -> pod b" b a "$SVC_ONE" 80
  expect_tcp "[$rules] pod c -> ClusterIP $SVC_ONE:80 -> pod b" b c "$SVC_ONE" 80
  for ((i = 0; i < 30; i++)); do
    got=$(tcp_get a "$SVC_TWO" 80)
    case "$got" in
      b) seen_b=$((seen_b + 1)) ;;
      c) seen_c=$((seen_c + 1)) ;;
      *) fail "[$rules] pod a -> ClusterIP $SVC_TWO:80 (two endpoints), connection $i: got '$got'" ;;
    esac
  done
  [[ $seen_b -gt 0 && $seen_c -gt 0 ]] ||
    fail "[$rules] two endpoints: b answered $seen_b, c $seen_c of 30 connections"
  pass "[$rules] pod a -> ClusterIP $SVC_TWO:80, two endpoints: b $seen_b, c $seen_c of 30"
  got=$(echo "q$rules" | ip netns exec "${NS[a]}" socat -T3 - "UDP:$SVC_DNS:53" 2>/dev/null) || true
  [ "$got" = "dns-b q$rules" ] || fail "[$rules] UDP pod a -> ClusterIP $SVC_DNS:53 -> pod b: got '$got'"
  pass "[$rules] UDP request/response pod a -> ClusterIP $SVC_DNS:53 -> pod b:5353"
  expect_tcp "[$rules] hairpin: pod b -> ClusterIP $SVC_ONE:80 -> pod b" b b "$SVC_ONE" 80
  expect_tcp "[$rules] node -> ClusterIP $SVC_ONE:80 -> pod b" b node "$SVC_ONE" 80
  expect_tcp "[$rules] NodePort: node -> $NODE_IP:$NODE_PORT -> pod b" b node "$NODE_IP" "$NODE_PORT"
  expect_tcp "[$rules] NodePort: pod a -> $NODE_IP:$NODE_PORT -> pod b" b a "$NODE_IP" "$NODE_PORT"
  expect_tcp "[$rules] NodePort: outside -> $NODE_IP:$NODE_PORT -> pod b" b outside "$NODE_IP" "$NODE_PORT"
  open_conn "svc-$rules" a "$SVC_ECHO" 90
  for i in 1 2 3; do talk "svc-$rules" "$rules-$i"; done
  pass "[$rules] a long-lived connection pod a -> ClusterIP $SVC_ECHO:90 -> pod b:9000"
}

hsf_b=$(counter "${HOSTIF[b]}" host_stack_flow_packets)
kube_proxy_iptables
defer kube_proxy_iptables_flush
service_cases iptables
kube_proxy_iptables_flush
kube_proxy_nft
defer node_exec nft delete table ip kube-proxy
service_cases nft
if [ "$MODE" = sarena ]; then
  talk svc-nft before-restart
  sarena_restart
  talk svc-nft after-restart
  expect_tcp "[nft] pod a -> ClusterIP $SVC_ONE:80 -> pod b after the daemon restart" b a "$SVC_ONE" 80
  pass "[nft] the ClusterIP connection survived a daemon restart"
fi
kube_proxy_nft_flush
talk pre after-all-rules
pass "the pod a -> pod b connection opened before any rule outlived both rule sets"

if [ "$EBPF" = 1 ]; then
  d=$(($(counter "${HOSTIF[b]}" host_stack_flow_packets) - hsf_b))
  [ "$d" -gt 0 ] || fail "eBPF counters: no Service reply of pod b was kept on the host stack"
  for p in a b c d; do
    n=$(counter "${HOSTIF[$p]}" drops)
    [ "$n" = 0 ] || fail "eBPF counters: pod $p's frames dropped: $n"
  done
  pass "eBPF counters: $d Service frames of pod b kept on the host stack, no drop"
fi

for fd in "${CONN_FD[@]}"; do exec {fd}>&-; done
for p in a b c d; do
  out=$(drv del "$CONF" "${ID[$p]}" "/run/netns/${NS[$p]}" -cap-args "${CAP[$p]}") || fail "DEL pod $p: $out"
done
pass "DEL of the four pods"
mode_assert_released
