#!/usr/bin/env bash
# Runs every test: formatting, lints, unit tests, real-binary and privileged
# tests, and compiles the benches so they never rot.
# Under CI=true a privileged test that cannot run is a failure, not a skip.
set -euo pipefail
cd "$(dirname "$0")/.."

# The phase-time table: every phase's wall time, printed at the end of the
# run (also when a phase fails), so a slower CI run says where it went.
PHASES=()
RUN_START=$SECONDS
phase_start=$SECONDS
phase_name="set-up (scripts/setup.sh, scripts/setup-e2e.sh)"
# phase NAME: closes the running phase and starts NAME.
phase() {
  PHASES+=("$(printf '%-58s %6d s' "$phase_name" $((SECONDS - phase_start)))")
  phase_name=$1
  phase_start=$SECONDS
  echo "== $1"
}
# phase_end: the current phase's row, with no phase after it (the run's
# result is then in the rows' own marks).
phase_end() {
  PHASES+=("$(printf '%-58s %6d s' "$phase_name" $((SECONDS - phase_start)))")
  phase_name=""
}
# free_space: the space left on the checkout's and /tmp's filesystems (the
# tests' clusters and images live in /tmp; a full disk fails them oddly).
free_space() { { df -h --output=avail . /tmp 2>/dev/null || echo '? ?'; } | tail -n +2 | tr -d ' ' | paste -sd/ -; }
DISK_AT_START=$(free_space)
print_phases() {
  local rc=$1 line
  if [ -n "$phase_name" ]; then
    PHASES+=("$(printf '%-58s %6d s' "$phase_name$([ "$rc" = 0 ] || echo " (failed)")" $((SECONDS - phase_start)))")
  fi
  echo "== phase times"
  for line in "${PHASES[@]}"; do echo "  $line"; done
  # the background jobs' own steps (their wall time overlaps the phases above)
  if [ -s target/background-times.txt ]; then
    echo "  in the background (overlapping the phases above):"
    sed 's/^/    /' target/background-times.txt
  fi
  printf '  %-58s %6d s\n' "total" $((SECONDS - RUN_START))
  echo "  free disk (checkout/tmp): $DISK_AT_START at the start, $(free_space) at the end"
}
# On any exit: the phase table, and no background build left running.
on_exit() {
  local rc=$? pid
  for pid in "${k8s_build_pid:-}" "${netavark_pid:-}" "${release_pid:-}" "${lints_pid:-}"; do
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
      kill -- "-$pid" 2>/dev/null || true
    fi
  done
  # (the status as an argument: under set -e, `(exit "$rc")` here would
  # end the shell before the table on any failure)
  print_phases "$rc"
}
trap on_exit EXIT

bash scripts/setup.sh
bash scripts/setup-e2e.sh

# The Kubernetes build (scripts/setup-k8s.sh: the cluster, the upstream e2e
# suites and their images; ~27 minutes on a fresh 2-core machine, seconds
# once cached) starts now, in the background and at the lowest CPU
# priority, so it takes what the Rust phases leave idle (one crate
# compiling, linking, tests waiting on timeouts) instead of running alone
# before the Kubernetes end-to-end tests; they wait for it. Its log:
# target/setup-k8s.log. Its own process group, killed if this script exits first.
k8s_build_pid=""
mkdir -p target
rm -f target/background-times.txt
if [ "$(id -u)" = 0 ] && { [ -z "${E2E_ONLY:-}" ] || [[ " $E2E_ONLY " == *" k8s"* ]] || [[ " $E2E_ONLY " == *" upstream "* ]]; }; then
  SARENA_K8S_NICE=19 setsid bash scripts/setup-k8s.sh >target/setup-k8s.log 2>&1 &
  k8s_build_pid=$!
  echo "Kubernetes build started in the background (pid $k8s_build_pid, log target/setup-k8s.log)"
fi

# netavark (scripts/setup-netavark.sh: `cargo install netavark`, ~3 minutes
# of two cores from nothing, a second once cached) for e2e/test-netavark.sh,
# likewise in the background at the lowest priority; the test runs the
# script again, which waits for this one. Its log: target/setup-netavark.log.
netavark_pid=""
if [ "$(id -u)" = 0 ] && { [ -z "${E2E_ONLY:-}" ] || [[ " $E2E_ONLY " == *" netavark "* ]]; }; then
  # shellcheck disable=SC2016 # expanded by the inner bash
  setsid bash -c 'started=$SECONDS
    bash scripts/setup-netavark.sh
    rc=$?
    printf "%-56s %6d s\n" "netavark (scripts/setup-netavark.sh)$([ "$rc" = 0 ] || echo " (failed)")" $((SECONDS - started)) >>target/background-times.txt
    exit "$rc"' >target/setup-netavark.log 2>&1 &
  netavark_pid=$!
  echo "netavark build started in the background (pid $netavark_pid, log target/setup-netavark.log)"
fi

# A test run builds each crate once: incremental caches would only take disk
# (several GB over the workspace) on a clean clone.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"

if [ "$(id -u)" != 0 ]; then
  if [ "${CI:-}" = "true" ]; then
    echo "error: the privileged tests need root and CI=true forbids skipping them" >&2
    exit 1
  fi
  echo "warning: not root: the privileged tests are not run (reported as ignored)" >&2
fi

# Cheap lints first (the compiling ones, clippy, rustdoc and the packaging,
# run in the background during the end-to-end tests, below). Every tracked
# shell script (the e2e tests, their sourced libraries, the set-up
# scripts): -x follows each `source`, found through the `# shellcheck
# source=` directives (relative to the repository root) or beside the
# sourcing script. An exception is a `# shellcheck disable=`
# comment with its reason, on the line it excuses.
phase "shellcheck (every tracked shell script)"
mapfile -t shell_scripts < <(git ls-files '*.sh' .ci/run)
shellcheck -x --source-path=SCRIPTDIR "${shell_scripts[@]}"
# The DaemonSet's privileges, read from its manifest: not privileged, the
# exact capabilities, seccomp, read-only root, memory limit, no API token in
# the init container (e2e/k8s/test-k8s-deploy.sh checks the running pods).
phase "DaemonSet privileges (scripts/check-daemonset.py)"
python3 scripts/check-daemonset.py
phase "cargo fmt --check (scripts/lint.sh fmt)"
bash scripts/lint.sh fmt

# The eBPF object the privileged dataplane tests load: the one sarena-daemon's
# build script embeds. Under CI a missing eBPF toolchain is a
# build error, not an empty object.
if [ "${CI:-}" = "true" ]; then
  export SARENA_EBPF_REQUIRED=1
fi
phase "eBPF object (cargo build -p sarena-daemon)"
daemon_out="$(cargo build -p sarena-daemon --message-format=json \
  | jq -r 'select(.reason == "build-script-executed" and (.package_id | contains("sarena-daemon"))) | .out_dir' \
  | tail -n1)"
if [ -n "$daemon_out" ] && [ -s "$daemon_out/sarena-ebpf" ]; then
  export SARENA_EBPF_OBJECT="$daemon_out/sarena-ebpf"
  echo "using $SARENA_EBPF_OBJECT"
else
  echo "warning: no eBPF object built; the eBPF dataplane tests will fail" >&2
fi


# The release build the end-to-end tests run (e2e/run-all.sh builds it
# again: a no-op, or a wait on cargo's lock while this one finishes). Here it
# starts now, in the background at the lowest CPU priority, to take the CPU
# the next phases leave idle (cargo test mostly waits on the kernel and on
# timeouts) instead of running alone after them: ~8 minutes from nothing.
release_pid=""
if [ -z "${SARENA_BIN_DIR:-}" ]; then
  # shellcheck disable=SC2016 # expanded by the inner bash
  setsid bash -c 'started=$SECONDS
    nice -n 19 bash scripts/build-release.sh >/dev/null
    rc=$?
    printf "%-56s %6d s\n" "release build (scripts/build-release.sh)$([ "$rc" = 0 ] || echo " (failed)")" $((SECONDS - started)) >>target/background-times.txt
    exit "$rc"' >target/release-build.log 2>&1 &
  release_pid=$!
  echo "release build started in the background (pid $release_pid, log target/release-build.log)"
fi
phase "cargo test (unit, real-binary, privileged)"
# The privileged tests are #[ignore = "privileged: ..."]: as root they are
# included, and one that cannot run (no eBPF object, no bpffs) fails. The
# other #[ignore]d tests are not privileged tests, so they are skipped: helpers
# their parent test runs as a child process, and the benchmark harness's
# measurements (sarena-bench runs them below).
not_privileged=(
  --skip child_enqueue          # sarena-plugin delqueue (concurrent_enqueue_from_processes)
  --skip child_worker           # sarena-core tests/durability.rs
  --skip quick_dataplane_run    # sarena-benches dataplane
  --skip dataplane_run_from_env # sarena-benches dataplane
)
if [ "$(id -u)" = 0 ]; then
  cargo test --workspace -- --include-ignored "${not_privileged[@]}"
else
  cargo test --workspace
fi
# The benches compiled and linked so they never rot (clippy --all-targets
# has type-checked them): the criterion benches are sarena-benches' only
# bench targets, built in the dev profile on what `cargo test` just built.
# `cargo bench --no-run` built every crate's test harness again in the
# release profile with LTO (7-12 minutes) for no further check;
# scripts/bench.sh builds them optimized when it measures.
phase "benches compiled (cargo build -p sarena-benches --benches)"
cargo build -p sarena-benches --benches
phase "benchmark harness smoke run (sarena-bench all --quick)"
cargo build -p sarena-cni -p sarena-daemon -p sarena-benches
target/debug/sarena-bench all --quick --out target/bench-quick
# The compiling lints (scripts/lint.sh compiled: clippy, rustdoc, the
# packaging; ~10 minutes of two cores from nothing) run in the background
# during the end-to-end tests, at the lowest CPU priority, once the release
# build is done: those tests mostly wait (on clusters, probes, timeouts)
# and leave the cores idle. Not before now: clippy takes target/debug's
# lock, which the phases above needed. The upstream Kubernetes suites, whose
# NetworkPolicy tests judge by timeouts, wait for them to end
# (SARENA_E2E_BACKGROUND_LOCK, held meanwhile). Their log: target/lints.log,
# its end printed if one fails.
export SARENA_E2E_BACKGROUND_LOCK=$PWD/target/background.lock
# shellcheck disable=SC2016 # expanded by the inner bash
setsid flock "$SARENA_E2E_BACKGROUND_LOCK" bash -c '
  while [ -n "$1" ] && kill -0 "$1" 2>/dev/null; do sleep 2; done
  SARENA_LINT_TIMES=target/background-times.txt exec nice -n 19 bash scripts/lint.sh compiled' \
  lints "$release_pid" >target/lints.log 2>&1 &
lints_pid=$!
echo "lints started in the background (pid $lints_pid, log target/lints.log)"
# The end-to-end tests start while the Kubernetes build may still run: the
# first ones (libcni ... upgrade, and the release build before them) need no
# Kubernetes, and each Kubernetes test's own `scripts/setup-k8s.sh` waits
# for the background build's lock before it starts (the wait is in the
# per-test times, and setup-k8s.sh logs it).
phase "end-to-end (e2e/run-all.sh sarena; per-test times above)"
e2e_rc=0
bash e2e/run-all.sh sarena || e2e_rc=$?
# the table marks the phase that failed, not the one the run ended in
[ "$e2e_rc" = 0 ] || phase_name="$phase_name (failed)"
if [ -n "$k8s_build_pid" ]; then
  if ! wait "$k8s_build_pid"; then
    tail -n 40 target/setup-k8s.log >&2
    echo "error: scripts/setup-k8s.sh failed (log above: target/setup-k8s.log)" >&2
    exit 1
  fi
  echo "== the background Kubernetes build (target/setup-k8s.log)"
  grep -E '^\[setup-k8s\] (done|.* in [0-9])' target/setup-k8s.log | tail -n 12 || true
fi
# reap_background PID NAME LOG: waits for a background job; its log's end
# and an error when it failed.
reap_background() {
  wait "$1" && return 0
  tail -n 60 "$3" >&2
  echo "error: $2 failed (log above: $3)" >&2
  return 1
}
bg_rc=0
if [ -n "$netavark_pid" ]; then
  reap_background "$netavark_pid" "scripts/setup-netavark.sh" target/setup-netavark.log || bg_rc=1
fi
if [ -n "$release_pid" ]; then
  reap_background "$release_pid" "the background release build" target/release-build.log || bg_rc=1
fi
phase "waiting for the background lints"
reap_background "$lints_pid" "scripts/lint.sh compiled" target/lints.log || bg_rc=1
[ "$bg_rc" = 0 ] || phase_name="$phase_name (failed)"
phase_end
[ "$e2e_rc" = 0 ] && [ "$bg_rc" = 0 ]
