#!/usr/bin/env bash
# Runs every end-to-end test for one mode, then the latency table (for sarena
# and custom modes beside the reference ptp+host-local, measured in the same
# run). Sarena runs on its default eBPF dataplane; then the tests of
# E2E_KERNEL_PASS run again on the kernel dataplane. The node-netns tests
# (services, antispoof) run ref, Sarena eBPF and Sarena kernel themselves.
# Exits non-zero if any failed; the last line is "N passed, N failed".
# Usage: e2e/run-all.sh [sarena|ref|custom]   (default sarena; as root; scripts/setup-e2e.sh first)
#   E2E_ONLY="libcni chaining"  run a subset; E2E_LATENCY_PODS=50  pods per mode
#   E2E_KERNEL_PASS="libcni chaining netavark"  the kernel-dataplane pass ("" for none)
#   SARENA_E2E_BACKGROUND_LOCK=FILE  upstream waits for this lock first
#     (scripts/test.sh holds it while its background lints run)
#   E2E_EBPF_SKIP="podman"  tests not run on eBPF (default: none; chaining runs
#     there with Sarena's own `bandwidth` capability instead of the reference
#     bandwidth plugin)
#   netavark is e2e/test-netavark.sh: sarena-netavark driven by a real
#     netavark (scripts/setup-netavark.sh: cargo install into
#     SARENA_NETAVARK_CACHE, default /var/cache/sarena-netavark)
#   upgrade is e2e/test-upgrade.sh: release 0.1.0 (built from git into
#     SARENA_UPGRADE_CACHE, default /var/cache/sarena-upgrade) <-> this tree
#   k8s-mode is e2e/k8s/test-k8s-mode-cluster.sh (a real Kubernetes control
#   plane; it runs scripts/setup-k8s.sh, cached after the first build);
#   node-scale is e2e/k8s/bench-node-scale.sh's smoke run, native then vxlan
#   routing (two real nodes and 38 Node objects without a kubelet: routes
#   exact, a Node added and deleted, a daemon joining; the full sweep to
#   1,000 nodes is scripts/bench.sh's);
#   k8s-deploy is e2e/k8s/test-k8s-deploy.sh (Sarena installed by its
#   DaemonSet on kubelet nodes; its pod sandbox-ready measurement only with
#   SARENA_DEPLOY_PODS="10" or "10 50", the full one);
#   k8s-uninstall is e2e/k8s/test-k8s-uninstall.sh native vxlan (Sarena
#   installed by its DaemonSet, then removed by scripts/uninstall.sh: every
#   node as before the install; SARENA_UNINSTALL_PASSES="native vxlan kernel"
#   for all three);
#   netpol-table is e2e/k8s/test-netpol-table.sh vxlan kernel (the project's
#   NetworkPolicy truth table against its own model; 2 min a pass;
#   SARENA_NETPOL_PASSES="native vxlan kernel" for all three);
#   upstream is e2e/k8s/test-upstream.sh: Kubernetes' own [sig-network]
#   [Conformance] and [Feature:NetworkPolicy] tests, one run of the suite
#   per cluster: both on native; the NetworkPolicy tests on the control (the
#   reference bridge, which enforces no policy: they must fail there) and on
#   the kernel dataplane; the conformance tests on vxlan (whose policy
#   enforcement netpol-table covers) (SARENA_UPSTREAM_PASSES overrides the
#   passes); sixteen ginkgo
#   processes (SARENA_UPSTREAM_NODES), since the NetworkPolicy tests mostly
#   wait on probes that must time out; the control's results are reused while
#   their inputs are unchanged.
set -uo pipefail
cd "$(dirname "$0")" || exit 1
# shellcheck source=e2e/lib.sh
source ./lib.sh

MODE=${1:-sarena}
read -r -a TESTS <<<"${E2E_ONLY:-libcni chaining podman containerd netavark services antispoof upgrade k8s-mode k8s-egress node-scale k8s-deploy k8s-uninstall netpol-table upstream latency}"
KERNEL_PASS=()
EBPF_SKIP=()
if [ "$MODE" = sarena ]; then
  read -r -a KERNEL_PASS <<<"${E2E_KERNEL_PASS-libcni chaining netavark}"
  read -r -a EBPF_SKIP <<<"${E2E_EBPF_SKIP-}"
fi

# Sarena: build the real binaries (incremental; a no-op when up to date)
# unless SARENA_BIN_DIR points at prebuilt ones.
if [ "$MODE" = sarena ] && [ -z "${SARENA_BIN_DIR:-}" ]; then
  echo "=============== scripts/build-release.sh (the binaries as they ship: the plugins static)"
  SARENA_BIN_DIR=$(bash "$REPO_DIR/scripts/build-release.sh") || {
    echo "0 passed, 1 failed"
    exit 1
  }
  export SARENA_BIN_DIR
fi

# Build the libcni driver once for all scripts.
export E2E_DRIVER
E2E_DRIVER=$(mktemp /tmp/sarena-e2e-driver.XXXXXX)
# Each test's output is kept too: the failed tests' last lines are printed
# again at the end, where a CI log's tail shows them.
E2E_LOGS=$(mktemp -d /tmp/sarena-e2e-logs.XXXXXX)
trap 'rm -f "$E2E_DRIVER"; rm -rf "$E2E_LOGS"' EXIT
E2E_TEST=run-all build_driver "$E2E_DRIVER"

passed=0
failed=0
failures=()
failed_logs=()
times=()
# run NAME DATAPLANE: one test (DATAPLANE: the Sarena dataplane, for the label).
run() {
  local t=$1 cmd
  echo "=============== $t ($MODE${2:+, $2})"
  case "$t" in
    latency)
      local modes=("$MODE")
      [ "$MODE" = ref ] || modes=(ref "$MODE")
      cmd=(bash ./latency.sh -n "${E2E_LATENCY_PODS:-50}" "${modes[@]}")
      ;;
    k8s-mode) cmd=(bash ./k8s/test-k8s-mode-cluster.sh "$MODE") ;;
    k8s-egress) cmd=(bash ./k8s/test-k8s-egress.sh "$MODE") ;;
    node-scale)
      if [ "$MODE" != sarena ]; then
        echo "skipped: Kubernetes mode is Sarena's own"
        return 0
      fi
      local smoke=(--levels "12 40" --samples 3 --steady-seconds 3 --settle-seconds 0 --quiet-seconds 5 --pods 200 --json '')
      cmd=(bash -c 'bash ./k8s/bench-node-scale.sh --routing native "$@" && bash ./k8s/bench-node-scale.sh --routing vxlan "$@"' node-scale "${smoke[@]}")
      ;;
    upgrade)
      if [ "$MODE" != sarena ]; then
        echo "skipped: test-upgrade.sh swaps Sarena's own releases"
        return 0
      fi
      cmd=(bash ./test-upgrade.sh sarena)
      ;;
    k8s-deploy)
      # The sandbox-ready measurement (a reference node, then 10 pods on
      # each side, ~45 s) is opt-in here: SARENA_DEPLOY_PODS=10.
      cmd=(env SARENA_DEPLOY_PODS="${SARENA_DEPLOY_PODS-}" bash ./k8s/test-k8s-deploy.sh "$MODE")
      ;;
    netavark)
      if [ "$MODE" != sarena ]; then
        echo "skipped: the netavark plugin is Sarena's own"
        return 0
      fi
      cmd=(bash ./test-netavark.sh sarena)
      ;;
    k8s-uninstall)
      if [ "$MODE" != sarena ]; then
        echo "skipped: the uninstall is Sarena's own"
        return 0
      fi
      local uninstall_passes
      read -r -a uninstall_passes <<<"${SARENA_UNINSTALL_PASSES:-native vxlan}"
      cmd=(bash ./k8s/test-k8s-uninstall.sh "${uninstall_passes[@]}")
      ;;
    netpol-table)
      if [ "$MODE" != sarena ]; then
        echo "skipped: NetworkPolicy is Sarena's own"
        return 0
      fi
      local netpol_passes
      read -r -a netpol_passes <<<"${SARENA_NETPOL_PASSES:-vxlan kernel}"
      cmd=(bash ./k8s/test-netpol-table.sh "${netpol_passes[@]}")
      ;;
    upstream)
      if [ "$MODE" != sarena ]; then
        echo "skipped: test-upstream.sh runs the reference bridge itself, as its control"
        return 0
      fi
      # Its NetworkPolicy tests judge by timeouts: not beside scripts/test.sh's
      # background jobs (the lints), which hold this lock while they run.
      if [ -n "${SARENA_E2E_BACKGROUND_LOCK:-}" ]; then
        local waited=$SECONDS
        echo "waiting for scripts/test.sh's background jobs (lock $SARENA_E2E_BACKGROUND_LOCK)"
        flock "$SARENA_E2E_BACKGROUND_LOCK" true
        echo "waited $((SECONDS - waited)) s"
      fi
      cmd=(env SARENA_UPSTREAM_CONTROL_CACHE="${SARENA_UPSTREAM_CONTROL_CACHE:-1}"
        SARENA_UPSTREAM_PASSES="${SARENA_UPSTREAM_PASSES:-control:netpol native:all vxlan:conformance kernel:netpol}"
        SARENA_UPSTREAM_NODES="${SARENA_UPSTREAM_NODES:-16}" bash ./k8s/test-upstream.sh conformance)
      ;;
    services | antispoof)
      case "$MODE" in
        sarena) cmd=(bash "./test-$t.sh" all) ;;
        ref) cmd=(bash "./test-$t.sh" ref) ;;
        *)
          echo "skipped: test-$t.sh runs its own node (ref, sarena eBPF and kernel), not custom plugins"
          return 0
          ;;
      esac
      ;;
    *) cmd=(bash "./test-$t.sh" "$MODE") ;;
  esac
  local started=$SECONDS verdict=passed log rc
  log="$E2E_LOGS/${#times[@]}-$t${2:+-$2}.log"
  "${cmd[@]}" 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  if [ "$rc" = 0 ]; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    failures+=("$t${2:+ ($2)}")
    failed_logs+=("$log")
    verdict=failed
  fi
  times+=("$(printf '%-28s %-7s %5d s' "$t${2:+ ($2)}" "$verdict" $((SECONDS - started)))")
}
for t in "${TESTS[@]}"; do
  if [ "${#EBPF_SKIP[@]}" -gt 0 ] && [[ " ${EBPF_SKIP[*]} " == *" $t "* ]]; then
    echo "=============== $t (sarena, ebpf): skipped (E2E_EBPF_SKIP), see run-all.sh"
    continue
  fi
  run "$t" "$([ "$MODE" = sarena ] && [ "$t" != services ] && [ "$t" != antispoof ] && echo ebpf)"
done
for t in "${KERNEL_PASS[@]}"; do
  SARENA_DATAPLANE=kernel run "$t" kernel
done
for log in "${failed_logs[@]}"; do
  echo "=============== the last 40 lines of $(basename "$log" .log | cut -d- -f2-) (failed)"
  tail -n 40 "$log"
  # The assertion that failed, wherever the log tails pushed it.
  grep -E '(^|\] )FAIL: ' "$log" | tail -n 5 | sed 's/^/  the failure: /' || true
done
echo "=============== per-test times"
for line in "${times[@]}"; do echo "  $line"; done
echo "==============="
[ "$failed" = 0 ] || echo "failed: ${failures[*]}"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
