#!/usr/bin/env bash
# The benchmark command (issue 6): CNI ADD/CHECK/STATUS/DEL latency against the
# reference ptp/bridge + host-local plugins, churn, scale, the dataplane
# against a raw veth pair (pod <-> pod direct, and pod -> ClusterIP -> pod
# through kube-proxy iptables-mode rules for Sarena eBPF, Sarena kernel and
# ptp, issue 11; the eBPF programs' own ns per run, issue 16), pods on two
# nodes against the underlay (Sarena eBPF native and VXLAN, Sarena kernel,
# host-gw; then under 20,000 host FORWARD rules on every node, issue 27), the
# NetworkPolicy engine's scale and change latency (in process, issue 26),
# the whole daemon's NetworkPolicy numbers on a real two-node cluster
# (e2e/k8s/bench-policy-cluster.sh: policy created -> enforced at 1,000 pods
# and 200 policies, RSS at 10,000 pods and 1,000 policies; it builds
# Kubernetes with scripts/setup-k8s.sh the first time), Kubernetes mode at
# cluster scale (e2e/k8s/bench-node-scale.sh: two real nodes and up to 1,000
# Node objects, issue 31), pods through a real kubelet (e2e/k8s/test-k8s-deploy.sh:
# 50 and 100 pods at once on one node, issue 29) and the criterion benches; renders
# docs/benchmarks.md and docs/benchmarks-*.svg from the results. Needs iptables (the Service rules) besides iperf3.
#
# Usage (as root): bash scripts/bench.sh [--pods N] [--quick] [--no-cluster]
#   --pods N       pods per contender in the latency part (default 200)
#   --quick        a smoke run with tiny numbers, no cluster; writes
#                  target/bench-quick/, not docs/
#   --no-cluster   leave out the real-cluster parts (and their sections)
# Everything runs in throwaway network namespaces this run creates and removes.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '[bench] %s\n' "$*" >&2; }

if [ "$(id -u)" != 0 ]; then
  echo "error: scripts/bench.sh must run as root: it creates network namespaces, veths and daemons" >&2
  exit 1
fi

PODS=200
QUICK=()
CLUSTER=1
while [ "$#" -gt 0 ]; do
  case "$1" in
    --pods)
      [ "$#" -ge 2 ] || { echo "error: --pods needs a number" >&2; exit 1; }
      PODS=$2
      shift 2
      ;;
    --quick)
      QUICK=(--quick)
      CLUSTER=0
      shift
      ;;
    --no-cluster)
      CLUSTER=0
      shift
      ;;
    *)
      echo "error: unknown argument '$1' (usage: bash scripts/bench.sh [--pods N] [--quick] [--no-cluster])" >&2
      exit 1
      ;;
  esac
done
command_line="bash scripts/bench.sh"
if [ "${#QUICK[@]}" -gt 0 ]; then
  OUT=target/bench-quick DOCS=target/bench-quick
  CRITERION_ARGS=(--warm-up-time 0.2 --measurement-time 0.5)
  command_line="bash scripts/bench.sh --quick"
else
  OUT=target/bench DOCS=docs
  CRITERION_ARGS=(--warm-up-time 1 --measurement-time 3)
  [ "$PODS" = 200 ] || command_line="bash scripts/bench.sh --pods $PODS"
  [ "$CLUSTER" = 1 ] || command_line+=" --no-cluster"
fi
start=$(date +%s)

log "set-up (Debian packages, eBPF toolchain, reference plugins, iperf3)"
bash scripts/setup.sh
bash scripts/setup-e2e.sh
# GNU time measures the plugins' peak RSS; iptables installs the Service
# paths' kube-proxy rules.
# shellcheck source=scripts/apt.sh
. scripts/apt.sh
ensure_packages time iptables

# The eBPF mode is a contender: without the eBPF object there is no run.
export SARENA_EBPF_REQUIRED=1
log "release build of sarena-cni, sarena-daemon (with its eBPF object) and sarena-bench"
# The binaries as they ship (scripts/build-release.sh: the plugins static)
# are the ones measured.
SARENA_BIN_DIR=$(bash scripts/build-release.sh)
export SARENA_BIN_DIR
daemon_out="$(cargo build --release -p sarena-daemon -p sarena-benches \
  --message-format=json |
  jq -r 'select(.reason == "build-script-executed" and (.package_id | contains("sarena-daemon"))) | .out_dir' |
  tail -n1)"
if [ -z "$daemon_out" ] || [ ! -s "$daemon_out/sarena-ebpf" ]; then
  echo "error: the release build produced no eBPF object (run scripts/setup-ebpf.sh)" >&2
  exit 1
fi

log "criterion benches (IPAM, API round trip)"
# Only this run's estimates go on the page.
rm -rf target/criterion
cargo bench -p sarena-benches --benches -- "${CRITERION_ARGS[@]}"

# Exported after the cargo runs: the daemon's build script watches it.
export SARENA_EBPF_OBJECT="$daemon_out/sarena-ebpf"
log "eBPF object: $SARENA_EBPF_OBJECT"

mkdir -p "$OUT"
rm -f "$OUT/policy-cluster.json" "$OUT/node-scale.json" "$OUT/node-scale-vxlan.json" "$OUT/kubelet-pods.json"
if [ "$CLUSTER" = 1 ]; then
  log "NetworkPolicy on a real cluster (e2e/k8s/bench-policy-cluster.sh; Kubernetes built once)"
  bash scripts/setup-k8s.sh >/dev/null
  bash e2e/k8s/bench-policy-cluster.sh --out "$OUT/policy-cluster.json"
  log "Kubernetes mode at cluster scale (e2e/k8s/bench-node-scale.sh: to 1,000 nodes; native, vxlan)"
  bash e2e/k8s/bench-node-scale.sh --json "$OUT/node-scale.json"
  bash e2e/k8s/bench-node-scale.sh --routing vxlan --pods 0 --json "$OUT/node-scale-vxlan.json"
  log "Pods through a real kubelet (e2e/k8s/test-k8s-deploy.sh: 50 and 100 at once on one node; bridge + host-local, then Sarena; 2 rounds)"
  rounds=()
  for round in 1 2; do
    SARENA_DEPLOY_PODS="50 100" SARENA_DEPLOY_JSON="$(realpath -m "$OUT")/kubelet-pods.$round.json" \
      bash e2e/k8s/test-k8s-deploy.sh
    rounds+=("$OUT/kubelet-pods.$round.json")
  done
  # one file, each measurement with its round
  jq -s '.[0] + {runs: [to_entries[] | .key as $k | .value.runs[] | .round = $k + 1]}' \
    "${rounds[@]}" >"$OUT/kubelet-pods.json"
  rm -f "${rounds[@]}"
fi

log "harness: CNI latency, churn, scale, dataplane, pods across nodes, NetworkPolicy engine"
rc=0
SARENA_BENCH_COMMAND="$command_line" target/release/sarena-bench all --pods "$PODS" "${QUICK[@]}" \
  --out "$OUT" --docs "$DOCS" --criterion target/criterion || rc=$?

log "done in $(($(date +%s) - start)) s: $DOCS/benchmarks.md (results JSON in $OUT/)"
# 2: the page was written but a verification failed (listed at its end).
exit "$rc"
