#!/usr/bin/env bash
# NetworkPolicy at scale, the whole daemon on a real cluster: a two-node
# cluster of e2e/k8s with Sarena installed by its DaemonSet (eBPF dataplane,
# native routing; upstream-lib.sh's build_images and cluster_up, the daemons
# also given --metrics-listen=127.0.0.1:9464 in their node's netns), then:
#   1. enforcement latency: with --pods background pods and --policies
#      background NetworkPolicies in the cluster, --samples times (one at a
#      time, a random 0.2-0.8 s pause between): a NetworkPolicy with a unique
#      name selecting the measured pods (one real pod per node, labelled
#      bench-target=yes, namespace bench) is created; T0 = the client's
#      clock just before the create request; each node runs one poller (in
#      the node's namespaces) asking its daemon's GET /v1/policy/endpoints
#      every 5 ms, printing when a policy first selects a local endpoint;
#      latency = max over nodes of (seen - T0), kept per node too. Each
#      policy is deleted again (its removal waited for), so every sample
#      sees the same background. Targets (reported, not asserted): p50 <=
#      100 ms, p99 <= 500 ms.
#   2. daemon memory: VmRSS and VmHWM of each node's sarena-daemon (the
#      host process in the node's netns), idle (after the cluster came up)
#      and with --big-pods pods and --big-policies policies once both
#      daemons settled (sarena_policy_policies = the policies, the compile
#      count still, CPU near idle). Target <= 100 MiB.
# Background pods are real Pod objects bound to "ghost" Node objects
# (no kubelet; tainted and unschedulable, without the kubernetes.io/os
# label so no DaemonSet pod lands there); the pods tolerate the not-ready
# and unreachable NoExecute taints forever; their status (Running, a podIP
# in 10.250.0.0/16, outside the nodes' podCIDRs) is set through the status
# subresource. 20 namespaces bg-NN (labels team, env), pods labelled app,
# tier, team, with named ports; a policy mix (podSelector,
# namespaceSelector, matchExpressions, ipBlock with except, ports by number
# and by name; every 25th in namespace bench selecting the measured pods).
# Created by bench-policy-cluster.py with parallel requests.
# Prints a summary on stderr and writes a JSON report (--out).
# Usage (root): e2e/k8s/bench-policy-cluster.sh [--pods N1] [--policies P1]
#         [--big-pods N2] [--big-policies P2] [--samples S] [--out FILE]
#         [--big-samples S2]
#   defaults 1000, 200, 10000, 1000, 50, /tmp/sarena-policy-cluster.json;
#   --big-samples: also S2 latency samples at N2 pods and P2 policies, after
#   the memory was read (logged only, not in the JSON; default 0);
#   a smoke run: --pods 50 --policies 10 --big-pods 200 --big-policies 20 --samples 5
# Environment:
#   SARENA_BIN_DIR=DIR  sarena-daemon, sarena-cni, sarena, sarena-test-dns
#                       (default: target/release, as built)
#   SARENA_BENCH_SETTLE_TIMEOUT=900  seconds for the daemons to settle at scale
#   SARENA_K8S_KEEP=1   keep the work directory (cluster logs, poller output)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
# shellcheck source=e2e/k8s/lib.sh
. "$HERE/lib.sh"
# shellcheck source=e2e/k8s/dns-lib.sh
. "$HERE/dns-lib.sh"
# upstream-lib.sh's cluster functions; its suite variables are unused here
# shellcheck disable=SC2034 # read by upstream-lib.sh
SUITE=bench-policy SUITE_FOCUS='^$'
# shellcheck source=e2e/k8s/upstream-lib.sh
. "$HERE/upstream-lib.sh"
log() { printf '[bench-policy] %s\n' "$*" >&2; }

usage() { sed -n '2,45p' "$0" | sed 's/^# \{0,1\}//'; }
COMMAND="e2e/k8s/bench-policy-cluster.sh${*:+ $*}"
PODS=1000 POLICIES=200 BIG_PODS=10000 BIG_POLICIES=1000 SAMPLES=50 BIG_SAMPLES=0
OUT_JSON=/tmp/sarena-policy-cluster.json
while [ $# -gt 0 ]; do
  case $1 in
    --pods) PODS=$2 ;;
    --policies) POLICIES=$2 ;;
    --big-pods) BIG_PODS=$2 ;;
    --big-policies) BIG_POLICIES=$2 ;;
    --samples) SAMPLES=$2 ;;
    --big-samples) BIG_SAMPLES=$2 ;;
    --out) OUT_JSON=$2 ;;
    -h | --help) usage && exit 0 ;;
    *) usage >&2 && exit 2 ;;
  esac
  shift 2 || { usage >&2 && exit 2; }
done
for v in "$PODS" "$POLICIES" "$BIG_PODS" "$BIG_POLICIES" "$SAMPLES" "$BIG_SAMPLES"; do
  [[ $v =~ ^[0-9]+$ ]] || fail "not a count: $v"
done
{ [ "$BIG_PODS" -ge "$PODS" ] && [ "$BIG_POLICIES" -ge "$POLICIES" ]; } ||
  fail "--big-pods/--big-policies must be at least --pods/--policies"
[ "$(id -u)" = 0 ] || fail "needs root"
OUT_JSON=$(realpath -m "$OUT_JSON")

export SARENA_BIN_DIR=${SARENA_BIN_DIR:-$REPO/target/release}
PY=$HERE/bench-policy-cluster.py
SETTLE_TIMEOUT=${SARENA_BENCH_SETTLE_TIMEOUT:-900}
METRICS=http://127.0.0.1:9464/metrics
PHASE_WIDTH=60
RID=$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
WORK=$(mktemp -d /tmp/sarena-bench-policy.XXXXXX)
OUT=$WORK/results
mkdir -p "$OUT"
DIR=""
POLLERS=()
STOP=$WORK/stop-pollers
BENCH_NS=bench

finish() {
  local rc=$? p
  touch "$STOP"
  for p in ${POLLERS[@]+"${POLLERS[@]}"}; do wait "$p" 2>/dev/null || true; done
  finish_run "$rc"
}
trap finish EXIT
trap 'exit 130' INT TERM

# the daemons also serve their metrics on the node's loopback (the policy
# gauges and compile histogram): upstream-lib.sh's sarena_cni adds the flag
export SARENA_DAEMON_EXTRA_ARGS=--metrics-listen=127.0.0.1:9464

# --- the daemons -------------------------------------------------------------------

# daemon_pid NODE: the sarena-daemon host process in NODE's netns.
daemon_pid() {
  local want pid
  want=$(cat "$DIR/nodes/$1/netns")
  for pid in $(pgrep -x sarena-daemon); do
    [ "$(ip netns identify "$pid" 2>/dev/null)" != "$want" ] || { echo "$pid" && return 0; }
  done
  return 1
}

# status_mib PID FIELD: /proc/PID/status's FIELD (VmRSS, VmHWM) in MiB.
status_mib() { awk -v f="$2:" '$1 == f {printf "%.1f", $2 / 1024}' "/proc/$1/status"; }

# cpu_ticks PID: utime + stime.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# metric NODE NAME: the daemon's value of NAME (no labels), empty if none.
metric() { k8s_exec "$DIR" "$1" curl -sf --max-time 5 "$METRICS" | awk -v m="$2" '$1 == m {print $2; exit}'; }

# memory_json FILE: {"node": VmRSS MiB, ...}; also VmHWM into FILE.hwm.
memory_json() {
  local n pid rss="" hwm=""
  for n in $(node_names); do
    pid=$(daemon_pid "$n") || fail "no sarena-daemon process in the netns of $n"
    rss+="${rss:+, }\"$n\": $(status_mib "$pid" VmRSS)"
    hwm+="${hwm:+, }\"$n\": $(status_mib "$pid" VmHWM)"
  done
  echo "{$rss}" >"$1"
  echo "{$hwm}" >"$1.hwm"
}

# settle POLICIES: every daemon reports POLICIES policies known
# (sarena_policy_policies; none yet counts as 0) and used under 5% of a CPU
# over 10 s; the compile count of those 10 s is logged.
settle() {
  local want=$1 t=$SECONDS n pid quiet got c0 c1 note
  declare -A compiles cpu
  while :; do
    [ $((SECONDS - t)) -lt "$SETTLE_TIMEOUT" ] || fail "the daemons did not settle in ${SETTLE_TIMEOUT}s"
    quiet=1
    for n in $(node_names); do
      got=$(metric "$n" sarena_policy_policies || true)
      [ "${got:-0}" = "$want" ] || quiet=0
      pid=$(daemon_pid "$n") || fail "no sarena-daemon process in the netns of $n"
      compiles[$n]=$(metric "$n" sarena_policy_compile_duration_seconds_count || true)
      cpu[$n]=$(cpu_ticks "$pid")
    done
    if [ "$quiet" = 1 ]; then
      sleep 10
      note=""
      for n in $(node_names); do
        pid=$(daemon_pid "$n")
        c0=${cpu[$n]} c1=$(cpu_ticks "$pid")
        # 10 s at 100 ticks/s: 5% is 50 ticks
        [ $((c1 - c0)) -lt 50 ] || quiet=0
        note+=" $n: $((c1 - c0)) ticks, compiles ${compiles[$n]:-?} -> $(metric "$n" sarena_policy_compile_duration_seconds_count || true);"
      done
      [ "$quiet" = 1 ] && break
      log "not idle yet:$note"
    else
      sleep 5
    fi
  done
  log "settled at $want policies after $((SECONDS - t)) s (last 10 s:$note)"
}

# daemon_report LABEL: per node, the policy metrics and the compile histogram.
daemon_report() {
  local n sum count
  for n in $(node_names); do
    k8s_exec "$DIR" "$n" curl -sf --max-time 5 "$METRICS" >"$OUT/metrics-$1-$n.txt" || true
    sum=$(awk '$1 == "sarena_policy_compile_duration_seconds_sum" {print $2}' "$OUT/metrics-$1-$n.txt")
    count=$(awk '$1 == "sarena_policy_compile_duration_seconds_count" {print $2}' "$OUT/metrics-$1-$n.txt")
    log "$1: $n: policies $(awk '$1 == "sarena_policy_policies" {print $2}' "$OUT/metrics-$1-$n.txt"), isolated" \
      "$(awk '$1 ~ /^sarena_policy_endpoints_isolated/ {printf "%s=%s ", $1, $2}' "$OUT/metrics-$1-$n.txt")," \
      "compiles $count taking ${sum:-?} s in all (mean $(awk -v s="${sum:-0}" -v c="${count:-0}" \
        'BEGIN {if (c > 0) printf "%.1f ms", 1000 * s / c; else print "?"}')), apply errors" \
      "$(awk '$1 == "sarena_policy_apply_errors_total" {print $2}' "$OUT/metrics-$1-$n.txt")"
  done
}

# populate PODS POLICIES FIRST_POD FIRST_POLICY: the background, grown; prints the seconds.
populate() {
  k8s_exec "$DIR" cp python3 "$PY" populate --kubeconfig "$DIR/kubeconfig" --pods "$1" --policies "$2" \
    --first-pod "$3" --first-policy "$4" --bench-namespace "$BENCH_NS" \
    --underlay "$(k8s_node_ip "$DIR" "$(node_names | cut -d' ' -f1)" | cut -d. -f1-3)" >"$OUT/populate-$1.json" ||
    fail "populating $1 pods and $2 policies failed"
  log "populated $1 pods, $2 policies: $(cat "$OUT/populate-$1.json")"
  jq -r .seconds "$OUT/populate-$1.json"
}

# check_background PODS: PODS background pods with their address (none
# evicted nor collected), logged.
check_background() {
  local have
  have=$(k get pods -A --no-headers -o custom-columns=IP:.status.podIP,PHASE:.status.phase |
    awk '$1 ~ /^10\.250\./ && $2 == "Running"' | wc -l)
  log "background pods Running with an address: $have of $1"
  [ "$have" = "$1" ] || fail "background pods missing: $have of $1"
}

# measured_pods: namespace bench and one real pod per node, Ready.
measured_pods() {
  local image n i=0
  image=$(tar -xOf "$SARENA_K8S_IMAGES/agnhost.tar" manifest.json | jq -r '.[0].RepoTags[0]')
  {
    printf '{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "%s", "labels": {"team": "bench"}}}\n' "$BENCH_NS"
    for n in $(node_names); do
      i=$((i + 1))
      cat <<EOF
{"apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": "$BENCH_NS", "name": "target-$i",
  "labels": {"bench-target": "yes", "app": "bench"}},
 "spec": {"nodeName": "$n", "terminationGracePeriodSeconds": 0, "containers": [
  {"name": "pause", "image": "$image", "imagePullPolicy": "Never", "args": ["pause"],
   "ports": [{"name": "http", "containerPort": 8080}]}]}}
EOF
    done
  } | jq -s '{apiVersion: "v1", kind: "List", items: .}' >"$WORK/measured.json"
  k apply -f "$WORK/measured.json" >/dev/null
  k -n "$BENCH_NS" wait --for=condition=Ready pod --all --timeout=180s >/dev/null ||
    fail "the measured pods are not Ready: $(k -n "$BENCH_NS" get pods -o wide)"
}

# enforce FILE SAMPLES: the samples (one poller per node meanwhile) into FILE.
enforce() {
  local n p polls=() tag
  tag=$(basename "$1" .json)
  rm -f "$STOP"
  for n in $(node_names); do
    k8s_exec "$DIR" "$n" python3 "$PY" poll --stop "$STOP" >"$1.poll-$n" 2>"$1.poll-$n.err" &
    POLLERS+=($!)
    polls+=(--poll "$n=$1.poll-$n")
  done
  k8s_exec "$DIR" cp python3 "$PY" measure --kubeconfig "$DIR/kubeconfig" --samples "$2" \
    --namespace "$BENCH_NS" --run-id "$RID-$tag" "${polls[@]}" >"$1" ||
    fail "measuring failed (pollers: $(cat "$1".poll-*.err))"
  touch "$STOP"
  for p in "${POLLERS[@]}"; do wait "$p" || true; done
  POLLERS=()
}

# --- the run -------------------------------------------------------------------------

phase "build: setup-k8s.sh (cached), images"
bash "$REPO/scripts/setup-k8s.sh" >/dev/null
build_images "$WORK"
python3 -m py_compile "$PY"

DIR=$WORK/native
phase "cluster: two nodes, Sarena (eBPF, native routing), DNS"
cluster_up native
phase "measured pods, idle daemons"
measured_pods
for n in $(node_names); do daemon_pid "$n" >/dev/null || fail "no sarena-daemon process in the netns of $n"; done
settle 0
memory_json "$OUT/idle-rss.json"
log "idle daemons: VmRSS $(cat "$OUT/idle-rss.json") MiB, VmHWM $(cat "$OUT/idle-rss.json.hwm") MiB"

phase "populate: $PODS pods, $POLICIES policies"
POP_SMALL=$(populate "$PODS" "$POLICIES" 0 0)
phase "settle at $POLICIES policies"
settle "$POLICIES"
check_background "$PODS"
daemon_report "small"

phase "enforce: $SAMPLES samples"
enforce "$OUT/samples.json" "$SAMPLES"
daemon_report "after-samples"

phase "populate: $BIG_PODS pods, $BIG_POLICIES policies"
POP_BIG=$(populate "$BIG_PODS" "$BIG_POLICIES" "$PODS" "$POLICIES")
phase "settle at $BIG_POLICIES policies"
settle "$BIG_POLICIES"
check_background "$BIG_PODS"
memory_json "$OUT/rss.json"
daemon_report "big"
if [ "$BIG_SAMPLES" -gt 0 ]; then
  phase "enforce at $BIG_PODS pods, $BIG_POLICIES policies: $BIG_SAMPLES samples"
  enforce "$OUT/samples-big.json" "$BIG_SAMPLES"
  python3 "$PY" latency --samples "$OUT/samples-big.json" --label "enforce at $BIG_PODS pods, $BIG_POLICIES policies"
  daemon_report "after-big-samples"
fi
for n in $(node_names); do
  p=$(ks get pods -l app.kubernetes.io/name=sarena --field-selector "spec.nodeName=$n" -o name | head -n 1)
  ks logs "$p" -c sarena >"$OUT/daemon-$n.log" 2>&1 || true
  log "$n: daemon log: $(wc -l <"$OUT/daemon-$n.log") lines, $(grep -ciE 'warn|error' "$OUT/daemon-$n.log" || true) warn/error;" \
    "restarts $(ks get "$p" -o 'jsonpath={.status.containerStatuses[0].restartCount}')"
  grep -iE 'warn|error' "$OUT/daemon-$n.log" | tail -n 5 >&2 || true
done

phase "report"
jq -n --slurpfile i "$OUT/idle-rss.json" --slurpfile r "$OUT/rss.json" --slurpfile h "$OUT/rss.json.hwm" \
  '{idle_rss: $i[0], rss: $r[0], hwm: $h[0]}' >"$OUT/memory.json"
jq -n --argjson s "$POP_SMALL" --argjson b "$POP_BIG" '{small: $s, big: $b}' >"$OUT/populate.json"
mkdir -p "$(dirname "$OUT_JSON")"
python3 "$PY" summary --samples "$OUT/samples.json" --rss "$OUT/memory.json" --populate "$OUT/populate.json" \
  --out "$OUT_JSON" --command "$COMMAND" --pods "$PODS" --policies "$POLICIES" \
  --big-pods "$BIG_PODS" --big-policies "$BIG_POLICIES"
log "wrote $OUT_JSON"
cat "$OUT_JSON" >&2
phase ""
