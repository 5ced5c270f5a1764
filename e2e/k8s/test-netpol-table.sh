#!/usr/bin/env bash
# NetworkPolicy as a truth table: every pair of nine pods, on every port,
# after each step of a sequence of policy states, against an independent
# model of networking.k8s.io/v1 (e2e/k8s/netpol-model.py, which never asks
# Sarena). Per pass, a fresh two-node cluster of e2e/k8s with Sarena
# installed by its DaemonSet (as test-upstream.sh sets it up: upstream-lib.sh's
# build_images and cluster_up), dual-stack (SARENA_K8S_DUAL_STACK=1):
#   namespaces x, y, z (labelled ns=x, ...), pods a, b, c in each (labelled
#   pod=a, ...), spread over both nodes, each serving TCP 80, TCP 81 and
#   UDP 80 (agnhost serve-hostname) with named ports serve-80-tcp, serve-81,
#   serve-80-udp, serve-80-sctp (the c pods swap serve-81 and serve-80-tcp:
#   a named port is resolved per pod); a ClusterIP Service x/a:8080 -> 80;
#   nine policy states (netpol-model.py's steps): none; default-deny ingress;
#   podSelector; namespaceSelector; both in one peer and apart;
#   matchExpressions; ipBlock (the second node's podCIDR) with a pod's /32
#   in except; ports by number, by name, endPort (80-81), UDP, SCTP;
#   default-deny egress with allowed peers, an ipBlock egress, a policy
#   without policyTypes (defaulted to Ingress+Egress), a pod isolated both
#   ways; ingress and egress both required; all deleted again;
#   after each (the policies read back from the API, 2 s to settle): every
#   pod -> every pod (self included) on TCP 80, TCP 81, UDP 80, TCP 80 over
#   IPv6; every pod -> the Service (judged on its backend x/a:80); each node
#   -> every pod on TCP 80 (its own pods: always allowed; the other node's:
#   an address like any other); SCTP 80 for every pair through `sarena
#   policy explain` on the nodes of both ends (this kernel has no SCTP).
#   The probes run in the clients' network namespaces (nsenter, in parallel);
#   a mismatch is probed again once after 3 s. Prints a table per step and
#   the mismatches; fails if any probe is not what the model says.
# Usage (root): e2e/k8s/test-netpol-table.sh [PASS...]   (default: native)
#   PASS  native (eBPF dataplane, routing = "native"), vxlan (eBPF, vxlan),
#         kernel (the kernel dataplane, native routing)
# Environment:
#   SARENA_BIN_DIR=DIR  sarena-daemon, sarena-cni, sarena, sarena-test-dns
#                       (default: cargo build --release)
#   SARENA_NETPOL_DUAL_STACK=0   a single-stack (IPv4) cluster, no IPv6 probes
#   SARENA_NETPOL_SETTLE=2       seconds between a state's apply and its probes
#   SARENA_NETPOL_SABOTAGE=STEP  self-check: the model is told step STEP has
#                       one policy fewer than applied (the first the API
#                       lists): that step must fail, and so must the run
#   SARENA_K8S_KEEP=1   keep the cluster directories (and the step files)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
# shellcheck source=e2e/k8s/lib.sh
. "$HERE/lib.sh"
# shellcheck source=e2e/k8s/dns-lib.sh
. "$HERE/dns-lib.sh"
# upstream-lib.sh's cluster functions; its suite variables are unused here
# shellcheck disable=SC2034 # read by upstream-lib.sh
SUITE=netpol-table SUITE_FOCUS='^$'
# shellcheck source=e2e/k8s/upstream-lib.sh
. "$HERE/upstream-lib.sh"
log() { printf '[netpol-table] %s\n' "$*" >&2; }

case ${1:-} in -h | --help) sed -n '2,40p' "$0" | sed 's/^# \{0,1\}//' && exit 0 ;; esac
[ "$(id -u)" = 0 ] || fail "needs root"
PASSES=("$@")
[ "${#PASSES[@]}" -gt 0 ] || PASSES=(native)
for pass in "${PASSES[@]}"; do
  case $pass in native | vxlan | kernel) ;; *) fail "unknown pass '$pass' (native, vxlan or kernel)" ;; esac
done
MODEL=$HERE/netpol-model.py
CLI=${SARENA_BIN_DIR:-$REPO/target/release}/sarena
SETTLE=${SARENA_NETPOL_SETTLE:-2}
export SARENA_K8S_DUAL_STACK=${SARENA_NETPOL_DUAL_STACK:-1}
PHASE_WIDTH=60
RID=$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
WORK=$(mktemp -d /tmp/sarena-netpol-table.XXXXXX)
OUT=$WORK/results
mkdir -p "$OUT"
DIR=""
FAILED=()

finish() {
  local rc=$?
  wait 2>/dev/null # probes still running (each ends within seconds)
  finish_run "$rc" "${FAILED[*]:+: ${FAILED[*]}}"
}
trap finish EXIT
trap 'exit 130' INT TERM

# --- the workload ------------------------------------------------------------------

NS_X=x-$RID NS_Y=y-$RID NS_Z=z-$RID
NAMESPACES=("$NS_X" "$NS_Y" "$NS_Z")

# workload: the namespaces, the nine pods (alternately on each node), the
# Service in front of x/a.
workload() {
  local image n1 n2 i=0 ns short p node port80 port81
  image=$(tar -xOf "$SARENA_K8S_IMAGES/agnhost.tar" manifest.json | jq -r '.[0].RepoTags[0]')
  read -r n1 n2 <<<"$(node_names)"
  {
    for ns in "${NAMESPACES[@]}"; do
      short=${ns%%-*}
      printf '{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "%s", "labels": {"ns": "%s"}}}\n' \
        "$ns" "$short"
    done
    for ns in "${NAMESPACES[@]}"; do
      for p in a b c; do
        node=$n1
        [ $((i % 2)) = 0 ] || node=$n2
        i=$((i + 1))
        port80=serve-80-tcp port81=serve-81
        [ "$p" != c ] || port80=serve-81 port81=serve-80-tcp
        cat <<EOF
{"apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": "$ns", "name": "$p", "labels": {"pod": "$p"}},
 "spec": {"nodeName": "$node", "terminationGracePeriodSeconds": 0, "containers": [
  {"name": "serve-80", "image": "$image", "imagePullPolicy": "Never",
   "args": ["serve-hostname", "--tcp", "--udp", "--http=false", "--port", "80"],
   "ports": [{"name": "$port80", "containerPort": 80, "protocol": "TCP"},
             {"name": "serve-80-udp", "containerPort": 80, "protocol": "UDP"},
             {"name": "serve-80-sctp", "containerPort": 80, "protocol": "SCTP"}],
   "readinessProbe": {"tcpSocket": {"port": 80}, "periodSeconds": 1}},
  {"name": "serve-81", "image": "$image", "imagePullPolicy": "Never",
   "args": ["serve-hostname", "--tcp", "--http=false", "--port", "81"],
   "ports": [{"name": "$port81", "containerPort": 81, "protocol": "TCP"}],
   "readinessProbe": {"tcpSocket": {"port": 81}, "periodSeconds": 1}}]}}
EOF
      done
    done
    cat <<EOF
{"apiVersion": "v1", "kind": "Service", "metadata": {"namespace": "$NS_X", "name": "x-a"},
 "spec": {"selector": {"pod": "a"}, "ports": [{"port": 8080, "targetPort": 80, "protocol": "TCP"}]}}
EOF
  } | jq -s '{apiVersion: "v1", kind: "List", items: .}' >"$WORK/workload.json"
  k apply -f "$WORK/workload.json" >/dev/null
  for ns in "${NAMESPACES[@]}"; do
    k -n "$ns" wait --for=condition=Ready pod --all --timeout=180s >/dev/null ||
      fail "the pods of $ns are not Ready: $(k -n "$ns" get pods -o wide)"
  done
  wait_until 60 service_has_endpoint || fail "the Service x-a has no endpoint"
}
service_has_endpoint() { [ -n "$(k -n "$NS_X" get endpoints x-a -o 'jsonpath={.subsets[0].addresses[0].ip}')" ]; }

# pod_table FILE: the model's pod table: pods (labels, addresses, node, named
# ports, a process for nsenter), namespaces, nodes (podCIDRs, netns), Service.
pod_table() {
  local d=$WORK/table ns key cid pid n
  mkdir -p "$d"
  k get pods -A -o json | jq --arg x "$NS_X" --arg y "$NS_Y" --arg z "$NS_Z" \
    '{items: [.items[] | select(.metadata.namespace == ($x, $y, $z))]}' >"$d/pods.json"
  k get namespaces -o json | jq --arg x "$NS_X" --arg y "$NS_Y" --arg z "$NS_Z" \
    '{items: [.items[] | select(.metadata.name == ($x, $y, $z))]}' >"$d/namespaces.json"
  k get nodes -o json >"$d/nodes.json"
  k -n "$NS_X" get services -o json >"$d/services.json"
  : >"$d/pids"
  while read -r key cid; do
    pid=$(head -n 1 "/sys/fs/cgroup/pids/k8s.io/${cid#containerd://}/cgroup.procs" 2>/dev/null) ||
      fail "$key: no process in the cgroup of its container ${cid#containerd://}"
    [ -n "$pid" ] || fail "$key: no process in the cgroup of its container"
    echo "$key $pid" >>"$d/pids"
  done < <(jq -r '.items[] | "\(.metadata.namespace)/\(.metadata.name) \(.status.containerStatuses[0].containerID)"' "$d/pods.json")
  for n in $(node_names); do echo "$n $(cat "$DIR/nodes/$n/netns")"; done >"$d/netns"
  python3 "$MODEL" table "$d/pods.json" "$d/namespaces.json" "$d/nodes.json" "$d/services.json" \
    "$d/pids" "$d/netns" >"$1"
}

# --- a step ----------------------------------------------------------------------

# apply_state FILE: the policies of FILE (a List) in the test's namespaces,
# and no other: applied, then the others deleted.
apply_state() {
  local have want key
  if [ "$(jq '.items | length' "$1")" -gt 0 ]; then
    # endPort is not in every API version: no client-side schema check (the
    # API server drops what it does not know; the model reads back)
    k apply --validate=false -f "$1" >/dev/null
  fi
  want=$(jq -r '.items[] | "\(.metadata.namespace)/\(.metadata.name)"' "$1")
  have=$(policies_now | jq -r '.items[] | "\(.metadata.namespace)/\(.metadata.name)"')
  for key in $have; do
    grep -qxF "$key" <<<"$want" || k -n "${key%%/*}" delete networkpolicy "${key#*/}" >/dev/null
  done
}

# policies_now: the NetworkPolicies of the test's namespaces, as the API holds them.
policies_now() {
  k get networkpolicies -A -o json | jq --arg x "$NS_X" --arg y "$NS_Y" --arg z "$NS_Z" \
    '{apiVersion: "v1", kind: "List", items: [.items[] | select(.metadata.namespace == ($x, $y, $z))]}'
}

# run_probes PLAN_DIR RESULTS: every client of PLAN_DIR in its network
# namespace, and the explain queries on each node, all at once.
run_probes() {
  local d=$1 netns file n pids=() p bad=0
  while read -r netns file; do
    nsenter --net="$netns" python3 "$MODEL" probe --timeout 1 <"$file" >"$file.out" 2>"$file.err" &
    pids+=($!)
  done <"$d/clients"
  for n in $(node_names); do
    k8s_exec "$DIR" "$n" python3 "$MODEL" explain --cli "$CLI" --node "$n" \
      <"$d/explain-$n.in" >"$d/explain-$n.out" 2>"$d/explain-$n.err" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || bad=1; done
  [ "$bad" = 0 ] || fail "a probe client failed: $(cat "$d"/*.err | head -n 5)"
  cat "$d"/*.out >"$2"
}

# step PASS N: state N applied, settled, probed (mismatches once more after
# 3 s), judged; STEP_OK=0 when a probe is not what the model says.
step() {
  local pass=$1 n=$2 s title model_policies first
  s=$DIR/steps/$n
  mkdir -p "$s"
  title=$(python3 "$MODEL" step "$n" --table "$TABLE" 2>&1 >"$s/applied.json")
  apply_state "$s/applied.json"
  policies_now >"$s/policies.json"
  if jq -e '[.items[].spec | (.ingress, .egress) // [] | .[].ports // [] | .[] | select(.endPort)] | length > 0' \
    "$s/applied.json" >/dev/null &&
    ! jq -e '[.items[].spec | (.ingress, .egress) // [] | .[].ports // [] | .[] | select(.endPort)] | length > 0' \
      "$s/policies.json" >/dev/null; then
    log "step $n: the API dropped endPort (this Kubernetes predates it): the model judges the stored policies"
    title+=" [endPort dropped by the API]"
  fi
  model_policies=$s/policies.json
  if [ "${SARENA_NETPOL_SABOTAGE:-}" = "$n" ]; then
    first=$(jq -r '.items[0].metadata.name // empty' "$s/policies.json")
    jq 'del(.items[0])' "$s/policies.json" >"$s/sabotaged.json"
    model_policies=$s/sabotaged.json
    log "step $n: SARENA_NETPOL_SABOTAGE: the model is not told of policy '${first:-none}'"
  fi
  sleep "$SETTLE"
  python3 "$MODEL" plan --table "$TABLE" --out "$s/plan"
  run_probes "$s/plan" "$s/results-1"
  local judge=(python3 "$MODEL" judge --table "$TABLE" --policies "$model_policies" --plan "$s/plan"
    --title "$pass, step $n: $title")
  STEP_OK=1
  if "${judge[@]}" --results "$s/results-1" --mismatches "$s/mismatches" --quiet; then
    "${judge[@]}" --results "$s/results-1"
    return 0
  fi
  log "step $n: $(wc -l <"$s/mismatches") probes not as expected; again in 3 s"
  sleep 3
  python3 "$MODEL" plan --table "$TABLE" --out "$s/retry" --only "$s/mismatches"
  run_probes "$s/retry" "$s/results-2"
  "${judge[@]}" --results "$s/results-1" "$s/results-2" --retried "$s/mismatches" || STEP_OK=0
}

# --- the passes ----------------------------------------------------------------------

phase "build: setup-k8s.sh (cached), images"
bash "$REPO/scripts/setup-k8s.sh" >/dev/null
build_images "$WORK"
[ -x "$CLI" ] || fail "no $CLI (set SARENA_BIN_DIR)"
python3 "$MODEL" selftest >/dev/null || fail "netpol-model.py selftest failed"
STEPS=$(python3 "$MODEL" steps)

for pass in "${PASSES[@]}"; do
  DIR=$WORK/$pass
  phase "$pass: cluster, two nodes, CNI, DNS"
  cluster_up "$pass"
  phase "$pass: namespaces, 9 pods, Service"
  workload
  TABLE=$DIR/table.json
  pod_table "$TABLE"
  failed_steps=()
  for ((i = 0; i < STEPS; i++)); do
    phase "$pass: step $i"
    step "$pass" "$i"
    [ "$STEP_OK" = 1 ] || failed_steps+=("$i")
  done
  [ "${#failed_steps[@]}" = 0 ] || FAILED+=("$pass: steps ${failed_steps[*]}")
  phase "$pass: down"
  k8s_down "$DIR" >/dev/null
  clear_pins
  left=$(k8s_leftovers "$DIR") || fail "left after down: $left"
  DIR=""
done
phase ""
[ "${#FAILED[@]}" = 0 ] || fail "probes not as the model says (${FAILED[*]})"
