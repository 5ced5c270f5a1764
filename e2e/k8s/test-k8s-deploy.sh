#!/usr/bin/env bash
# Sarena installed the Kubernetes way and driven by a real kubelet: a control
# plane (e2e/k8s, Kubernetes 1.20.2) and two kubelet nodes (containerd CRI,
# kube-proxy in iptables mode), the image from scripts/build-image.sh
# imported into each node's containerd (`scripts/cluster.sh up
# --no-install`), `kubectl apply -f deploy/kubernetes/` (`scripts/cluster.sh
# install`): the user's command, so it cannot rot.
# Then, through the API (kubectl; `sarena` in the daemon pods):
#   the DaemonSet's pods Ready, the nodes Ready (NotReady before: no config);
#   kubectl on the host (DIR/kubeconfig.host, the forwarded API) sees them;
#   each daemon container as the kernel sees it: CapEff/CapPrm/CapBnd the
#   manifest's capabilities (scripts/check-daemonset.py --cap-mask), seccomp
#   filter, no_new_privs, / and /proc/sys read-only, the host's /proc/sys/net
#   writable at /host/proc/sys/net; install-cni without an API token;
#   a Deployment of 10 busybox pods Running on both nodes, distinct addresses
#   from each node's podCIDR; every pod reaches every other (across nodes);
#   a ClusterIP Service answers from backends on both nodes;
#   a NetworkPolicy lets only the web pods reach the web pods: an intruder
#   pod's TCP connections to a web pod on the other node are denied (and
#   `sarena monitor` on that node shows them, named by pod, with the
#   policy), and a prober in it keeps trying (about one attempt a second) through the next
#   two steps: not one may succeed;
#   a daemon pod deleted: recreated by the DaemonSet, a 10/s ping across
#   nodes loses at most one, the new daemon serves ADD;
#   a rolling update of the DaemonSet (the way an upgrade rolls out): the
#   conflist never missing, the nodes never NotReady, traffic kept (the 10/s
#   ping), the intruder still denied;
#   after each, the ping on eBPF host routing's direct paths on both nodes
#   (their counters grow: sent straight out, delivered straight in);
#   kubelet restarted on both nodes: every pod keeps its address, sandbox and
#   traffic, the daemons' endpoints unchanged;
#   the pods deleted: no address, endpoint or host link left;
#   `sarena install-cni --uninstall`: the node NotReady; its daemon pod
#   recreated: Ready again; `scripts/cluster.sh down`: nothing left.
# Measured, not asserted: the daemons' memory (RSS, cgroup usage; with 5
# pods each, and after the measurement below); pod sandbox-ready time (create -> Running) of 10
# pods (and 50 with SARENA_DEPLOY_PODS="10 50") on one node, the reference
# bridge + host-local (on a node of its own beside the two idle NotReady
# ones, removed before Sarena is installed) and Sarena, in this run.
# Usage (root): e2e/k8s/test-k8s-deploy.sh [sarena]
#   SARENA_BIN_DIR=DIR  sarena-daemon, sarena-cni and sarena (default: build-image.sh
#                       runs cargo build --release; e2e/run-all.sh sets it)
#   SARENA_DEPLOY_PODS="10"  the measured sizes ("10 50": the full measurement,
#                       "" for none: no reference node)
#   SARENA_DEPLOY_JSON=FILE  the measurements as JSON (benches/src/k8s_pods.rs;
#                       scripts/bench.sh writes target/bench/kubelet-pods.json
#                       with SARENA_DEPLOY_PODS="50 100")
#   SARENA_K8S_KEEP=1   keep the cluster directory
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
# shellcheck source=e2e/k8s/lib.sh
. "$HERE/lib.sh"
# shellcheck source=e2e/k8s/deploy-lib.sh
. "$HERE/deploy-lib.sh"

[ "$(id -u)" = 0 ] || fail "needs root"
if [ "${1:-sarena}" != sarena ]; then
  log "mode ${1}: the DaemonSet installs Sarena only; nothing to compare"
  exit 0
fi
read -r -a SIZES <<<"${SARENA_DEPLOY_PODS-10}"

PHASE_WIDTH=74

RID=$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
N1=s$RID-node1 N2=s$RID-node2 REF=s$RID-ref
DIR=$(mktemp -d /tmp/sarena-k8s-deploy.XXXXXX)
finish() {
  local rc=$?
  set +e
  trap - EXIT
  if [ -s "$DIR/watchers" ]; then while read -r w; do kill -- "-$w" 2>/dev/null; done <"$DIR/watchers"; fi
  if [ "$rc" != 0 ]; then
    log "failed; state and log tails:"
    {
      k get nodes -o wide
      k get pods -A -o wide
      for n in "$N1" "$N2"; do
        p=$(ds_pod "$n")
        [ -z "$p" ] || { echo "---- logs $p" && ks logs "$p" -c sarena --tail=30; }
        echo "---- $n plugin log" && k8s_exec "$DIR" "$n" tail -n 20 /var/log/sarena-cni.log
      done
      for f in "$DIR"/logs/*kubelet.log; do
        [ -s "$f" ] && echo "---- $f" && grep -E '^E[0-9]' "$f" | tail -n 8 | cut -c1-300
      done
    } >&2 2>&1
  fi
  k8s_down "$DIR" >/dev/null 2>&1
  for n in "$N1" "$N2" "$REF"; do rm -rf "/sys/fs/bpf/sarena-node/$n"; done
  rmdir /sys/fs/bpf/sarena-node 2>/dev/null
  phase_report
  if [ -s "$DIR/memory" ]; then
    log "the daemons' memory (measured, not asserted):"
    sed 's/^/  /' "$DIR/memory" >&2
  fi
  if [ -s "$DIR/measurements" ]; then
    log "pod sandbox-ready (create -> Running), same run:"
    sed 's/^/  /' "$DIR/measurements" >&2
  fi
  if [ "$rc" = 0 ] && [ -n "${SARENA_DEPLOY_JSON:-}" ] && [ -s "$DIR/measurements.jsonl" ]; then
    if jq -s --arg kernel "$(uname -r)" --argjson cpus "$(nproc)" --arg date "$(date -u +%FT%TZ)" \
      --arg command "SARENA_DEPLOY_PODS=\"${SIZES[*]}\" e2e/k8s/test-k8s-deploy.sh" \
      '{kernel: $kernel, cpus: $cpus, date: $date, command: $command, runs: .}' \
      "$DIR/measurements.jsonl" >"$SARENA_DEPLOY_JSON"; then
      log "wrote $SARENA_DEPLOY_JSON"
    else
      log "could not write $SARENA_DEPLOY_JSON"
      rc=1
    fi
  fi
  # (the summaries above are read from DIR: removed only now)
  if [ "${SARENA_K8S_KEEP:-0}" = 1 ]; then log "keeping $DIR"; else rm -rf --one-file-system "$DIR"; fi
  if [ "$rc" = 0 ]; then log "PASS (${SECONDS}s)"; else log "FAILED (exit $rc)"; fi
  exit "$rc"
}
trap finish EXIT
trap 'exit 130' INT TERM

# (cluster.sh checks that the image's tag is the manifests')
phase "scripts/cluster.sh up --no-install: image, control plane, two nodes NotReady (no CNI config)"
bash "$REPO/scripts/cluster.sh" up --no-install --dir "$DIR" --node-prefix "s$RID-node" >/dev/null ||
  fail "scripts/cluster.sh up failed"
declare -A CIDR
for n in "$N1" "$N2"; do
  CIDR[$n]=$(k get node "$n" -o 'jsonpath={.spec.podCIDR}')
  [ "$(node_ready "$n")" != True ] || fail "$n Ready before any CNI config"
done

if [ "${#SIZES[@]}" -gt 0 ]; then
  phase "reference node: bridge + host-local, Ready"
  k8s_kubelet_node "$DIR" "$REF"
  RCIDR=$(cat "$DIR/nodes/$REF/podcidrs")
  cat >"$DIR/nodes/$REF/net.d/10-bridge.conflist" <<EOF
{"cniVersion": "0.4.0", "name": "reference", "plugins": [
  {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "$RCIDR"}]], "routes": [{"dst": "0.0.0.0/0"}]}}]}
EOF
  wait_until 90 is_ready "$REF" || fail "$REF not Ready with the bridge config"

  phase "reference: sandbox-ready of ${SIZES[*]} pods on one node"
  measure warmup warm-up "$REF" 1 2>/dev/null
  : >"$DIR/measurements"
  : >"$DIR/measurements.jsonl"
  for n in "${SIZES[@]}"; do measure ref "bridge + host-local" "$REF" "$n"; done

  phase "reference node removed"
  k delete node "$REF" >/dev/null
  k8s_node_down "$DIR" "$REF"
fi

phase "scripts/cluster.sh install (kubectl apply -f deploy/kubernetes/): DaemonSet, nodes Ready"
bash "$REPO/scripts/cluster.sh" install --dir "$DIR" || fail "scripts/cluster.sh install failed"
host_nodes=$("$SARENA_K8S_BIN/kubectl" --kubeconfig "$DIR/kubeconfig.host" --cache-dir "$DIR/kubectl-cache" \
  get nodes -o name | sort | tr '\n' ' ')
[ "$host_nodes" = "node/$N1 node/$N2 " ] || fail "kubectl on the host (kubeconfig.host) sees '$host_nodes'"
for n in "$N1" "$N2"; do
  wait_until 60 is_ready "$n" || fail "$n not Ready after its Sarena pod is"
  [ "$(k get node "$n" -o json | jq -r '.status.conditions[] | select(.type == "NetworkUnavailable") | "\(.status) \(.reason)"')" = "False SarenaIsUp" ] ||
    fail "$n: NetworkUnavailable is not False/SarenaIsUp"
  logs=$(ks logs "$(ds_pod "$n")" -c sarena)
  [[ $logs == *"ready: CNI config written"* ]] || fail "$n's daemon did not log the conflist write"
  [ "$(cat "$DIR/nodes/$n/net.d/10-sarena.conflist")" = "$(ks get configmap sarena -o 'jsonpath={.data.10-sarena\.conflist}')" ] ||
    fail "$n: the conflist written is not the ConfigMap's"
  [ "$(find "$DIR/nodes/$n/net.d" -mindepth 1 | wc -l)" = 1 ] ||
    fail "$n: more than the conflist in the conf dir: $(ls -A "$DIR/nodes/$n/net.d")"
  [ "$(ks logs "$(ds_pod "$n")" -c install-cni)" = "plugin    /opt/cni/bin/sarena-cni: written" ] ||
    fail "$n: install-cni said '$(ks logs "$(ds_pod "$n")" -c install-cni)'"
done

phase "the daemon containers as the kernel sees them; no API token in install-cni"
# the capabilities the manifest grants (scripts/check-daemonset.py checks the
# manifest itself in scripts/test.sh)
CAPS=$(python3 "$REPO/scripts/check-daemonset.py" --cap-mask)
TOKEN_DIR=/var/run/secrets/kubernetes.io/serviceaccount
for n in "$N1" "$N2"; do
  pid=$(daemon_pid "$n") || fail "$n: no daemon process in the cgroup of its container"
  for f in CapEff CapPrm CapBnd; do
    [ "$(status_field "$pid" "$f")" = "$CAPS" ] || fail "$n: the daemon's $f is $(status_field "$pid" "$f"), not $CAPS"
  done
  [ "$(status_field "$pid" Seccomp)" = 2 ] || fail "$n: the daemon's Seccomp is $(status_field "$pid" Seccomp), not 2 (filter)"
  [ "$(status_field "$pid" NoNewPrivs)" = 1 ] || fail "$n: the daemon runs without no_new_privs"
  [[ $(mount_options "$pid" /) == ro,* ]] || fail "$n: the daemon's / is mounted $(mount_options "$pid" /)"
  if touch "/proc/$pid/root/sarena-write-probe" 2>/dev/null; then
    rm -f "/proc/$pid/root/sarena-write-probe"
    fail "$n: a file could be written to the daemon's /"
  fi
  [[ $(mount_options "$pid" /proc/sys) == ro,* ]] || fail "$n: the daemon's /proc/sys is mounted $(mount_options "$pid" /proc/sys)"
  [[ $(mount_options "$pid" /host/proc/sys/net) == rw,* ]] ||
    fail "$n: the host's /proc/sys/net is not mounted read-write at /host/proc/sys/net: $(mount_options "$pid" /host/proc/sys/net)"
  spec=$(ks get pod "$(ds_pod "$n")" -o json)
  [ "$(jq -r --arg t "$TOKEN_DIR" '[.spec.initContainers[].volumeMounts[]? | select(.mountPath | startswith($t))] | length' <<<"$spec")" = 0 ] ||
    fail "$n: install-cni has a volume at $TOKEN_DIR: $(jq -c '.spec.initContainers[].volumeMounts' <<<"$spec")"
  [ "$(jq -r --arg t "$TOKEN_DIR" '[.spec.containers[] | select(.name == "sarena") | .volumeMounts[] | select(.mountPath == $t)] | length' <<<"$spec")" = 1 ] ||
    fail "$n: the daemon container has no volume at $TOKEN_DIR"
done
log "daemons: CapEff $CAPS, seccomp filter, no_new_privs, / read-only; install-cni without a token"

phase "a Deployment of 10 pods: Running on both nodes, addresses from their podCIDRs"
k apply -f - >/dev/null <<'EOF'
{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
 "spec": {"replicas": 10, "selector": {"matchLabels": {"app": "web"}},
  "template": {"metadata": {"labels": {"app": "web"}},
   "spec": {"terminationGracePeriodSeconds": 1,
    "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
      "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "web"}}}],
    "containers": [{"name": "web", "image": "sarena.local/busybox:1.35", "imagePullPolicy": "Never",
      "command": ["sh", "-c", "mkdir -p /www && hostname >/www/index.html && exec httpd -f -p 8080 -h /www"],
      "ports": [{"containerPort": 8080}],
      "readinessProbe": {"tcpSocket": {"port": 8080}, "periodSeconds": 2}}]}}}}
EOF
wait_until 180 all_ready app=web 10 || fail "the 10 web pods are not all Ready: $(pod_table app=web | tr '\n' ';')"
PODS=$(pod_table app=web)
[ "$(awk '{print $2}' <<<"$PODS" | sort -u | wc -l)" = 10 ] || fail "addresses not distinct: $PODS"
while read -r pod ip node; do
  in_cidr "$ip" "${CIDR[$node]}" || fail "$pod on $node got $ip, not from ${CIDR[$node]}"
done <<<"$PODS"
for n in "$N1" "$N2"; do
  [ "$(grep -c " $n\$" <<<"$PODS")" = 5 ] || fail "not 5 pods on $n: $PODS"
  [ "$(endpoints_json "$n" | jq length)" = 5 ] || fail "$n's daemon does not hold 5 endpoints"
done
A=$(awk -v n="$N1" '$3 == n {print $1; exit}' <<<"$PODS")
B=$(awk -v n="$N2" '$3 == n {print $1; exit}' <<<"$PODS")
B_IP=$(awk -v p="$B" '$1 == p {print $2}' <<<"$PODS")

phase "every pod reaches every pod (across nodes)"
mesh app=web
for n in "$N1" "$N2"; do echo "with 5 pods, the daemon that made the maps: $(daemon_memory "$n")" >>"$DIR/memory"; done

phase "a ClusterIP Service with backends on both nodes"
k expose deployment web --port=80 --target-port=8080 >/dev/null
SVC=$(k get service web -o 'jsonpath={.spec.clusterIP}')
# shellcheck disable=SC2016 # expanded in the pod
svc_names() { k exec "$1" -- sh -c 'for i in $(seq 30); do timeout 3 wget -qO- "http://$0/"; done' "$SVC"; }
for from in "$A" "$B"; do
  wait_until 30 k exec "$from" -- timeout 3 wget -qO- "http://$SVC/" || fail "$from -> $SVC: no answer"
  seen=$(svc_names "$from" | sort -u)
  nodes=$(awk 'NR == FNR {node[$1] = $3; next} {print node[$1]}' <(echo "$PODS") <(echo "$seen") | sort -u | grep -c .)
  [ "$nodes" = 2 ] || fail "$from -> $SVC: answers only from one node: $(tr '\n' ' ' <<<"$seen")"
done

# ping_start: a 10/s ping from A (node1) to B (node2), in A, until ping_verdict.
ping_start() {
  # shellcheck disable=SC2016 # expanded in the pod
  k exec "$A" -- sh -c 'ping -i 0.1 -W 2 "$0" >/ping.out 2>&1 & echo $! >/ping.pid' "$B_IP"
  sleep 1
}
# ping_verdict WHAT: stop the ping (SIGINT: it prints its summary); at least
# 4 s of it, and at most one reply may be missing (the one in flight when it
# stopped).
ping_verdict() {
  local sent got
  # shellcheck disable=SC2016 # expanded in the pod
  k exec "$A" -- sh -c 'kill -INT "$(cat /ping.pid)"; sleep 0.5; cat /ping.out' >"$DIR/ping.out"
  read -r sent got < <(ping_counts "$DIR/ping.out")
  [ "${sent:-0}" -ge 40 ] || fail "$1: ping sent ${sent:-nothing}: $(tail -n 3 "$DIR/ping.out")"
  log "$1: $got of $sent pings answered"
  [ $((sent - got)) -le 1 ] || fail "$1: $((sent - got)) of $sent pings lost"
}
# routing_counters NODE: eBPF host routing's counters in NODE's daemon (JSON).
routing_counters() { sarena_on "$1" -o json status | jq -c .dataplane.host_routing.counters; }
# direct_since NODE BEFORE: since the counters BEFORE, NODE sent packets to
# the other node's pods straight out and delivered theirs straight in (the
# counters read are left in NOW).
direct_since() {
  NOW=$(routing_counters "$1")
  jq -en --argjson b "$2" --argjson a "$NOW" \
    '$a.to_peer_redirected + $a.to_peer_neigh > $b.to_peer_redirected + $b.to_peer_neigh
     and $a.from_peer_redirected > $b.from_peer_redirected' >/dev/null
}
# ping_direct WHAT: the running ping (A on N1 <-> B on N2, the only traffic
# delivered across nodes meanwhile: the intruder's is denied) keeps both
# nodes on the direct paths.
ping_direct() {
  local n
  declare -A was
  for n in "$N1" "$N2"; do was[$n]=$(routing_counters "$n"); done
  for n in "$N1" "$N2"; do
    wait_until 10 direct_since "$n" "${was[$n]}" ||
      fail "$1: $n not on the direct paths: counters then ${was[$n]}, now $NOW"
    log "$1: $n on the direct paths: $NOW"
  done
}

phase "a deny policy: only web reaches web; an intruder's connections are denied"
k apply -f - >/dev/null <<EOF
{"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
 "metadata": {"name": "web-from-web", "namespace": "default"},
 "spec": {"podSelector": {"matchLabels": {"app": "web"}}, "policyTypes": ["Ingress"],
  "ingress": [{"from": [{"podSelector": {"matchLabels": {"app": "web"}}}]}]}}
EOF
k apply -f - >/dev/null <<EOF
{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "intruder", "namespace": "default", "labels": {"app": "intruder"}},
 "spec": {"nodeName": "$N1", "terminationGracePeriodSeconds": 0,
  "containers": [{"name": "c", "image": "sarena.local/busybox:1.35", "imagePullPolicy": "Never",
                  "command": ["sleep", "3600"]}]}}
EOF
wait_until 60 all_ready app=intruder 1 || fail "the intruder pod is not Ready"
# intruder_denied: three connections in a row from the intruder to B fail.
intruder_denied() {
  local i
  for i in 1 2 3; do
    ! k exec intruder -- timeout 2 wget -qO- "http://$B_IP:8080/" >/dev/null 2>&1 || return 1
  done
}
DENIED_BEFORE=$(routing_counters "$N2")
wait_until 20 intruder_denied || fail "the intruder still reaches $B ($B_IP): the policy is not enforced"
# The intruder (on N1) reaches B (on N2) by the direct path: B's node drops
# its connections in from_network, before the pod, and counts them there.
DENIED_AFTER=$(routing_counters "$N2")
jq -en --argjson b "$DENIED_BEFORE" --argjson a "$DENIED_AFTER" \
  '$a.from_peer_policy_denied > $b.from_peer_policy_denied' >/dev/null ||
  fail "$N2 dropped none of the intruder's packets on the direct path: counters then $DENIED_BEFORE, now $DENIED_AFTER"
log "$N2 dropped the intruder's packets on the direct path: $DENIED_AFTER"
# The drop explained (issue 28): `sarena monitor` in B's node's Sarena pod
# shows the intruder's denied connections, named by pod, with the policy
# that isolates B.
INTRUDER_IP=$(k get pod intruder -o 'jsonpath={.status.podIP}')
monitor_explains() {
  ks exec "$(ds_pod "$N2")" -c sarena -- sarena monitor --since 2m --no-follow \
    --reason policy_denied_ingress -o json >"$DIR/monitor.json" 2>&1 || return 1
  jq -se --arg pod "default/$B" --arg src "$INTRUDER_IP" \
    'any(.[]; .pod == $pod and .packet.src == $src and .packet.dst_port == 8080
      and .direction == "ingress" and ((.policy.policies // []) | index("default/web-from-web")))' \
    "$DIR/monitor.json" >/dev/null
}
wait_until 10 monitor_explains ||
  fail "sarena monitor on $N2 does not show the intruder's denied connections with the policy: $(tail -c 2000 "$DIR/monitor.json")"
log "sarena monitor on $N2: $(jq -sc 'map(select(.packet.src == $src)) | .[0] | {reason, pod, src: .packet.src, dport: .packet.dst_port, policies: .policy.policies}' --arg src "$INTRUDER_IP" "$DIR/monitor.json")"
k exec "$A" -- timeout 3 wget -qO- "http://$B_IP:8080/" >/dev/null || fail "$A (web) cannot reach $B (web) under the policy"
# The prober: a connection attempt about every 1.2 s, each counted, each success logged.
# shellcheck disable=SC2016 # expanded in the pod
k exec intruder -- sh -c 'while :; do echo >>/tries; timeout 1 wget -qO- "http://$0:8080/" >/dev/null 2>&1 && date >>/got; sleep 0.2; done >/dev/null 2>&1 &
  echo $! >/prober.pid' "$B_IP"

phase "daemon pod deleted: recreated, traffic kept, ADD served by the new daemon"
OLD=$(ds_pod "$N1")
SINCE=$(node_ready_since "$N1")
ping_start
ks delete pod "$OLD" >/dev/null
wait_until 90 ds_pod_ready "$N1" || fail "no Ready Sarena pod on $N1 after deleting $OLD"
[ "$(ds_pod "$N1")" != "$OLD" ] || fail "$OLD was not replaced"
ping_direct "daemon pod deleted"
ping_verdict "daemon pod deleted"
[ "$(node_ready_since "$N1")" = "$SINCE" ] || fail "$N1's Ready condition changed"
k apply -f - >/dev/null <<EOF
{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "late", "namespace": "default", "labels": {"late": "1"}},
 "spec": {"nodeName": "$N1", "terminationGracePeriodSeconds": 0,
  "containers": [{"name": "c", "image": "sarena.local/busybox:1.35", "imagePullPolicy": "Never",
                  "command": ["sleep", "3600"]}]}}
EOF
wait_until 60 all_ready late=1 1 || fail "a pod created after the daemon pod's replacement is not Ready"
LATE_IP=$(k get pod late -o 'jsonpath={.status.podIP}')
in_cidr "$LATE_IP" "${CIDR[$N1]}" || fail "late got $LATE_IP"
k exec "$B" -- ping -c 1 -W 3 "$LATE_IP" >/dev/null || fail "$B cannot ping the new pod $LATE_IP"
k delete pod late >/dev/null

phase "rolling update of the DaemonSet: conflist always there, nodes stay Ready"
declare -A SINCE_OF
for n in "$N1" "$N2"; do SINCE_OF[$n]=$(node_ready_since "$n"); done
(
  while :; do
    for n in "$N1" "$N2"; do
      [ -s "$DIR/nodes/$n/net.d/10-sarena.conflist" ] || echo "$EPOCHREALTIME $n" >>"$DIR/conflist-missing"
      [ -x "$DIR/nodes/$n/cni-bin/sarena-cni" ] || echo "$EPOCHREALTIME $n plugin" >>"$DIR/conflist-missing"
    done
    sleep 0.1
  done
) &
SAMPLER=$!
ping_start
ks rollout restart daemonset/sarena >/dev/null
ks rollout status daemonset/sarena --timeout=180s >/dev/null || fail "the rolling update did not finish"
kill "$SAMPLER"
wait "$SAMPLER" 2>/dev/null || true
[ ! -s "$DIR/conflist-missing" ] || fail "the plugin or conflist went missing: $(head -3 "$DIR/conflist-missing")"
for n in "$N1" "$N2"; do
  [ "$(node_ready_since "$n")" = "${SINCE_OF[$n]}" ] || fail "$n's Ready condition changed during the update"
done
ping_direct "rolling update"
ping_verdict "rolling update"
# shellcheck disable=SC2016 # expanded in the pod
read -r tries got < <(k exec intruder -- sh -c 'kill "$(cat /prober.pid)"; echo "$(wc -l </tries) $(cat /got 2>/dev/null | wc -l)"')
log "deny policy through a daemon pod's replacement and a rolling update: $got of $tries intruder connections got through"
[ "$tries" -ge 20 ] || fail "the intruder's prober made only $tries attempts"
[ "$got" = 0 ] || fail "$got of the intruder's $tries connections to $B got through the deny policy"
k delete networkpolicy web-from-web >/dev/null
k delete pod intruder >/dev/null
# n_endpoints NODE N: the node's daemon holds N endpoints.
n_endpoints() { [ "$(endpoints_json "$1" | jq length)" = "$2" ]; }
wait_until 60 n_endpoints "$N1" 5 || fail "the intruder's endpoint is still on $N1 after its deletion"

phase "kubelet restarted on both nodes: no pod loses its network"
BEFORE=$(pod_identity app=web)
declare -A EPS
for n in "$N1" "$N2"; do EPS[$n]=$(endpoints_json "$n"); done
for n in "$N1" "$N2"; do k8s_restart "$DIR" "$n" kubelet >/dev/null; done
for n in "$N1" "$N2"; do
  wait_until 60 k8s_exec "$DIR" "$n" curl -sf --max-time 2 http://127.0.0.1:10248/healthz ||
    fail "$n's kubelet not healthy after its restart"
done
sleep 10 # kubelet's first pod sync after the restart
wait_until 60 all_ready app=web 10 || fail "web pods not all Ready after the kubelet restarts"
[ "$(pod_identity app=web)" = "$BEFORE" ] ||
  fail "pods changed across the kubelet restarts: $(diff <(echo "$BEFORE") <(pod_identity app=web) | tr '\n' ' ')"
for n in "$N1" "$N2"; do
  [ "$(endpoints_json "$n")" = "${EPS[$n]}" ] || fail "$n's endpoints changed across the kubelet restart"
done
mesh app=web

phase "pods deleted: no address, endpoint or host link left"
declare -A HOST_IFS
for n in "$N1" "$N2"; do HOST_IFS[$n]=$(endpoints_json "$n" | jq -r '.[].host_ifname'); done
k delete service web >/dev/null
k delete deployment web --wait=false >/dev/null
T=$SECONDS
for n in "$N1" "$N2"; do
  # kubelet stops each sandbox (CNI DEL) before it lets the API object go;
  # the objects themselves may linger for a minute after a kubelet restart
  # (its status manager), so they are waited for at the end
  wait_until 120 no_endpoints "$n" || fail "$n still has endpoints: $(endpoints_json "$n")"
  log "$n: no endpoint $((SECONDS - T)) s after the Deployment's deletion"
  [ "$(sarena_on "$n" -o json ipam list | jq '.allocations | length')" = 0 ] ||
    fail "$n still holds addresses: $(sarena_on "$n" -o json ipam list | jq -c .allocations)"
  for link in ${HOST_IFS[$n]}; do
    if k8s_exec "$DIR" "$n" ip link show "$link" >/dev/null 2>&1; then fail "$n: host link $link left"; fi
  done
  # veths but the node's uplink and the daemon's gateway pair (sarena_host, sarena_net)
  left=$(k8s_exec "$DIR" "$n" ip -o link show type veth | awk -F': ' '$2 !~ /^(eth0|sarena_host|sarena_net)@/ {print $2}')
  [ -z "$left" ] || fail "$n: veths left: $left"
done

phase "install-cni --uninstall: node NotReady; daemon pod recreated: Ready again"
out=$(ks exec "$(ds_pod "$N2")" -c sarena -- sarena install-cni --uninstall)
[ "$out" = "removed   /etc/cni/net.d/10-sarena.conflist" ] || fail "uninstall said '$out'"
wait_until 60 is_not_ready "$N2" || fail "$N2 still Ready without a CNI config"
ks delete pod "$(ds_pod "$N2")" >/dev/null
wait_until 90 ds_pod_ready "$N2" || fail "no Ready Sarena pod on $N2"
wait_until 60 is_ready "$N2" || fail "$N2 not Ready again after its daemon rewrote the conflist"

if [ "${#SIZES[@]}" -gt 0 ]; then
  phase "Sarena: sandbox-ready of ${SIZES[*]} pods on one node"
  for n in "${SIZES[@]}"; do measure sarena "Sarena (eBPF dataplane)" "$N1" "$n"; done
  echo "after the measurement, a restarted daemon: $(daemon_memory "$N1")" >>"$DIR/memory"
  wait_until 90 no_endpoints "$N1" || fail "$N1 still has endpoints after the measurement"
fi

phase "scripts/cluster.sh down (the web pods gone from the API first)"
wait_until 180 no_pods app=web || fail "web pods still in the API 180 s after their sandboxes went"
# --keep: finish reads the reports from DIR, then removes it
bash "$REPO/scripts/cluster.sh" down --dir "$DIR" --keep || fail "scripts/cluster.sh down failed"
left=$(k8s_leftovers "$DIR") || fail "left after down: $left"
