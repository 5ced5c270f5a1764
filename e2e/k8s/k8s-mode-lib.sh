# shellcheck shell=bash
# Helpers of the Kubernetes-mode tests (e2e/k8s/test-k8s-mode-cluster.sh,
# test-k8s-egress.sh): Sarena daemons in netns nodes of an e2e/k8s cluster,
# pods networked on them by the real plugin, traffic between them, an outside
# host on the underlay. Sourced after e2e/k8s/lib.sh with REPO set; sm_begin
# sets DIR (the cluster directory), RID (a unique run id) and SARENA_BIN_DIR,
# sm_service_account SARENA_KUBECONFIG. Every object is named after RID and
# removed by sm_cleanup, also after a failure.

log() { printf '[k8s-mode] %s\n' "$*" >&2; }
fail() {
  log "FAIL: $*"
  exit 1
}


# --- set-up shared by the tests ------------------------------------------------

# sm_bins: SARENA_BIN_DIR with sarena-daemon, sarena-cni and sarena (default:
# target/sarena-bin, else target/release, else target/debug, else
# scripts/build-release.sh); exported.
sm_bins() {
  local d b
  if [ -z "${SARENA_BIN_DIR:-}" ]; then
    for d in "$REPO/target/sarena-bin" "$REPO/target/release" "$REPO/target/debug"; do
      if [ -x "$d/sarena-daemon" ] && [ -x "$d/sarena-cni" ] && [ -x "$d/sarena" ]; then SARENA_BIN_DIR=$d && break; fi
    done
  fi
  if [ -z "${SARENA_BIN_DIR:-}" ]; then
    SARENA_BIN_DIR=$(bash "$REPO/scripts/build-release.sh")
  fi
  export SARENA_BIN_DIR
  for b in sarena-daemon sarena-cni sarena; do [ -x "$SARENA_BIN_DIR/$b" ] || fail "$SARENA_BIN_DIR/$b missing"; done
}

# sm_begin MODE NAME: the start of a Kubernetes-mode test: root; only MODE
# sarena runs (Kubernetes mode is Sarena's own; others pass at once);
# binaries (sm_bins) and setup-k8s.sh; RID and DIR (/tmp/sarena-NAME.XXXXXX);
# the EXIT trap (sm_finish).
sm_begin() {
  [ "$(id -u)" = 0 ] || fail "needs root"
  if [ "$1" != sarena ]; then
    log "mode $1: Kubernetes mode is Sarena's own; nothing to compare"
    exit 0
  fi
  phase "build, setup-k8s.sh (cached)"
  sm_bins
  bash "$REPO/scripts/setup-k8s.sh" >/dev/null
  RID=$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
  DIR=$(mktemp -d "/tmp/sarena-$2.XXXXXX")
  trap sm_finish EXIT
  trap 'exit 130' INT TERM
}

# sm_finish: the EXIT trap: log tails on failure, sm_cleanup, the cluster
# down, DIR removed (kept with SARENA_K8S_KEEP=1), phase times, the verdict.
sm_finish() {
  local rc=$? f
  set +e
  trap - EXIT
  if [ "$rc" != 0 ]; then
    log "failed; log tails:"
    for f in "$DIR"/logs/*sarena*.log "$DIR"/logs/cp.kube-controller-manager.log "$DIR"/nodes/*/sarena-*/cni.log; do
      [ -s "$f" ] && { echo "---- $f"; tail -n 25 "$f"; } >&2
    done
  fi
  sm_cleanup
  k8s_down "$DIR" >/dev/null 2>&1
  if [ "${SARENA_K8S_KEEP:-0}" = 1 ]; then log "keeping $DIR"; else rm -rf --one-file-system "$DIR"; fi
  phase_report
  if [ "$rc" = 0 ]; then log "PASS (${SECONDS}s)"; else log "FAILED (exit $rc)"; fi
  exit "$rc"
}

# sm_service_account: the daemon's service account kube-system/sarena with
# the deployment's own RBAC (deploy/kubernetes/00-rbac.yaml: list and watch
# nodes, pods, namespaces, services, networkpolicies; patch nodes/status; create events in default) and
# its kubeconfig, in SARENA_KUBECONFIG.
sm_service_account() {
  k apply -f "$REPO/deploy/kubernetes/00-rbac.yaml" >/dev/null
  SARENA_KUBECONFIG=$DIR/sarena.kubeconfig
  for _ in $(seq 40); do # the controller-manager writes the token secret
    k8s_sa_kubeconfig "$DIR" kube-system sarena "$SARENA_KUBECONFIG" 2>/dev/null && break
    sleep 0.25
  done
  [ -s "$SARENA_KUBECONFIG" ] || fail "no kubeconfig for kube-system/sarena"
}

# sm_kube_proxy NODE: kube-proxy (iptables mode) on NODE, healthy.
sm_kube_proxy() {
  local node=$1 ip
  ip=$(k8s_node_ip "$DIR" "$node")
  cat >"$DIR/nodes/$node/kube-proxy.yaml" <<EOF2
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $DIR/kubeconfig}
hostnameOverride: $node
bindAddress: $ip
clusterCIDR: 10.244.0.0/16
mode: iptables
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
oomScoreAdj: 0
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
EOF2
  k8s_start "$DIR" "$node" service-proxy "$SARENA_K8S_BIN/kube-proxy" --config="$DIR/nodes/$node/kube-proxy.yaml" >/dev/null
  wait_until 30 k8s_exec "$DIR" "$node" curl -sf http://127.0.0.1:10256/healthz || fail "kube-proxy on $node not healthy"
}

# --- Sarena daemons -------------------------------------------------------------

sm_site() { echo "$DIR/nodes/$1/sarena-$2"; }       # NODE ROUTING: the daemon's files
sm_sock() { echo "$(sm_site "$1" "$2")/sarena.sock"; }
sm_pins() { echo "/sys/fs/bpf/sarena-e2e-$RID-$1-$2"; }

# sm_daemon NODE ROUTING [TOML]: start sarena-daemon --kubernetes in NODE's
# netns, its own state dir, socket and bpffs pin dir, with the RBAC-limited
# kubeconfig; TOML (top-level keys, e.g. "masquerade = false") is added to
# its configuration.
sm_daemon() {
  local node=$1 routing=$2 site
  site=$(sm_site "$node" "$routing")
  mkdir -p "$site"
  printf 'dataplane = "ebpf"\n%s\n[kubernetes]\nrouting = "%s"\n' "${3:-}" "$routing" >"$site/config.toml"
  sm_pins "$node" "$routing" >>"$DIR/pin-dirs"
  k8s_start "$DIR" "$node" sarena "$SARENA_BIN_DIR/sarena-daemon" --kubernetes \
    --kubeconfig "$SARENA_KUBECONFIG" --node-name "$node" --config "$site/config.toml" \
    --state-dir "$site/state" --socket "$(sm_sock "$node" "$routing")" \
    --bpf-pin-dir "$(sm_pins "$node" "$routing")" >/dev/null
}

# sm_api NODE ROUTING PATH: GET the daemon's API.
sm_api() { curl -sf --max-time 5 --unix-socket "$(sm_sock "$1" "$2")" "http://sarena/v1/$3"; }

sm_ready() { [ "$(sm_api "$1" "$2" daemon/health | jq -r .ready)" = true ]; }

# sm_condition NODE: "STATUS REASON" of the Node's NetworkUnavailable condition.
sm_condition() {
  k get node "$1" -o json |
    jq -r '.status.conditions[]? | select(.type == "NetworkUnavailable") | "\(.status) \(.reason)"'
}

# sm_peer_routes NODE: the node's Sarena peer routes (proto 91), both families, sorted.
sm_peer_routes() {
  { k8s_exec "$DIR" "$1" ip -4 route show proto 91; k8s_exec "$DIR" "$1" ip -6 route show proto 91; } |
    sed 's/ *$//' | sort
}

# --- pods: a netns networked by the real plugin, run in the node's netns -----------

# sm_cni NODE ROUTING COMMAND POD: run sarena-cni as a runtime would, on NODE;
# prints the plugin's stdout, returns its exit status.
sm_cni() {
  local node=$1 routing=$2 command=$3 pod=$4 site conf
  site=$(sm_site "$node" "$routing")
  conf=$(jq -nc --arg sock "$(sm_sock "$node" "$routing")" --arg dq "$site/delete-queue" \
    --arg log "$site/cni.log" \
    '{cniVersion: "1.1.0", name: "sarena", type: "sarena-cni",
      "daemon-endpoint": $sock, "delete-queue-dir": $dq, "log-file": $log}')
  k8s_exec "$DIR" "$node" env CNI_COMMAND="$command" CNI_CONTAINERID="$pod-$RID" \
    CNI_NETNS="/var/run/netns/$(sm_podns "$pod")" CNI_IFNAME=eth0 CNI_PATH="$SARENA_BIN_DIR" \
    CNI_ARGS="K8S_POD_NAMESPACE=default;K8S_POD_NAME=$pod;K8S_POD_UID=${POD_UID[$pod]:-uid-$pod-$RID}" \
    "$SARENA_BIN_DIR/sarena-cni" <<<"$conf"
}

sm_podns() { echo "sk8sp-$RID-$1"; }

# POD_UID[POD]: the uid ADD passes for POD (a Pod object's real one); default uid-POD-RID.
declare -gA POD_UID

# sm_pod NODE ROUTING POD: a pod netns, ADDed; sets POD_IP[POD] (and
# POD_IP6[POD] when it got an IPv6 address too).
declare -gA POD_IP POD_IP6 POD_NODE POD_ROUTING
sm_pod() {
  local node=$1 routing=$2 pod=$3 ns result
  ns=$(sm_podns "$pod")
  ip netns add "$ns"
  echo "$ns" >>"$DIR/pod-netns"
  ip -n "$ns" link set lo up
  result=$(sm_cni "$node" "$routing" ADD "$pod") || fail "ADD $pod on $node: $result"
  POD_IP[$pod]=$(jq -r '.ips[0].address | split("/")[0]' <<<"$result")
  # shellcheck disable=SC2034 # read by the tests
  POD_IP6[$pod]=$(jq -r '[.ips[].address | select(contains(":")) | split("/")[0]][0] // empty' <<<"$result")
  POD_NODE[$pod]=$node POD_ROUTING[$pod]=$routing
}

# sm_pod_del POD: DEL, then the netns goes.
sm_pod_del() {
  local pod=$1
  sm_cni "${POD_NODE[$pod]}" "${POD_ROUTING[$pod]}" DEL "$pod" >/dev/null || fail "DEL $pod"
  ip netns del "$(sm_podns "$pod")"
}

# in_pod POD CMD...: CMD in the pod's netns.
in_pod() {
  local pod=$1
  shift
  ip netns exec "$(sm_podns "$pod")" "$@"
}

# sm_ping FROM TO: FROM pings TO's address (4 s at most).
sm_ping() { in_pod "$1" ping -c 1 -w 4 "${POD_IP[$2]}" >/dev/null; }

# sm_serve POD: busybox httpd on POD:8080 serving /index.html (the pod's
# name) and /big (1 MiB), until the cluster goes.
sm_serve() {
  local pod=$1 www=$DIR/www-$1
  mkdir -p "$www"
  echo "$pod" >"$www/index.html"
  head -c 1048576 /dev/urandom >"$www/big"
  # not through in_pod: `&` on a function forks a subshell, whose pid is not
  # the server's (sm_cleanup would kill the subshell and leave httpd running)
  ip netns exec "$(sm_podns "$pod")" busybox httpd -f -p 8080 -h "$www" &
  echo $! >>"$DIR/servers"
  wait_until 10 in_pod "$pod" curl -sf --max-time 1 http://127.0.0.1:8080/index.html ||
    fail "httpd did not start in $pod"
}

# sm_tcp FROM TO: FROM fetches TO's index (its name) and 1 MiB intact over TCP.
sm_tcp() {
  local from=$1 to=$2 got
  got=$(in_pod "$from" curl -sf --max-time 10 "http://${POD_IP[$to]}:8080/index.html") ||
    fail "$from -> $to:8080 over TCP failed"
  [ "$got" = "$to" ] || fail "$from -> $to:8080 answered '$got'"
  got=$(in_pod "$from" curl -sf --max-time 20 "http://${POD_IP[$to]}:8080/big" | sha256sum)
  [ "$got" = "$(sha256sum <"$DIR/www-$to/big")" ] || fail "$from -> $to: 1 MiB arrived damaged or short"
}

# sm_cleanup: every object of the run (the cluster itself is k8s_down's).
sm_cleanup() {
  local f
  if [ -s "$DIR/servers" ]; then while read -r f; do kill "$f" 2>/dev/null; done <"$DIR/servers"; fi
  if [ -s "$DIR/pod-netns" ]; then while read -r f; do ip netns del "$f" 2>/dev/null; done <"$DIR/pod-netns"; fi
  if [ -s "$DIR/pin-dirs" ]; then while read -r f; do rm -rf "$f"; done <"$DIR/pin-dirs"; fi
  return 0
}

# --- the underlay: an outside host, its MTU -------------------------------------

OUTSIDE_IP=172.30.0.200 OUTSIDE_IP6=fd00:172:30::200

sm_outside_ns() { echo "sk8so-$RID"; }

# sm_outside: a host on the underlay that is not part of the cluster: netns
# sk8so-RID with OUTSIDE_IP/24 (and OUTSIDE_IP6/64 on a dual-stack cluster)
# on the underlay bridge and no other route (none to any pod CIDR), running a
# TCP service on 8081 that answers with the address the connection came from
# (over IPv6 too, on a dual-stack cluster).
sm_outside() {
  local ns
  ns=$(sm_outside_ns)
  ip netns add "$ns"
  echo "$ns" >>"$DIR/pod-netns"
  ip -n "$ns" link set lo up
  k8s_exec "$DIR" cp ip link add "o$RID" type veth peer name eth0 netns "$ns"
  k8s_exec "$DIR" cp ip link set "o$RID" master underlay up
  ip -n "$ns" addr add "$OUTSIDE_IP/24" dev eth0
  if sm_dual_stack; then ip -n "$ns" addr add "$OUTSIDE_IP6/64" dev eth0 nodad; fi
  ip -n "$ns" link set eth0 up
  sm_whoami_in "$ns" 8081
  if sm_dual_stack; then sm_whoami6_in "$ns" 8081; fi
}

# sm_dual_stack: the cluster in $DIR is dual-stack (SARENA_K8S_DUAL_STACK=1 at up).
sm_dual_stack() { grep -qx 'DUAL_STACK=1' "$DIR/state.env"; }

# sm_whoami_in NETNS PORT: a TCP service on PORT in NETNS (a path under
# /run/netns) answering with the peer's address, until the cluster goes.
sm_whoami_in() {
  # shellcheck disable=SC2016 # socat expands $SOCAT_PEERADDR per connection
  ip netns exec "$1" socat "TCP-LISTEN:$2,fork,reuseaddr" SYSTEM:'echo $SOCAT_PEERADDR' &
  echo $! >>"$DIR/servers"
  wait_until 10 ip netns exec "$1" sh -c "socat -T2 - TCP:127.0.0.1:$2 </dev/null | grep -q 127.0.0.1" ||
    fail "whoami service on $1:$2 did not start"
}

# sm_whoami6_in NETNS PORT: the same over IPv6 only (socat prints the peer
# fully expanded, in brackets: sm_seen_as compresses it).
sm_whoami6_in() {
  # shellcheck disable=SC2016 # socat expands $SOCAT_PEERADDR per connection
  ip netns exec "$1" socat "TCP6-LISTEN:$2,fork,reuseaddr,ipv6only=1" SYSTEM:'echo $SOCAT_PEERADDR' &
  echo $! >>"$DIR/servers"
  wait_until 10 ip netns exec "$1" sh -c "socat -T2 - 'TCP6:[::1]:$2' </dev/null | grep -q 0001" ||
    fail "IPv6 whoami service on $1:$2 did not start"
}

# sm_seen_as NETNS ADDR PORT: connect from NETNS to ADDR:PORT's whoami service
# (ADDR of either family); prints the source address it saw, compressed
# (fails when it cannot connect in 3 s).
sm_seen_as() {
  local target="TCP:$2:$3" seen
  case $2 in *:*) target="TCP6:[$2]:$3" ;; esac
  seen=$(ip netns exec "$1" socat -T3 - "$target,connect-timeout=3" </dev/null) && [ -n "$seen" ] || return 1
  python3 -c 'import ipaddress, sys; print(ipaddress.ip_address(sys.argv[1].strip("[]")))' "$seen"
}

# sm_underlay_mtu MTU NODE...: the underlay's MTU: the bridge, every port of
# it in the control-plane netns, and each NODE's eth0 (and the outside host's).
sm_underlay_mtu() {
  local mtu=$1 port node
  shift
  for port in $(k8s_exec "$DIR" cp ip -o link show master underlay | awk -F': ' '{print $2}' | cut -d@ -f1); do
    k8s_exec "$DIR" cp ip link set "$port" mtu "$mtu"
  done
  k8s_exec "$DIR" cp ip link set underlay mtu "$mtu"
  for node in "$@"; do k8s_exec "$DIR" "$node" ip link set eth0 mtu "$mtu"; done
  if [ -e "/run/netns/$(sm_outside_ns)" ]; then ip -n "$(sm_outside_ns)" link set eth0 mtu "$mtu"; fi
}
