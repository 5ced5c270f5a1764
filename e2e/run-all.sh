#!/usr/bin/env bash
# Runs every end-to-end test for one mode, then the latency table (for sarena
# and custom modes beside the reference ptp+host-local, measured in the same
# run). Exits non-zero if any failed; the last line is "N passed, N failed".
# Usage: e2e/run-all.sh [sarena|ref|custom]   (default sarena; as root; scripts/setup-e2e.sh first)
#   E2E_ONLY="libcni chaining"  run a subset; E2E_LATENCY_PODS=50  pods per mode
#   k8s-mode is e2e/k8s/test-k8s-mode-cluster.sh (a real Kubernetes control
#   plane; it runs scripts/setup-k8s.sh, cached after the first build)
set -uo pipefail
cd "$(dirname "$0")" || exit 1
# shellcheck source=e2e/lib.sh
source ./lib.sh

MODE=${1:-sarena}
read -r -a TESTS <<<"${E2E_ONLY:-libcni chaining podman containerd k8s-mode latency}"

# Sarena: build the real binaries (incremental; a no-op when up to date)
# unless SARENA_BIN_DIR points at prebuilt ones.
if [ "$MODE" = sarena ] && [ -z "${SARENA_BIN_DIR:-}" ]; then
  echo "=============== cargo build --release -p sarena-cni -p sarena-daemon"
  (cd "$REPO_DIR" && cargo build --release -p sarena-cni -p sarena-daemon) || {
    echo "0 passed, 1 failed"
    exit 1
  }
  export SARENA_BIN_DIR="$REPO_DIR/target/release"
fi

# Build the libcni driver once for all scripts.
export E2E_DRIVER
E2E_DRIVER=$(mktemp /tmp/sarena-e2e-driver.XXXXXX)
trap 'rm -f "$E2E_DRIVER"' EXIT
E2E_TEST=run-all build_driver "$E2E_DRIVER"

passed=0
failed=0
failures=()
for t in "${TESTS[@]}"; do
  echo "=============== $t ($MODE)"
  if [ "$t" = latency ]; then
    modes=("$MODE")
    [ "$MODE" = ref ] || modes=(ref "$MODE")
    cmd=(bash ./latency.sh -n "${E2E_LATENCY_PODS:-50}" "${modes[@]}")
  elif [ "$t" = k8s-mode ]; then
    cmd=(bash ./k8s/test-k8s-mode-cluster.sh "$MODE")
  else
    cmd=(bash "./test-$t.sh" "$MODE")
  fi
  if "${cmd[@]}"; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    failures+=("$t")
  fi
done
echo "==============="
[ "$failed" = 0 ] || echo "failed: ${failures[*]}"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
