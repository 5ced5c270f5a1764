# shellcheck shell=bash
# Helpers of the Kubernetes-mode tests (e2e/k8s/test-k8s-mode-*.sh): Sarena
# daemons in netns nodes of an e2e/k8s cluster, pods networked on them by the
# real plugin, traffic between them. Sourced after e2e/k8s/lib.sh, with DIR
# (the cluster directory), RID (a unique run id), SARENA_BIN_DIR and
# SARENA_KUBECONFIG set. Every object is named after RID and removed by
# sm_cleanup, also after a failure.

log() { printf '[k8s-mode] %s\n' "$*" >&2; }
fail() {
  log "FAIL: $*"
  exit 1
}


# --- Sarena daemons -------------------------------------------------------------

sm_site() { echo "$DIR/nodes/$1/sarena-$2"; }       # NODE ROUTING: the daemon's files
sm_sock() { echo "$(sm_site "$1" "$2")/sarena.sock"; }
sm_pins() { echo "/sys/fs/bpf/sarena-e2e-$RID-$1-$2"; }

# sm_daemon NODE ROUTING: start sarena-daemon --kubernetes in NODE's netns, its
# own state dir, socket and bpffs pin dir, with the RBAC-limited kubeconfig.
sm_daemon() {
  local node=$1 routing=$2 site
  site=$(sm_site "$node" "$routing")
  mkdir -p "$site"
  printf 'dataplane = "ebpf"\n[kubernetes]\nrouting = "%s"\n' "$routing" >"$site/config.toml"
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

# sm_pod NODE ROUTING POD: a pod netns, ADDed; sets POD_IP[POD].
declare -gA POD_IP POD_NODE POD_ROUTING
sm_pod() {
  local node=$1 routing=$2 pod=$3 ns result
  ns=$(sm_podns "$pod")
  ip netns add "$ns"
  echo "$ns" >>"$DIR/pod-netns"
  ip -n "$ns" link set lo up
  result=$(sm_cni "$node" "$routing" ADD "$pod") || fail "ADD $pod on $node: $result"
  POD_IP[$pod]=$(jq -r '.ips[0].address | split("/")[0]' <<<"$result")
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
  in_pod "$pod" busybox httpd -f -p 8080 -h "$www" &
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
