#!/bin/bash
# The test cluster's DNS (sarena-test-dns, e2e/k8s-dns) on a real cluster:
# one kubelet node with the reference bridge + host-local plugins, the DNS
# deployed by e2e/k8s/dns-lib.sh, then busybox's nslookup against
# 10.96.0.10: ClusterIP and headless Services, an endpoint hostname, SRV,
# PTR, the schema version, NXDOMAIN and REFUSED. ~1 min.
# Usage (root): e2e/k8s/test-dns.sh
#   SARENA_BIN_DIR=DIR  holds sarena-test-dns (default: cargo build --release)
#   SARENA_K8S_KEEP=1   keep the cluster directory (kept anyway on failure)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=e2e/k8s/lib.sh
. "$HERE/lib.sh"
# shellcheck source=e2e/k8s/dns-lib.sh
. "$HERE/dns-lib.sh"

log() { printf '[k8s-dns] %s\n' "$*" >&2; }
fail() {
  log "FAIL: $*"
  exit 1
}
[ "$(id -u)" = 0 ] || fail "needs root"

DIR=$(mktemp -d /tmp/sarena-k8s-dns.XXXXXX)
finish() {
  local rc=$?
  set +e
  trap - EXIT
  if [ "$rc" != 0 ]; then
    k8s_kubectl "$DIR" get pods -A -o wide
    k8s_kubectl "$DIR" -n kube-system logs -l k8s-app=kube-dns --tail 40
  fi
  k8s_down "$DIR"
  k8s_leftovers "$DIR" || rc=1
  if [ "$rc" = 0 ] && [ "${SARENA_K8S_KEEP:-0}" != 1 ]; then rm -rf "$DIR"; else log "kept $DIR"; fi
  exit "$rc"
}
trap finish EXIT
k() { k8s_kubectl "$DIR" "$@"; }

log "control plane and node1 (bridge + host-local)"
k8s_up "$DIR"
k8s_kubelet_node "$DIR" node1 --image "$SARENA_K8S_IMAGES/busybox.tar"
CIDR=$(cat "$DIR/nodes/node1/podcidrs")
cat >"$DIR/nodes/node1/net.d/10-bridge.conflist" <<JSON
{"cniVersion": "0.4.0", "name": "reference", "plugins": [
  {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "$CIDR"}]], "routes": [{"dst": "0.0.0.0/0"}]}}]}
JSON
ready() { [ "$(k get node node1 -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}')" = True ]; }
wait_until 90 ready || fail "node1 not Ready"

log "DNS image and Deployment"
dns_image "$DIR/test-dns.tar"
k8s_import "$DIR" node1 "$DIR/test-dns.tar"
dns_deploy "$DIR"

log "client pod and a headless Service"
k apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: client, namespace: default}
spec:
  containers:
  - {name: c, image: sarena.local/busybox:1.35, imagePullPolicy: Never, command: [sleep, "3600"]}
---
apiVersion: v1
kind: Service
metadata: {name: hl, namespace: default}
spec:
  clusterIP: None
  selector: {app: hl}
  ports: [{name: http, port: 80, protocol: TCP}]
---
apiVersion: v1
kind: Pod
metadata: {name: hl-0, namespace: default, labels: {app: hl}}
spec:
  hostname: web-0
  subdomain: hl
  containers:
  - {name: c, image: sarena.local/busybox:1.35, imagePullPolicy: Never, command: [sleep, "3600"]}
YAML
k wait --for condition=Ready pod/client pod/hl-0 --timeout 60s >/dev/null
HL_IP=$(k get pod hl-0 -o 'jsonpath={.status.podIP}')
hl_listed() { [ -n "$(k get endpoints hl -o 'jsonpath={.subsets[*].addresses[*].ip}')" ]; }
wait_until 30 hl_listed || fail "no endpoints for hl"

# expect WANT ARGS...: nslookup ARGS against the cluster DNS prints WANT.
expect() {
  local want=$1 out
  shift
  out=$(k exec client -- nslookup "$@" 10.96.0.10 2>&1 || true)
  grep -qF -- "$want" <<<"$out" || fail "nslookup $*: want '$want', got: $out"
  log "ok: $* -> $want"
}
expect "Address: 10.96.0.1" kubernetes.default.svc.cluster.local
expect "Address: 10.96.0.10" KUBE-DNS.kube-system.svc.cluster.local
expect "Address: $HL_IP" hl.default.svc.cluster.local
expect "Address: $HL_IP" web-0.hl.default.svc.cluster.local
expect "service = 0 100 80 web-0.hl.default.svc.cluster.local" -type=srv _http._tcp.hl.default.svc.cluster.local
expect "service = 0 100 443 kubernetes.default.svc.cluster.local" -type=srv _https._tcp.kubernetes.default.svc.cluster.local
expect "name = kubernetes.default.svc.cluster.local" -type=ptr 1.0.96.10.in-addr.arpa
expect 'text = "1.1.0"' -type=txt dns-version.cluster.local
expect "NXDOMAIN" nosuch.default.svc.cluster.local
expect "REFUSED" example.com
log "PASS"
