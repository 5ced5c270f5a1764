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
print_phases() {
  local rc=$1 line
  PHASES+=("$(printf '%-58s %6d s' "$phase_name$([ "$rc" = 0 ] || echo " (failed)")" $((SECONDS - phase_start)))")
  echo "== phase times"
  for line in "${PHASES[@]}"; do echo "  $line"; done
  printf '  %-58s %6d s\n' "total" $((SECONDS - RUN_START))
}
# On any exit: the phase table, and no background build left running.
on_exit() {
  local rc=$?
  if [ -n "${k8s_build_pid:-}" ] && kill -0 "$k8s_build_pid" 2>/dev/null; then
    kill -- "-$k8s_build_pid" 2>/dev/null || true
  fi
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
if [ "$(id -u)" = 0 ] && { [ -z "${E2E_ONLY:-}" ] || [[ " $E2E_ONLY " == *" k8s"* ]] || [[ " $E2E_ONLY " == *" upstream "* ]]; }; then
  mkdir -p target
  SARENA_K8S_NICE=19 setsid bash scripts/setup-k8s.sh >target/setup-k8s.log 2>&1 &
  k8s_build_pid=$!
  echo "Kubernetes build started in the background (pid $k8s_build_pid, log target/setup-k8s.log)"
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

# Cheap lints first. Every tracked shell script (the e2e tests, their sourced
# libraries, the set-up scripts): -x follows each `source`, found through
# the `# shellcheck source=` directives (relative to the repository root)
# or beside the sourcing script. An exception is a `# shellcheck disable=`
# comment with its reason, on the line it excuses.
phase "shellcheck (every tracked shell script)"
mapfile -t shell_scripts < <(git ls-files '*.sh' .ci/run)
shellcheck -x --source-path=SCRIPTDIR "${shell_scripts[@]}"
# The DaemonSet's privileges, read from its manifest: not privileged, the
# exact capabilities, seccomp, read-only root, memory limit, no API token in
# the init container (e2e/k8s/test-k8s-deploy.sh checks the running pods).
phase "DaemonSet privileges (scripts/check-daemonset.py)"
python3 scripts/check-daemonset.py

# The eBPF object the privileged dataplane tests load: the one sarena-daemon's
# build script (aya-build) embeds. Under CI a missing eBPF toolchain is a
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

phase "cargo fmt --check"
cargo fmt --all -- --check
phase "cargo clippy"
cargo clippy --workspace --all-targets -- -D warnings
# The test-only fault injection (e2e/test-upgrade.sh builds the daemon with it).
cargo clippy -p sarena-daemon --features fault-injection -- -D warnings
phase "cargo doc (rustdoc warnings are errors)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps
# Every crate to be published (`publish` not false) packages, and each
# .crate builds on its own (cargo verifies them against each other through a
# temporary local registry). The packaged sarena-daemon has no
# ../sarena-ebpf: it must build on stable with no eBPF object
# (SARENA_EBPF_REQUIRED unset here) and say so. The packaged crates do not
# carry the workspace's [profile.dev]: it is given again so the verification
# reuses target/debug's dependencies (keep in step with Cargo.toml). ~3-5
# minutes on two cores, most of it sarena-core compiled once per dependent.
phase "crates package (cargo package, verified; the daemon without eBPF sources)"
# A clean clone (CI) packages as committed; elsewhere, the work tree as it is.
dirty=(--allow-dirty)
if [ "${CI:-}" = "true" ]; then dirty=(); fi
mapfile -t published < <(cargo metadata --no-deps --format-version 1 \
  | jq -r '.packages[] | select(.publish != []) | "--package=\(.name)"')
env -u SARENA_EBPF_REQUIRED cargo package "${published[@]}" "${dirty[@]}" \
  --config 'profile.dev.debug="line-tables-only"' \
  --config 'profile.dev.package."*".debug=false' 2>&1 | tee target/package.log
grep -q "no eBPF programs' sources at .*(a packaged sarena-daemon)" target/package.log || {
  echo "error: the packaged sarena-daemon's build script did not report its missing eBPF sources" >&2
  exit 1
}
phase "eBPF programs: rustfmt and clippy (pinned nightly, bpf target)"
(
  # here the directory's rust-toolchain.toml picks the pinned nightly
  cd sarena-ebpf/sarena-ebpf-programs
  cargo fmt -- --check
  cargo clippy --release --target bpfel-unknown-none -Z build-std=core \
    --target-dir ../../target/ebpf-clippy -- -D warnings
)
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
# The end-to-end tests start while the Kubernetes build may still run: the
# first ones (libcni ... upgrade, and the release build before them) need no
# Kubernetes, and each Kubernetes test's own `scripts/setup-k8s.sh` waits
# for the background build's lock before it starts (the wait is in the
# per-test times, and setup-k8s.sh logs it).
phase "end-to-end (e2e/run-all.sh sarena; per-test times above)"
e2e_rc=0
bash e2e/run-all.sh sarena || e2e_rc=$?
if [ -n "$k8s_build_pid" ]; then
  if ! wait "$k8s_build_pid"; then
    tail -n 40 target/setup-k8s.log >&2
    echo "error: scripts/setup-k8s.sh failed (log above: target/setup-k8s.log)" >&2
    exit 1
  fi
  echo "== the background Kubernetes build (target/setup-k8s.log)"
  grep -E '^\[setup-k8s\] (done|.* in [0-9])' target/setup-k8s.log | tail -n 12 || true
fi
[ "$e2e_rc" = 0 ]
