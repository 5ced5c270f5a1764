#!/usr/bin/env bash
# The e2e/k8s harness works: a control plane comes up; a kubelet node with the
# reference bridge + host-local plugins runs busybox pods; a second pod
# reaches the first through a ClusterIP Service (kube-proxy, iptables mode);
# an image written by scripts/mkimage.py (a binary + its ldd libraries) runs
# as a pod; a bare netns node is reachable over the underlay and gets a
# podCIDR when registered; after down nothing of the cluster is left and the
# host's CNI dirs and sysctls are as before. Prints the time of each phase.
# Usage (root, after scripts/setup-k8s.sh): e2e/k8s/test-cluster-smoke.sh
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
# shellcheck source=e2e/k8s/lib.sh
. "$HERE/lib.sh"

log() { printf '[k8s-smoke] %s\n' "$*" >&2; }
fail() {
  log "FAIL: $*"
  exit 1
}
[ "$(id -u)" = 0 ] || fail "needs root"
# alive PID: the process exists and is not a zombie waiting for its reaper
alive() { [ -e "/proc/$1" ] && ! grep -q '^State:.*Z' "/proc/$1/status" 2>/dev/null; }

PHASE_WIDTH=34
report() {
  phase_report
  log "total ${SECONDS}s"
}

DIR=$(mktemp -d /tmp/sarena-k8s-smoke.XXXXXX)

# what the host has before, to compare after down
host_state() {
  local k
  for k in $K8S_KUBELET_SYSCTLS; do echo "$k=$(cat "/proc/sys/${k//.//}")"; done
  find /etc/cni/net.d -maxdepth 1 -printf '%p %s %T@\n' 2>&1 | sort
  for k in /opt/cni /var/lib/kubelet /var/lib/cni /var/log/pods /run/containerd /var/run/kubernetes; do
    if [ -e "$k" ]; then echo "$k exists"; fi
  done
}
BEFORE=$(host_state)

finish() {
  local rc=$?
  set +e
  trap - EXIT
  if [ "$rc" != 0 ]; then
    log "failed; node and control-plane log tails:"
    for f in "$DIR"/logs/*.log; do
      [ -s "$f" ] && { echo "---- $f"; tail -n 15 "$f"; } >&2
    done
    k get pods -o wide >&2 2>/dev/null
  fi
  k8s_down "$DIR" >/dev/null 2>&1
  if [ "${SARENA_K8S_KEEP:-0}" = 1 ]; then log "SARENA_K8S_KEEP=1: keeping $DIR"; else rm -rf --one-file-system "$DIR"; fi
  if [ "$rc" = 0 ]; then log PASS; else log "FAILED (exit $rc)"; fi
  exit "$rc"
}
trap finish EXIT
trap 'exit 130' INT TERM

phase "mkimage: deterministic ldd image"
mkdir -p "$DIR/img"
for n in 1 2; do
  python3 "$REPO/scripts/mkimage.py" -o "$DIR/img/ip-$n.tar" -t sarena.local/smoke-ip:1 \
    --bin /bin/ip "$(command -v ip)" --dir /tmp --chmod 1777 /tmp --entrypoint /bin/ip >/dev/null
done
cmp -s "$DIR/img/ip-1.tar" "$DIR/img/ip-2.tar" || fail "mkimage.py wrote different bytes for the same inputs"

phase "up (etcd, apiserver, kcm, scheduler)"
k8s_up "$DIR"
[ "$(k get --raw /readyz)" = ok ] || fail "/readyz is not ok"
[ -s "$DIR/kubeconfig" ] || fail "no kubeconfig"

phase "kubelet node: registered"
k8s_kubelet_node "$DIR" node1 --image "$DIR/img/ip-1.tar"
CIDR=$(k get node node1 -o 'jsonpath={.spec.podCIDR}')
[[ $CIDR == 10.244.*.0/24 ]] || fail "node1 podCIDR '$CIDR' not a /24 of 10.244.0.0/16"
log "node1 at $(k8s_node_ip "$DIR" node1), podCIDR $CIDR"

phase "kubelet node: Ready (bridge conflist)"
[ "$(k get node node1 -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}')" != True ] ||
  fail "node1 Ready before it had a CNI config"
cat >"$DIR/nodes/node1/net.d/10-bridge.conflist" <<EOF
{"cniVersion": "0.4.0", "name": "smoke", "plugins": [
  {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": true, "hairpinMode": true,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "$CIDR"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
  {"type": "portmap", "capabilities": {"portMappings": true}}]}
EOF
k wait --for=condition=Ready node/node1 --timeout=120s >/dev/null

phase "pods Running"
IMG=sarena.local/busybox:1.35
k run web --image=$IMG --image-pull-policy=Never --restart=Never --labels=app=web --port=8080 -- \
  sh -c 'mkdir -p /www && hostname >/www/index.html && exec httpd -f -p 8080 -h /www' >/dev/null
k run client --image=$IMG --image-pull-policy=Never --restart=Never -- sleep 3600 >/dev/null
k expose pod web --port=80 --target-port=8080 >/dev/null
k wait --for=condition=Ready pod/web pod/client --timeout=180s >/dev/null
WEB_IP=$(k get pod web -o 'jsonpath={.status.podIP}')
CLIENT_IP=$(k get pod client -o 'jsonpath={.status.podIP}')
log "web $WEB_IP, client $CLIENT_IP"
for ip in "$WEB_IP" "$CLIENT_IP"; do
  [[ $ip == "${CIDR%.0/24}".* ]] || fail "pod address $ip not in $CIDR"
done
[ "$WEB_IP" != "$CLIENT_IP" ] || fail "both pods have $WEB_IP"

phase "ClusterIP Service from a pod"
SVC=$(k get service web -o 'jsonpath={.spec.clusterIP}')
[[ $SVC == 10.* ]] || fail "service web has no ClusterIP"
got=""
for _ in $(seq 40); do # until kube-proxy has programmed the endpoint
  got=$(k exec client -- timeout 5 wget -qO- "http://$SVC/" 2>/dev/null || true)
  [ "$got" = web ] && break
  sleep 0.5
done
[ "$got" = web ] || fail "client -> $SVC:80 answered '$got', want 'web'"
k8s_exec "$DIR" node1 iptables-save -t nat | grep "KUBE-SVC-.*default/web" >/dev/null ||
  fail "no kube-proxy rule for default/web in node1's netns"
# the node reaches the service too (its own kube-proxy rules)
got=$(k8s_exec "$DIR" node1 curl -s --max-time 5 "http://$SVC/" || true)
[ "$got" = web ] || fail "node1 -> $SVC:80 answered '$got', want 'web'"

phase "kubelet restarted: pods keep serving"
OLD=$(cat "$DIR/run/node1.kubelet.pid")
NEW=$(k8s_restart "$DIR" node1 kubelet)
if [ "$NEW" = "$OLD" ] || alive "$OLD"; then fail "kubelet restart: old pid $OLD, new $NEW"; fi
for _ in $(seq 60); do
  k8s_exec "$DIR" node1 curl -sf --max-time 2 http://127.0.0.1:10248/healthz >/dev/null 2>&1 && break
  sleep 0.5
done
k8s_exec "$DIR" node1 curl -sf --max-time 2 http://127.0.0.1:10248/healthz >/dev/null || fail "kubelet not healthy after restart"
got=$(k exec client -- timeout 5 wget -qO- "http://$SVC/" 2>/dev/null || true)
[ "$got" = web ] || fail "after the kubelet restart client -> $SVC answered '$got'"

phase "mkimage image runs as a pod"
k run ipcheck --image=sarena.local/smoke-ip:1 --image-pull-policy=Never --restart=Never -- -4 -o addr show dev eth0 >/dev/null
for _ in $(seq 120); do
  [ "$(k get pod ipcheck -o 'jsonpath={.status.phase}')" = Succeeded ] && break
  sleep 0.5
done
[ "$(k get pod ipcheck -o 'jsonpath={.status.phase}')" = Succeeded ] || fail "ipcheck pod did not succeed"
k logs ipcheck | grep "inet ${CIDR%.0/24}\." >/dev/null || fail "ipcheck: ip printed no address in $CIDR"

phase "bare netns node over the underlay"
k8s_netns_node "$DIR" bare1
BARE_IP=$(k8s_node_ip "$DIR" bare1)
k8s_exec "$DIR" cp ping -c 1 -W 2 "$BARE_IP" >/dev/null || fail "control plane cannot ping bare1 at $BARE_IP"
k8s_exec "$DIR" bare1 ping -c 1 -W 2 "$(k8s_node_ip "$DIR" node1)" >/dev/null || fail "bare1 cannot ping node1"
k8s_exec "$DIR" bare1 curl -sk --max-time 5 https://172.30.0.1:6443/readyz >/dev/null ||
  fail "bare1 cannot reach the apiserver"
BARE_CIDR=$(k8s_register_node "$DIR" bare1)
if ! [[ $BARE_CIDR == 10.244.*.0/24 ]] || [ "$BARE_CIDR" = "$CIDR" ]; then
  fail "bare1 podCIDR '$BARE_CIDR' (node1 has $CIDR)"
fi
log "bare1 at $BARE_IP, podCIDR $BARE_CIDR"
PID=$(k8s_start "$DIR" bare1 sleeper sleep 600)
[ "$(readlink "/proc/$PID/ns/net")" != "$(readlink /proc/self/ns/net)" ] ||
  fail "k8s_start ran its command in the host netns"
PID2=$(k8s_start "$DIR" bare1 sleeper2 sleep 600)
k8s_stop "$DIR" bare1 sleeper2 KILL
! alive "$PID2" || fail "k8s_stop left bare1.sleeper2 running"

phase "RBAC: a service account's kubeconfig"
k create serviceaccount -n kube-system node-reader >/dev/null
k create clusterrole node-reader --verb=get,list,watch --resource=nodes >/dev/null
k create clusterrolebinding node-reader --clusterrole=node-reader \
  --serviceaccount=kube-system:node-reader >/dev/null
k8s_sa_kubeconfig "$DIR" kube-system node-reader "$DIR/node-reader.kubeconfig"
# from the bare node, as a daemon outside the cluster would
k8s_exec "$DIR" bare1 "$SARENA_K8S_BIN/kubectl" --kubeconfig "$DIR/node-reader.kubeconfig" \
  --cache-dir "$DIR/kubectl-cache" get node bare1 >/dev/null || fail "node-reader cannot get nodes"
if k8s_exec "$DIR" bare1 "$SARENA_K8S_BIN/kubectl" --kubeconfig "$DIR/node-reader.kubeconfig" \
  --cache-dir "$DIR/kubectl-cache" get secrets -A >/dev/null 2>&1; then
  fail "node-reader can list secrets: RBAC is not enforced"
fi

phase "down"
k8s_down "$DIR"
left=$(k8s_leftovers "$DIR") || fail "left after down: $left"
! alive "$PID" || fail "k8s_start's daemon survived down"
AFTER=$(host_state)
[ "$BEFORE" = "$AFTER" ] || fail "host state changed: $(diff <(echo "$BEFORE") <(echo "$AFTER"))"
report
