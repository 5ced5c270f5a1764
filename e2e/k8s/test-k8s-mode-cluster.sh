#!/usr/bin/env bash
# Kubernetes mode against a real kube-apiserver + etcd + controller-manager
# (e2e/k8s, Kubernetes 1.20.2 built by scripts/setup-k8s.sh): netns nodes on
# one underlay bridge, each running its own `sarena-daemon --kubernetes` (own
# state dir, socket and bpffs pin dir, eBPF dataplane) with a service
# account's RBAC-limited kubeconfig; Node objects through the API, podCIDRs
# from the controller-manager; pods networked by the real plugin inside each
# node's netns. In native and in vxlan routing:
#   daemons ready, NetworkUnavailable=False (SarenaIsUp), peer routes in place;
#   pods on two nodes: ping and TCP (1 MiB) both ways, through the eBPF programs,
#   on the direct paths on both nodes (eBPF host routing's counters);
#   the pod UID in the endpoint registry; the pods' MTU lowered in vxlan;
#   (native) a Pod object's labels and its namespace's in `sarena endpoint
#   get`, following `kubectl label`;
#   a cross-node ClusterIP Service: kube-proxy's iptables rules on node1 DNAT
#   a pod on node1 to a backend pod on node2, the answers through node1's
#   host stack (the flow recorded);
#   (vxlan) a hostile Node object (node1's InternalIP, podCIDR 128.0.0.0/1):
#   rejected by both daemons (not routed, no FDB entry, PeerRejected Event,
#   error log, counted by reason in the status);
#   the daemon SIGKILLed and restarted under a 10/s ping: at most one lost,
#   routes untouched;
# in vxlan: node2's Node re-created with another podCIDR under a live pod:
#   refused (error log, a Warning Event, STATUS 50), deletions still served,
#   the new podCIDR adopted once the pod is gone;
# and once (native): a node without a podCIDR answers STATUS 50 and refuses
# ADD with the reason; it joins once the controller-manager gives it one and
# is reachable without restarting the others; deleted, its routes go on
# every node.
# Usage (root): e2e/k8s/test-k8s-mode-cluster.sh [sarena]
#   SARENA_BIN_DIR=DIR  sarena-daemon, sarena-cni and sarena (default: target/release, else
#                       target/debug, else cargo build --release; e2e/run-all.sh sets it)
#   SARENA_K8S_KEEP=1   keep the cluster directory
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
# shellcheck source=e2e/k8s/lib.sh
. "$HERE/lib.sh"
# shellcheck source=e2e/k8s/k8s-mode-lib.sh
. "$HERE/k8s-mode-lib.sh"

sm_begin "${1:-sarena}" k8s-mode

phase "control plane up"
k8s_up "$DIR"

phase "RBAC: the daemon's service account (deploy/kubernetes/00-rbac.yaml)"
sm_service_account

phase "two netns nodes registered, podCIDRs from the controller-manager"
declare -A CIDR IP
for n in node1 node2; do
  k8s_netns_node "$DIR" "$n"
  CIDR[$n]=$(k8s_register_node "$DIR" "$n")
  IP[$n]=$(k8s_node_ip "$DIR" "$n")
  [[ ${CIDR[$n]} == 10.244.*.0/24 ]] || fail "$n podCIDR '${CIDR[$n]}'"
done

# expect_route NODE TO ROUTING: NODE routes TO's podCIDR as ROUTING says.
expect_route() {
  local want
  case $3 in
    native) want="${CIDR[$2]} via ${IP[$2]} dev eth0" ;;
    vxlan) want="${CIDR[$2]} via ${CIDR[$2]%/*} dev sarena.vxlan onlink" ;;
  esac
  sm_peer_routes "$1" | grep -xF "$want" >/dev/null
}

# no_route NODE CIDR: NODE has no Sarena route to CIDR.
no_route() { ! sm_peer_routes "$1" | grep "^$2 " >/dev/null; }

# Predicates for wait_until (which expands its arguments once).
marked_up() { [ "$(sm_condition "$1")" = "False SarenaIsUp" ]; }
has_pod_cidr() { [ -n "$(k get node "$1" -o 'jsonpath={.spec.podCIDR}')" ]; }
health_says() { sm_api "$1" "$2" daemon/health | grep -F "$3" >/dev/null; }
answers() { [ "$(in_pod "$1" curl -s --max-time 2 "$2")" = "$3" ]; } # POD URL BODY
has_event() { # NODE REASON
  [ -n "$(k get events -n default -o name --field-selector "involvedObject.name=$1,reason=$2")" ]
}

# cni_error OUTPUT: "CODE MSG" of a CNI error answer.
# host_routing NODE: the daemon's eBPF host routing status (JSON).
host_routing() { sm_api "$1" "$ROUTING" daemon/status | jq -c '.dataplane.host_routing'; }

# endpoint_get POD: `sarena endpoint get` for POD's endpoint on node1 (native).
endpoint_get() { "$SARENA_BIN_DIR/sarena" --socket "$(sm_sock node1 native)" endpoint get "$1-$RID"; }
shows_labels() { endpoint_get "$1" | grep -E "^Labels: +$2\$" >/dev/null; }
shows_namespace_labels() { endpoint_get "$1" | grep -E "^Namespace labels: +.*$2" >/dev/null; }
cni_error() { jq -r '"\(.code) \(.msg)"' <<<"$1"; }

# kube-proxy (iptables mode) on node1 for the cross-node Service.
start_kube_proxy() {
  sm_kube_proxy node1
  k apply -f - >/dev/null <<'EOF'
{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "default"},
 "spec": {"ports": [{"port": 80, "targetPort": 8080, "protocol": "TCP"}]}}
EOF
}

# rejected_for NODE REASON: NODE's daemon reports a peer rejected for REASON.
rejected_for() {
  [ "$(sm_api "$1" vxlan daemon/status | jq -r --arg r "$2" '.network.peers.rejections[$r] // 0')" -ge 1 ]
}

# hostile_node (vxlan): a Node object claiming node1's address and the podCIDR
# 128.0.0.0/1 (through the API server, as a compromised node's token could):
# neither daemon routes it or gives it a neighbour entry, node1 no FDB entry
# to itself; each logs the rejection,
# records a PeerRejected Event on it and counts it by reason; then it goes.
hostile_node() {
  local evil=evil-$RID n other
  phase "vxlan: a hostile Node (node1's InternalIP, podCIDR 128.0.0.0/1) is rejected, not routed"
  k apply -f - >/dev/null <<EOF
{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "$evil"},
 "spec": {"podCIDR": "128.0.0.0/1", "podCIDRs": ["128.0.0.0/1"]},
 "status": {"addresses": [{"type": "InternalIP", "address": "${IP[node1]}"}]}}
EOF
  k get node "$evil" -o 'jsonpath={.spec.podCIDR} {.status.addresses[0].address}' | grep -xF "128.0.0.0/1 ${IP[node1]}" >/dev/null ||
    fail "the API server did not keep the hostile Node as written"
  wait_until 20 has_event "$evil" PeerRejected || fail "no PeerRejected Event on $evil"
  wait_until 10 rejected_for node1 own_address || fail "node1's status: $(sm_api node1 vxlan daemon/status | jq -c .network)"
  wait_until 10 rejected_for node2 pod_cidr_too_wide || fail "node2's status: $(sm_api node2 vxlan daemon/status | jq -c .network)"
  for n in node1 node2; do
    no_route "$n" 128.0.0.0/1 || fail "$n routes the hostile podCIDR: $(sm_peer_routes "$n")"
    if k8s_exec "$DIR" "$n" ip neigh show dev sarena.vxlan | grep "^128\.0\.0\.0 "; then
      fail "$n has a neighbour entry for the hostile Node's VTEP (above)"
    fi
    grep -q "ERROR.*does not route to node $evil" "$DIR/logs/$n.sarena.log" || fail "$n logged no rejection"
    other=node1
    [ "$n" = node1 ] && other=node2
    expect_route "$n" "$other" vxlan || fail "$n lost its real peer's route: $(sm_peer_routes "$n")"
  done
  # node1 never sends overlay frames to itself (node2's entry to node1 is the real peer's).
  if k8s_exec "$DIR" node1 bridge fdb show dev sarena.vxlan | grep -F "dst ${IP[node1]} "; then
    fail "node1 has an FDB entry to its own address for the hostile Node (above)"
  fi
  sm_api node1 vxlan daemon/status | jq -e '.network.vxlan_filter.dropped_packets >= 0' >/dev/null ||
    fail "node1 reports no VXLAN filter"
  k delete node "$evil" >/dev/null
}

for ROUTING in native vxlan; do
  a=a-$ROUTING b=b-$ROUTING
  phase "$ROUTING: daemons ready, NetworkUnavailable=False, peer routes"
  for n in node1 node2; do sm_daemon "$n" "$ROUTING"; done
  for n in node1 node2; do
    wait_until 60 sm_ready "$n" "$ROUTING" || fail "$n's daemon not ready: $(sm_api "$n" "$ROUTING" daemon/health)"
  done
  for n in node1 node2; do
    wait_until 20 marked_up "$n" ||
      fail "$n: NetworkUnavailable is '$(sm_condition "$n")'"
  done
  wait_until 10 expect_route node1 node2 "$ROUTING" || fail "node1 routes: $(sm_peer_routes node1)"
  wait_until 10 expect_route node2 node1 "$ROUTING" || fail "node2 routes: $(sm_peer_routes node2)"
  if [ "$ROUTING" = vxlan ]; then
    k8s_exec "$DIR" node1 ip link show sarena.vxlan | grep "mtu 1450" >/dev/null || fail "sarena.vxlan's MTU is not 1450"
    hostile_node
  fi

  phase "$ROUTING: pods on node1 and node2 by the plugin"
  sm_pod node1 "$ROUTING" "$a"
  sm_pod node2 "$ROUTING" "$b"
  [[ ${POD_IP[$a]} == "${CIDR[node1]%.0/24}".* ]] || fail "$a got ${POD_IP[$a]}, not from ${CIDR[node1]}"
  [[ ${POD_IP[$b]} == "${CIDR[node2]%.0/24}".* ]] || fail "$b got ${POD_IP[$b]}, not from ${CIDR[node2]}"
  EP=$(sm_api node1 "$ROUTING" endpoints | jq -c --arg n "$a" '.[] | select(.pod.name == $n)')
  [ "$(jq -r .pod.uid <<<"$EP")" = "uid-$a-$RID" ] || fail "the registry has no pod UID for $a: $EP"
  HOST_IF=$(jq -r .host_ifname <<<"$EP")
  k8s_exec "$DIR" node1 tc filter show dev "$HOST_IF" ingress | grep from_container >/dev/null ||
    fail "no eBPF program on $a's host veth $HOST_IF"
  want_mtu=1500
  [ "$ROUTING" = native ] || want_mtu=1450
  in_pod "$a" ip link show eth0 | grep "mtu $want_mtu " >/dev/null || fail "$a's eth0 MTU is not $want_mtu"

  if [ "$ROUTING" = native ]; then
    phase "native: a Pod object's labels (and its namespace's) on its endpoint"
    k apply -f - >/dev/null <<'EOF'
{"apiVersion": "v1", "kind": "Pod",
 "metadata": {"name": "labelled", "namespace": "default", "labels": {"app": "web"}},
 "spec": {"nodeName": "node1", "containers": [{"name": "c", "image": "none"}]}}
EOF
    POD_UID[labelled]=$(k get pod labelled -n default -o 'jsonpath={.metadata.uid}')
    [ -n "${POD_UID[labelled]}" ] || fail "the Pod object has no uid"
    sm_pod node1 native labelled
    wait_until 20 shows_labels labelled "app=web" ||
      fail "no labels on labelled's endpoint: $(endpoint_get labelled)"
    k label pod labelled -n default tier=front >/dev/null
    wait_until 20 shows_labels labelled "app=web,tier=front" ||
      fail "the relabel did not reach the endpoint: $(endpoint_get labelled)"
    k label namespace default "team=e2e-$RID" >/dev/null
    wait_until 20 shows_namespace_labels labelled "team=e2e-$RID" ||
      fail "the namespace's label did not reach the endpoint: $(endpoint_get labelled)"
    [ "$("$SARENA_BIN_DIR/sarena" --socket "$(sm_sock node1 native)" -o json endpoint get "labelled-$RID" |
      jq -r '.endpoint.identity.labels.tier')" = front ] || fail "no labels in endpoint get -o json"
    sm_pod_del labelled
    k delete pod labelled -n default --wait=false >/dev/null
    k label namespace default team- >/dev/null
  fi

  phase "$ROUTING: pod <-> pod across nodes: ping and TCP, both ways"
  sm_ping "$a" "$b" || fail "$a -> $b ping"
  sm_ping "$b" "$a" || fail "$b -> $a ping"
  sm_serve "$a"
  sm_serve "$b"
  sm_tcp "$a" "$b"
  sm_tcp "$b" "$a"
  # eBPF host routing on both nodes: each sent its pod's packets straight
  # out of the device the FIB named and delivered the other's straight in.
  for n in node1 node2; do
    hr=$(host_routing "$n")
    jq -e '(.peer_pod_cidrs | length) >= 1
      and (.counters.to_peer_redirected + .counters.to_peer_neigh) > 0
      and .counters.from_peer_redirected > 0' <<<"$hr" >/dev/null ||
      fail "$n ($ROUTING): not on the direct paths to and from the other node's pods: $hr"
    log "$n host routing: $hr"
  done

  phase "$ROUTING: ClusterIP (kube-proxy on node1) -> backend pod on node2"
  [ "$ROUTING" = native ] && start_kube_proxy
  k apply -f - >/dev/null <<EOF
{"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "web", "namespace": "default"},
 "subsets": [{"addresses": [{"ip": "${POD_IP[$b]}"}], "ports": [{"port": 8080, "protocol": "TCP"}]}]}
EOF
  SVC=$(k get service web -o 'jsonpath={.spec.clusterIP}')
  wait_until 30 answers "$a" "http://$SVC/index.html" "$b" ||
    fail "$a -> $SVC:80 did not reach $b on node2"
  k8s_exec "$DIR" node1 iptables-save -t nat | grep "KUBE-SEP.*-j DNAT.*--to-destination ${POD_IP[$b]}:8080" >/dev/null ||
    fail "no kube-proxy DNAT to ${POD_IP[$b]}:8080 on node1"
  # The Services rule across nodes: node1 recorded the flow it translated,
  # and node2's answers came back through node1's host stack.
  hr=$(host_routing node1)
  jq -e '.counters.peer_flows_recorded > 0 and .counters.from_peer_host_flow > 0' <<<"$hr" >/dev/null ||
    fail "node1 ($ROUTING): the Service's answers did not take the host stack: $hr"

  if [ "$ROUTING" = native ]; then
    phase "no podCIDR: STATUS 50 and ADD refused with the reason"
    k8s_stop "$DIR" cp kube-controller-manager
    k8s_netns_node "$DIR" node3
    IP[node3]=$(k8s_node_ip "$DIR" node3)
    sm_daemon node3 native
    wait_until 20 sm_api node3 native daemon/health || fail "node3's daemon does not answer"
    out=$(sm_cni node3 native STATUS x) && fail "STATUS succeeded without a Node object"
    [[ $(cni_error "$out") == "50 "*"Node object node3 does not exist"* ]] || fail "STATUS without a Node: $out"
    k apply -f - >/dev/null <<EOF
{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node3"},
 "status": {"addresses": [{"type": "InternalIP", "address": "${IP[node3]}"}]}}
EOF
    wait_until 20 health_says node3 native "has no spec.podCIDRs" ||
      fail "node3's health: $(sm_api node3 native daemon/health)"
    out=$(sm_cni node3 native STATUS x) && fail "STATUS succeeded without a podCIDR"
    [[ $(cni_error "$out") == "50 "*"node node3 has no spec.podCIDRs"* ]] || fail "STATUS without a podCIDR: $out"
    ip netns add "$(sm_podns c-early)" && sm_podns c-early >>"$DIR/pod-netns"
    out=$(sm_cni node3 native ADD c-early) && fail "ADD succeeded without a podCIDR: $out"
    [[ $(cni_error "$out") == "11 "*"no spec.podCIDRs"* ]] || fail "ADD without a podCIDR: $out"
    log "ADD refused: $(cni_error "$out")"

    phase "third node joins: reachable without restarting the others"
    pids="$(cat "$DIR/run/node1.sarena.pid") $(cat "$DIR/run/node2.sarena.pid")"
    k8s_restart "$DIR" cp kube-controller-manager >/dev/null
    wait_until 90 has_pod_cidr node3 || fail "node3 got no podCIDR"
    CIDR[node3]=$(k get node node3 -o 'jsonpath={.spec.podCIDR}')
    wait_until 30 sm_ready node3 native || fail "node3 not ready: $(sm_api node3 native daemon/health)"
    for n in node1 node2; do
      wait_until 10 expect_route "$n" node3 native || fail "$n has no route to node3: $(sm_peer_routes "$n")"
    done
    wait_until 10 expect_route node3 node1 native || fail "node3 routes: $(sm_peer_routes node3)"
    wait_until 20 marked_up node3 || fail "node3: NetworkUnavailable '$(sm_condition node3)'"
    sm_pod node3 native c-native
    sm_ping "$a" c-native || fail "$a -> c-native ping"
    sm_ping c-native "$b" || fail "c-native -> $b ping"
    sm_tcp c-native "$a"
    [ "$pids" = "$(cat "$DIR/run/node1.sarena.pid") $(cat "$DIR/run/node2.sarena.pid")" ] ||
      fail "the daemons of node1 and node2 were restarted"

    phase "node deleted: its routes gone on every node"
    sm_pod_del c-native
    k8s_stop "$DIR" node3 sarena
    k delete node node3 >/dev/null
    for n in node1 node2; do
      wait_until 20 no_route "$n" "${CIDR[node3]}" || fail "$n still routes ${CIDR[node3]}: $(sm_peer_routes "$n")"
    done
    k8s_node_down "$DIR" node3
  fi

  phase "$ROUTING: node1's daemon SIGKILLed and restarted under a 10/s ping"
  routes_before=$(sm_peer_routes node1)
  log_lines=$(wc -l <"$DIR/logs/node1.sarena.log")
  in_pod "$a" ping -i 0.1 -w 9 "${POD_IP[$b]}" >"$DIR/ping-$ROUTING.out" 2>&1 &
  pinger=$!
  sleep 1
  k8s_restart "$DIR" node1 sarena KILL >/dev/null
  wait_until 60 sm_ready node1 "$ROUTING" || fail "node1 not ready after the restart"
  wait "$pinger" || true
  read -r sent got < <(sed -n 's/^\([0-9]*\) packets transmitted, \([0-9]*\) received.*/\1 \2/p' "$DIR/ping-$ROUTING.out")
  [ "${sent:-0}" -ge 50 ] || fail "ping sent ${sent:-none}: $(tail -3 "$DIR/ping-$ROUTING.out")"
  log "$ROUTING: restart under ping: $got of $sent answered"
  [ $((sent - got)) -le 1 ] || fail "$((sent - got)) of $sent pings lost across the restart"
  [ "$(sm_peer_routes node1)" = "$routes_before" ] || fail "routes changed across the restart"
  if tail -n +"$((log_lines + 1))" "$DIR/logs/node1.sarena.log" | grep "peer routing: "; then
    fail "the restarted daemon changed peer routing (above)"
  fi
  sm_tcp "$a" "$b"
  [ "$(sm_condition node1)" = "False SarenaIsUp" ] || fail "node1: NetworkUnavailable '$(sm_condition node1)'"

  if [ "$ROUTING" = vxlan ]; then
    phase "podCIDR changed under a live pod: refused (Event, STATUS 50), adopted once it is gone"
    k delete node node2 >/dev/null
    wait_until 20 health_says node2 vxlan "does not exist" || fail "node2: $(sm_api node2 vxlan daemon/health)"
    moved=10.244.200.0/24
    k apply -f - >/dev/null <<EOF
{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node2"},
 "spec": {"podCIDR": "$moved", "podCIDRs": ["$moved"]},
 "status": {"addresses": [{"type": "InternalIP", "address": "${IP[node2]}"}]}}
EOF
    wait_until 20 health_says node2 vxlan "refusing to re-address" || fail "node2: $(sm_api node2 vxlan daemon/health)"
    out=$(sm_cni node2 vxlan STATUS x) && fail "STATUS succeeded after a refused podCIDR change"
    [[ $(cni_error "$out") == "50 "*"from [${CIDR[node2]}] to [$moved]"* ]] || fail "STATUS: $out"
    wait_until 20 has_event node2 PodCIDRChangeRefused || fail "no PodCIDRChangeRefused Event on node2"
    grep -q "ERROR.*refusing to re-address" "$DIR/logs/node2.sarena.log" || fail "no error logged for the refusal"
    sm_pod_del "$b" # deletions are still served
    wait_until 20 sm_ready node2 vxlan || fail "node2 did not adopt $moved: $(sm_api node2 vxlan daemon/health)"
    old_cidr=${CIDR[node2]} CIDR[node2]=$moved
    wait_until 10 expect_route node1 node2 vxlan || fail "node1 routes: $(sm_peer_routes node1)"
    no_route node1 "$old_cidr" || fail "node1 still routes node2's old $old_cidr"
    wait_until 20 marked_up node2 || fail "the new node2: NetworkUnavailable '$(sm_condition node2)'"
    b=b2-$ROUTING
    sm_pod node2 vxlan "$b"
    [[ ${POD_IP[$b]} == 10.244.200.* ]] || fail "$b got ${POD_IP[$b]}, not from $moved"
    sm_ping "$a" "$b" || fail "$a -> $b ping after the podCIDR change"
  fi

  phase "$ROUTING: DEL, daemons stopped"
  sm_pod_del "$a"
  sm_pod_del "$b"
  [ "$(sm_api node1 "$ROUTING" endpoints | jq length)" = 0 ] || fail "node1 still has endpoints"
  for n in node1 node2; do k8s_stop "$DIR" "$n" sarena; done
done
phase "down"
