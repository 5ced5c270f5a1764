#!/usr/bin/env bash
# Egress on a real Kubernetes control plane (e2e/k8s, as in
# test-k8s-mode-cluster.sh: netns nodes running `sarena-daemon --kubernetes`
# with the eBPF dataplane, pods ADDed by the real plugin): masquerading and
# the pods' MTU, in native and in vxlan routing. An "outside" host is a netns
# on the underlay with no route to any pod CIDR.
#   default configuration (Kubernetes mode): masquerading on; pod -> outside
#   answers, and the outside sees the node's address; pod -> pod across nodes
#   and pod -> another node keep the pod's own source; pod -> ClusterIP and
#   pod -> NodePort (kube-proxy on node1) reach a backend on node2, and so
#   does the outside through node1's NodePort (the backend sees the address
#   node1 masquerades it to); a pod on node1 reaches a pod on node2 through
#   a hostPort of node2 (the reference portmap plugin chained after
#   sarena-cni), keeping its own source, the answers through node2's host
#   stack (the flow recorded);
#   `sarena status` shows the MTU and masquerading;
#   underlay MTU 9000: pods get 9000 (8950 in vxlan), a full-size DF ping and
#   1 MiB over TCP pass between nodes;
#   the underlay lowered to 1400 under the running daemons: the daemon logs
#   and reports the change, new pods get 1400 (1350), full-size DF ping and
#   1 MiB over TCP pass;
#   `masquerade = false`: pod -> outside fails.
# The cluster is dual-stack (SARENA_K8S_DUAL_STACK=1): the masquerading
# checks run over IPv6 too (the outside host, the other pod and node2 see
# the node's or the pod's IPv6 address); the IPv6 pod <-> pod exchange takes
# eBPF host routing's direct paths on both nodes (their counters).
# Usage (root): e2e/k8s/test-k8s-egress.sh [sarena]
#   SARENA_BIN_DIR=DIR  as for test-k8s-mode-cluster.sh
#   SARENA_K8S_KEEP=1   keep the cluster directory
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
# shellcheck source=e2e/k8s/lib.sh
. "$HERE/lib.sh"
# shellcheck source=e2e/k8s/k8s-mode-lib.sh
. "$HERE/k8s-mode-lib.sh"

sm_begin "${1:-sarena}" k8s-egress

phase "control plane, service account, two nodes, the outside host"
SARENA_K8S_DUAL_STACK=1 k8s_up "$DIR"
sm_service_account
declare -A IP IP6 before
for n in node1 node2; do
  k8s_netns_node "$DIR" "$n"
  k8s_register_node "$DIR" "$n" >/dev/null
  IP[$n]=$(k8s_node_ip "$DIR" "$n")
  IP6[$n]=$(cat "$DIR/nodes/$n/ip6")
done
sm_outside
sm_whoami_in "$(cat "$DIR/nodes/node2/netns")" 8082
sm_whoami6_in "$(cat "$DIR/nodes/node2/netns")" 8082
sm_kube_proxy node1
k apply -f - >/dev/null <<'EOF'
{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "default"},
 "spec": {"type": "NodePort", "ports": [{"port": 80, "targetPort": 8080, "nodePort": 30080, "protocol": "TCP"}]}}
EOF
k apply -f - >/dev/null <<'EOF'
{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "who", "namespace": "default"},
 "spec": {"type": "NodePort", "ports": [{"port": 83, "targetPort": 8083, "nodePort": 30083, "protocol": "TCP"}]}}
EOF
SVC=$(k get service web -o 'jsonpath={.spec.clusterIP}')

# Predicates for wait_until (which expands its arguments once).
answers() { [ "$(in_pod "$1" curl -s --max-time 2 "$2")" = "$3" ]; } # POD URL BODY
status_json() { "$SARENA_BIN_DIR/sarena" --socket "$(sm_sock "$1" "$2")" -o json status; }
mtu_is() { [ "$(status_json "$1" "$2" | jq -r .network.mtu.mtu)" = "$3" ]; } # NODE ROUTING MTU
pod_mtu_is() { in_pod "$1" ip link show eth0 | grep "mtu $2 " >/dev/null; }
# df_ping FROM TO MTU: pings of exactly MTU bytes, DF set, FROM -> TO's address.
df_ping() { in_pod "$1" ping -c 2 -w 6 -M "do" -s $(($3 - 28)) "${POD_IP[$2]}" >/dev/null; }
# seen_from_pod POD ADDR PORT: the source ADDR:PORT's whoami service saw from POD.
seen_from_pod() { sm_seen_as "$(sm_podns "$1")" "$2" "$3"; }
# counters NODE: eBPF host routing's counters in NODE's daemon (JSON).
counters() { sm_api "$1" "$ROUTING" daemon/status | jq -c .dataplane.host_routing.counters; }
# grew BEFORE AFTER EXPR: the jq EXPR over the counters is larger AFTER than BEFORE.
grew() { jq -en --argjson b "$1" --argjson a "$2" "(\$a | $3) > (\$b | $3)" >/dev/null; }
# hostport COMMAND POD HOSTPORT PORT: the reference portmap plugin, chained
# after sarena-cni as kubelet runs it for a hostPort, maps HOSTPORT of POD's
# node to POD's PORT (TCP, IPv4: the previous result holds that address).
hostport() {
  local conf
  conf=$(jq -nc --arg ip "${POD_IP[$2]}/32" --argjson hp "$3" --argjson cp "$4" \
    '{cniVersion: "1.0.0", name: "sarena", type: "portmap", snat: true, capabilities: {portMappings: true},
      runtimeConfig: {portMappings: [{hostPort: $hp, containerPort: $cp, protocol: "tcp"}]},
      prevResult: {cniVersion: "1.0.0", ips: [{address: $ip}]}}')
  k8s_exec "$DIR" "${POD_NODE[$2]}" env CNI_COMMAND="$1" CNI_CONTAINERID="$2-$RID" CNI_IFNAME=eth0 \
    CNI_NETNS="/var/run/netns/$(sm_podns "$2")" CNI_PATH=/usr/lib/cni /usr/lib/cni/portmap <<<"$conf" >/dev/null
}

for ROUTING in native vxlan; do
  overhead=0
  [ "$ROUTING" = native ] || overhead=50
  phase "$ROUTING: underlay MTU 9000, daemons (default configuration) ready"
  sm_underlay_mtu 9000 node1 node2
  for n in node1 node2; do sm_daemon "$n" "$ROUTING"; done
  for n in node1 node2; do
    wait_until 60 sm_ready "$n" "$ROUTING" || fail "$n's daemon not ready: $(sm_api "$n" "$ROUTING" daemon/health)"
  done
  want=$((9000 - overhead))
  wait_until 10 mtu_is node1 "$ROUTING" "$want" || fail "node1's status: $(status_json node1 "$ROUTING" | jq -c .network)"
  st=$(status_json node1 "$ROUTING")
  [ "$(jq -r '.network.mtu | "\(.source) \(.uplink) \(.base)"' <<<"$st")" = "uplink eth0 9000" ] ||
    fail "the MTU's source: $(jq -c .network.mtu <<<"$st")"
  [ "$(jq -r .network.masquerade.enabled <<<"$st")" = true ] ||
    fail "masquerading is not on by default: $(jq -c .network <<<"$st")"
  "$SARENA_BIN_DIR/sarena" --socket "$(sm_sock node1 "$ROUTING")" status | grep -E "^(MTU|Masquerade):" >&2

  phase "$ROUTING: pods get $want; full-size DF ping and 1 MiB across nodes"
  a=a-$ROUTING b=b-$ROUTING
  sm_pod node1 "$ROUTING" "$a"
  sm_pod node2 "$ROUTING" "$b"
  for p in "$a" "$b"; do pod_mtu_is "$p" "$want" || fail "$p's eth0: $(in_pod "$p" ip link show eth0)"; done
  wait_until 10 df_ping "$a" "$b" "$want" || fail "$a -> $b: a DF ping of $want bytes failed"
  df_ping "$b" "$a" "$want" || fail "$b -> $a: a DF ping of $want bytes failed"
  sm_serve "$a"
  sm_serve "$b"
  sm_tcp "$a" "$b"
  sm_tcp "$b" "$a"

  phase "$ROUTING: masquerading: the outside sees the node; pods and nodes see the pod"
  got=$(seen_from_pod "$a" "$OUTSIDE_IP" 8081) || fail "$a -> outside $OUTSIDE_IP failed with masquerading on"
  [ "$got" = "${IP[node1]}" ] || fail "the outside saw $a as '$got', not node1's ${IP[node1]}"
  got=$(seen_from_pod "$b" "$OUTSIDE_IP" 8081) || fail "$b -> outside failed"
  [ "$got" = "${IP[node2]}" ] || fail "the outside saw $b as '$got', not node2's ${IP[node2]}"
  sm_whoami_in "$(sm_podns "$b")" 8083
  got=$(seen_from_pod "$a" "${POD_IP[$b]}" 8083) || fail "$a -> $b:8083 failed"
  [ "$got" = "${POD_IP[$a]}" ] || fail "$b saw $a as '$got', not its own ${POD_IP[$a]} (NATed?)"
  got=$(seen_from_pod "$a" "${IP[node2]}" 8082) || fail "$a -> node2:8082 failed"
  [ "$got" = "${POD_IP[$a]}" ] || fail "node2 saw $a as '$got', not its own ${POD_IP[$a]} (NATed?)"
  # the same over IPv6
  for p in "$a" "$b"; do [ -n "${POD_IP6[$p]}" ] || fail "$p has no IPv6 address on a dual-stack cluster"; done
  got=$(seen_from_pod "$a" "$OUTSIDE_IP6" 8081) || fail "$a -> outside $OUTSIDE_IP6 failed with masquerading on"
  [ "$got" = "${IP6[node1]}" ] || fail "the outside saw $a as '$got', not node1's ${IP6[node1]}"
  sm_whoami6_in "$(sm_podns "$b")" 8083
  for n in node1 node2; do before[$n]=$(counters "$n"); done
  got=$(seen_from_pod "$a" "${POD_IP6[$b]}" 8083) || fail "$a -> $b:8083 over IPv6 failed"
  [ "$got" = "${POD_IP6[$a]}" ] || fail "$b saw $a as '$got', not its own ${POD_IP6[$a]} (NATed?)"
  # eBPF host routing over IPv6: each node sent its pod's packets straight
  # out and delivered the other's straight in (nothing else crossed meanwhile)
  for n in node1 node2; do
    now=$(counters "$n")
    { grew "${before[$n]}" "$now" '.to_peer_redirected + .to_peer_neigh' &&
      grew "${before[$n]}" "$now" .from_peer_redirected; } ||
      fail "$n ($ROUTING): IPv6 $a <-> $b not on the direct paths: counters before ${before[$n]}, after $now"
  done
  got=$(seen_from_pod "$a" "${IP6[node2]}" 8082) || fail "$a -> node2:8082 over IPv6 failed"
  [ "$got" = "${POD_IP6[$a]}" ] || fail "node2 saw $a as '$got', not its own ${POD_IP6[$a]} (NATed?)"

  phase "$ROUTING: ClusterIP, NodePort (kube-proxy on node1), hostPort of node2 -> a backend on node2"
  k apply -f - >/dev/null <<EOF
{"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "web", "namespace": "default"},
 "subsets": [{"addresses": [{"ip": "${POD_IP[$b]}"}], "ports": [{"port": 8080, "protocol": "TCP"}]}]}
EOF
  k apply -f - >/dev/null <<EOF
{"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "who", "namespace": "default"},
 "subsets": [{"addresses": [{"ip": "${POD_IP[$b]}"}], "ports": [{"port": 8083, "protocol": "TCP"}]}]}
EOF
  wait_until 30 answers "$a" "http://$SVC/index.html" "$b" || fail "$a -> ClusterIP $SVC:80 did not reach $b"
  wait_until 30 answers "$a" "http://${IP[node1]}:30080/index.html" "$b" ||
    fail "$a -> NodePort ${IP[node1]}:30080 did not reach $b"
  # from outside the cluster: kube-proxy masquerades to node1's address on
  # its route to the backend (the VXLAN device's in vxlan)
  got=$(ip netns exec "$(sm_outside_ns)" curl -s --max-time 3 "http://${IP[node1]}:30080/index.html") || true
  [ "$got" = "$b" ] || fail "outside -> NodePort ${IP[node1]}:30080 answered '$got', not $b"
  want=$(k8s_exec "$DIR" node1 ip -4 route get "${POD_IP[$b]}" | sed -n 's/.* src \([^ ]*\).*/\1/p')
  wait_until 10 sm_seen_as "$(sm_outside_ns)" "${IP[node1]}" 30083 || fail "outside -> NodePort ${IP[node1]}:30083 failed"
  got=$(sm_seen_as "$(sm_outside_ns)" "${IP[node1]}" 30083) || fail "outside -> NodePort ${IP[node1]}:30083 failed"
  [ "$got" = "$want" ] || fail "$b saw the outside's NodePort connection from '$got', not node1's $want"
  log "$ROUTING: outside -> NodePort ${IP[node1]}:30083 -> $b, seen from $got"
  # a hostPort of node2 from a pod on node1: portmap's DNAT on node2; the
  # answers must take node2's host stack back (else the reply comes from
  # the pod's address, not node2's)
  hostport ADD "$b" 8084 8083
  before[node2]=$(counters node2)
  got=$(seen_from_pod "$a" "${IP[node2]}" 8084) || fail "$a -> hostPort ${IP[node2]}:8084 ($b:8083) failed"
  [ "$got" = "${POD_IP[$a]}" ] || fail "$b saw $a through the hostPort as '$got', not ${POD_IP[$a]}"
  now=$(counters node2)
  { grew "${before[node2]}" "$now" .peer_flows_recorded && grew "${before[node2]}" "$now" .to_peer_host_flow; } ||
    fail "node2 ($ROUTING): the hostPort flow is not the host stack's: counters before ${before[node2]}, after $now"

  phase "$ROUTING: underlay lowered to 1400 under the daemons: new pods follow"
  sm_underlay_mtu 1400 node1 node2
  low=$((1400 - overhead))
  for n in node1 node2; do
    wait_until 45 mtu_is "$n" "$ROUTING" "$low" || fail "$n's status: $(status_json "$n" "$ROUTING" | jq -c .network.mtu)"
  done
  grep -q "the pods' MTU changed" "$DIR/logs/node1.sarena.log" || fail "node1 did not log the MTU change"
  for n in node1 node2; do wait_until 30 sm_ready "$n" "$ROUTING" || fail "$n not ready after the MTU change"; done
  c=c-$ROUTING d=d-$ROUTING
  sm_pod node1 "$ROUTING" "$c"
  sm_pod node2 "$ROUTING" "$d"
  for p in "$c" "$d"; do pod_mtu_is "$p" "$low" || fail "$p's eth0: $(in_pod "$p" ip link show eth0)"; done
  wait_until 10 df_ping "$c" "$d" "$low" || fail "$c -> $d: a DF ping of $low bytes failed"
  if df_ping "$c" "$d" $((low + 1)) 2>/dev/null; then fail "$c -> $d: a DF ping of $((low + 1)) bytes passed an MTU of $low"; fi
  sm_serve "$d"
  sm_tcp "$c" "$d"

  phase "$ROUTING: masquerade = false: pod -> outside fails, pod -> pod still passes"
  k8s_stop "$DIR" node1 sarena
  sm_daemon node1 "$ROUTING" "masquerade = false"
  wait_until 60 sm_ready node1 "$ROUTING" || fail "node1 not ready with masquerade = false"
  [ "$(status_json node1 "$ROUTING" | jq -r .network.masquerade.enabled)" = false ] || fail "node1 still masquerades"
  if got=$(seen_from_pod "$a" "$OUTSIDE_IP" 8081); then fail "$a reached the outside without masquerading (seen as '$got')"; fi
  if got=$(seen_from_pod "$a" "$OUTSIDE_IP6" 8081); then fail "$a reached the outside over IPv6 without masquerading (seen as '$got')"; fi
  got=$(seen_from_pod "$a" "${POD_IP[$b]}" 8083) || fail "$a -> $b:8083 failed without masquerading"
  [ "$got" = "${POD_IP[$a]}" ] || fail "$b saw $a as '$got'"
  got=$(seen_from_pod "$a" "${POD_IP6[$b]}" 8083) || fail "$a -> $b:8083 over IPv6 failed without masquerading"
  [ "$got" = "${POD_IP6[$a]}" ] || fail "$b saw $a as '$got' over IPv6"

  phase "$ROUTING: DEL, daemons stopped, underlay back to 1500"
  hostport DEL "$b" 8084 8083
  for p in "$a" "$b" "$c" "$d"; do sm_pod_del "$p"; done
  for n in node1 node2; do k8s_stop "$DIR" "$n" sarena; done
  sm_underlay_mtu 1500 node1 node2
done
phase "down"
