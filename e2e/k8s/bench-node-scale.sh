#!/usr/bin/env bash
# Kubernetes mode at cluster scale, on the real API server of e2e/k8s
# (Kubernetes 1.20.2): two real netns nodes, each running
# `sarena-daemon --kubernetes` (eBPF dataplane, its service account's RBAC),
# and up to a thousand "ghost" Node objects that no kubelet runs, created
# through the API with a kubelet's status (InternalIP, capacity, conditions,
# node info, 30 images: ~8 KiB each) and given podCIDRs by the
# controller-manager (a /26 per node: SARENA_K8S_NODE_MASK=26, 1,024 nodes in
# 10.244.0.0/16). The ghosts' InternalIPs are in 172.31.0.0/20, which the real
# nodes reach on-link through their eth0 (the underlay). Per level (total
# nodes, the two real ones included), grown in place:
#   grow    the new ghosts created in parallel; per ghost, the podCIDR first
#           seen by a watch of the Node objects -> its route on each real node
#           (`ip -ts monitor route` in the node's netns); the time until both
#           real nodes route every ghost;
#   exact   each real node's Sarena routes (proto 91) are exactly the other
#           nodes' podCIDRs via their InternalIPs (vxlan: via the overlay, one
#           FDB entry per peer), else the run fails;
#   probes  --samples times, one at a time: a Node added (podCIDR seen ->
#           routed on both real nodes) and deleted (deletion seen -> route
#           gone on both);
#   steady  once no Node object changed for --quiet-seconds (15: three of
#           the controller-manager's node-monitor periods), 10 s with nothing
#           happening (each daemon's CPU floor), then
#           --steady-seconds with the ghosts heartbeating (their status
#           patched, nodes/60 per second in all: 5x a 1.20 kubelet's
#           5-minute status report), from --settle-seconds (50) after the
#           level's Nodes appeared (the controller-manager's node lifecycle
#           marks them Unknown and taints them after its 40 s grace
#           period): each daemon's CPU and VmRSS / VmHWM, and
#           the bytes on its node's eth0 (only the daemon talks there: its
#           API server traffic);
#   join    node2's daemon stopped, its routes flushed, started again: the
#           time to ready and to routing every peer;
# and at the last level, with --pods M (the full sweep: 20,000), M Pod
# objects bound to the ghosts, Running at addresses of their podCIDRs: the
# time for both daemons to settle (the policy watch holds every pod), their
# memory and idle CPU.
# Targets (issue 31; reported, not asserted): at 1,000 nodes daemon RSS <=
# 64 MiB and steady CPU ~0, a Node change on every node within 1 s p99, a
# joining daemon ready within 5 s.
# Usage (root): e2e/k8s/bench-node-scale.sh [--levels "10 100 1000"]
#         [--samples 100] [--routing native|vxlan] [--steady-seconds 30]
#         [--settle-seconds 50] [--quiet-seconds 15] [--pods M] [--json FILE]
#   writes the run's JSON to FILE (default: none, the levels are printed;
#   scripts/bench.sh: target/bench/node-scale.json, rendered into
#   docs/benchmarks.md by `sarena-bench report`) and prints each level; a
#   smoke run (CI, e2e/run-all.sh node-scale):
#   --levels "12 40" --samples 3 --steady-seconds 3 --settle-seconds 0
#   --quiet-seconds 5 --pods 200
# Environment: SARENA_BIN_DIR (sarena-daemon, sarena-cni, sarena; default
# target/sarena-bin), SARENA_K8S_KEEP=1 (keep the cluster directory).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
# shellcheck source=e2e/k8s/lib.sh
. "$HERE/lib.sh"
# shellcheck source=e2e/k8s/k8s-mode-lib.sh
. "$HERE/k8s-mode-lib.sh"
log() { printf '[node-scale] %s\n' "$*" >&2; }

usage() { sed -n '2,52p' "$0" | sed 's/^# \{0,1\}//'; }
LEVELS="10 100 1000" SAMPLES=100 ROUTING=native STEADY=30 SETTLE=50 QUIET=15 PODS=20000 JSON=
while [ $# -gt 0 ]; do
  case $1 in
    --levels) LEVELS=$2 ;;
    --samples) SAMPLES=$2 ;;
    --routing) ROUTING=$2 ;;
    --steady-seconds) STEADY=$2 ;;
    --settle-seconds) SETTLE=$2 ;;
    --quiet-seconds) QUIET=$2 ;;
    --pods) PODS=$2 ;;
    --json) JSON=$2 ;;
    -h | --help) usage && exit 0 ;;
    *) usage >&2 && exit 2 ;;
  esac
  shift 2 || { usage >&2 && exit 2; }
done
for v in $LEVELS "$SAMPLES" "$STEADY" "$SETTLE" "$QUIET" "$PODS"; do [[ $v =~ ^[0-9]+$ ]] || fail "not a count: $v"; done
for v in $LEVELS; do if [ "$v" -lt 3 ] || [ "$v" -gt 1000 ]; then fail "level $v: 3 to 1000 nodes"; fi; done
case $ROUTING in native | vxlan) ;; *) fail "--routing native|vxlan, not $ROUTING" ;; esac
export SARENA_K8S_NODE_MASK=${SARENA_K8S_NODE_MASK:-26}
# podCIDRs of that size in 10.244.0.0/16 (the probes need one more)
for v in $LEVELS; do
  if [ "$v" -ge $((1 << (SARENA_K8S_NODE_MASK - 16))) ]; then
    fail "level $v: a /$SARENA_K8S_NODE_MASK per node fits $((1 << (SARENA_K8S_NODE_MASK - 16))) nodes in 10.244.0.0/16, the probes need one more"
  fi
done
export PYTHONDONTWRITEBYTECODE=1 # no __pycache__ in the tree
GHOST_UNDERLAY=172.31 GHOST_NET=172.31.0.0/20
PY=$HERE/bench-node-scale.py
# a syntax check that writes nothing (py_compile would leave __pycache__ behind)
python3 -c 'import sys; compile(open(sys.argv[1]).read(), sys.argv[1], "exec")' "$PY"
COMMAND="e2e/k8s/bench-node-scale.sh --levels \"$LEVELS\" --samples $SAMPLES --routing $ROUTING --steady-seconds $STEADY --settle-seconds $SETTLE --quiet-seconds $QUIET --pods $PODS"
if [ -n "$JSON" ]; then mkdir -p "$(dirname "$JSON")"; fi

sm_begin sarena node-scale
OUT=$DIR/results
mkdir -p "$OUT"

phase "control plane up (a /$SARENA_K8S_NODE_MASK per node)"
k8s_up "$DIR"
sm_service_account

phase "two real netns nodes, their daemons ($ROUTING routing)"
declare -A NETNS
for n in node1 node2; do
  k8s_netns_node "$DIR" "$n"
  k8s_register_node "$DIR" "$n" >/dev/null
  NETNS[$n]=$(cat "$DIR/nodes/$n/netns")
  # the ghosts' addresses: the same underlay, on-link
  k8s_exec "$DIR" "$n" ip route add "$GHOST_NET" dev eth0
  sm_daemon "$n" "$ROUTING"
done
for n in node1 node2; do wait_until 60 sm_ready "$n" "$ROUTING" || fail "the daemon on $n is not ready"; done

daemon_pid() { cat "$DIR/run/$1.sarena.pid"; }
py() { k8s_exec "$DIR" cp python3 "$PY" "$@"; }

for level in $LEVELS; do
  ghosts=$((level - 2))
  phase "$level nodes: grow, exact, probes"
  grown=$SECONDS
  py level --kubeconfig "$DIR/kubeconfig" --to "$ghosts" --underlay "$GHOST_UNDERLAY" --routing "$ROUTING" \
    --nodes "node1=${NETNS[node1]}" "node2=${NETNS[node2]}" --samples "$SAMPLES" --out "$OUT/grow-$level.json"

  phase "$level nodes: steady state (${STEADY}s)"
  sleep $((grown + SETTLE > SECONDS ? grown + SETTLE - SECONDS : 0))
  py steady --kubeconfig "$DIR/kubeconfig" --seconds "$STEADY" --quiet-seconds "$QUIET" --heartbeats "$(awk -v n="$level" 'BEGIN { print n / 60 }')" \
    --pids "node1=$(daemon_pid node1)" "node2=$(daemon_pid node2)" \
    --nodes "node1=${NETNS[node1]}" "node2=${NETNS[node2]}" --out "$OUT/steady-$level.json"

  phase "$level nodes: node2's daemon joins again"
  k8s_stop "$DIR" node2 sarena
  k8s_exec "$DIR" node2 ip route flush proto 91
  t0=$(date +%s.%N)
  k8s_restart "$DIR" node2 sarena >/dev/null
  py join --socket "$(sm_sock node2 "$ROUTING")" --netns "${NETNS[node2]}" --routes "$((level - 1))" \
    --t0 "$t0" --out "$OUT/join-$level.json"

  jq -s '.[0] + {steady: .[1], join: .[2]}' "$OUT/grow-$level.json" "$OUT/steady-$level.json" \
    "$OUT/join-$level.json" >"$OUT/level-$level.json"
  rm -f "$OUT/grow-$level.json" "$OUT/steady-$level.json" "$OUT/join-$level.json"
done

if [ "$PODS" -gt 0 ]; then
  phase "$level nodes: $PODS pods"
  py pods --kubeconfig "$DIR/kubeconfig" --count "$PODS" \
    --pids "node1=$(daemon_pid node1)" "node2=$(daemon_pid node2)" --out "$OUT/pods.json"
  jq --slurpfile pods "$OUT/pods.json" '. + {pods: $pods[0]}' "$OUT/level-$level.json" >"$OUT/level.tmp"
  mv "$OUT/level.tmp" "$OUT/level-$level.json"
fi

phase "report"
files=()
for level in $LEVELS; do files+=("$OUT/level-$level.json"); done
jq -s --arg kernel "$(uname -r)" --argjson cpus "$(nproc)" --arg date "$(date -u +%FT%TZ)" \
  --arg command "$COMMAND" --arg routing "$ROUTING" \
  '{kernel: $kernel, cpus: $cpus, date: $date, command: $command, routing: $routing, levels: .}' \
  "${files[@]}" >"$OUT/run.json"
if [ -n "$JSON" ]; then
  cp "$OUT/run.json" "$JSON"
  log "results: $JSON (sarena-bench report renders them)"
fi
