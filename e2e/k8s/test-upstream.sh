#!/usr/bin/env bash
# Kubernetes' own network tests judge Sarena: the upstream e2e suite of
# v1.20.2 (e2e.test, built from the cluster's own source by
# scripts/setup-k8s.sh), run on a two-node cluster of e2e/k8s once per pass:
#   control  the reference bridge + host-local plugins, routes between the
#            nodes (what the suite passes with no NetworkPolicy, no fast path)
#   native   Sarena installed by its DaemonSet (deploy/kubernetes/), eBPF
#            dataplane, routing = "native"
#   vxlan    the same with routing = "vxlan"
#   kernel   the kernel dataplane (dataplane = "kernel"), routing = "native"
# Each cluster has a DNS per the Kubernetes DNS specification (the project's
# test server, e2e/k8s-dns, as the Service kube-system/kube-dns at 10.96.0.10)
# and the images the tests ask for, built offline (setup-k8s-upstream.sh).
# Prints a table, one row per test: its result on each pass. Fails when a
# test that passes on the control fails on Sarena, or when the control fails
# a test that e2e/k8s/upstream-expected.tsv does not explain.
#
# Usage (root): e2e/k8s/test-upstream.sh [conformance|netpol|all]
#   conformance  `[sig-network] ... [Conformance]` (32 tests), asserted
#   netpol       `[Feature:NetworkPolicy]`, asserted: every test passes on
#                every Sarena pass, and the control (which enforces nothing)
#                fails some, proof that they test enforcement
#   all          both, in one run of the suite per pass (one cluster each)
# Environment:
#   SARENA_UPSTREAM_PASSES="control native vxlan"  the passes, in order
#                      (any of control native vxlan kernel); PASS:SUITE runs
#                      another suite on that pass (e.g. "control:all
#                      native:all vxlan kernel:netpol")
#   SARENA_UPSTREAM_FOCUS=REGEX  only the tests whose full name matches (one
#                      test: a distinctive part of its name, e.g.
#                      'session affinity work for NodePort')
#   SARENA_UPSTREAM_NODES=2      ginkgo's parallel processes
#   SARENA_UPSTREAM_CONTROL_CACHE=1  reuse the control's results of an
#                      earlier run with the same inputs (e2e.test, images,
#                      harness, focus): the control does not depend on Sarena
#   SARENA_UPSTREAM_OUT=DIR      keep the results (TSV and JUnit per pass) in DIR
#   SARENA_BIN_DIR=DIR  sarena-daemon, sarena-cni, sarena, sarena-test-dns
#                      (default: cargo build --release)
#   SARENA_K8S_KEEP=1   keep the cluster directories
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
# shellcheck source=e2e/k8s/lib.sh
. "$HERE/lib.sh"
# shellcheck source=e2e/k8s/dns-lib.sh
. "$HERE/dns-lib.sh"
# shellcheck source=e2e/k8s/upstream-lib.sh
. "$HERE/upstream-lib.sh"

[ "$(id -u)" = 0 ] || fail "needs root"
# suite_focus SUITE: the ginkgo focus of a suite.
suite_focus() {
  case $1 in
    conformance) echo '\[sig-network\].*\[Conformance\]' ;;
    netpol) echo '\[Feature:NetworkPolicy\]' ;;
    all) echo '(\[sig-network\].*\[Conformance\]|\[Feature:NetworkPolicy\])' ;;
    *) return 1 ;;
  esac
}
SUITE=${1:-conformance}
case $SUITE in
  -h | --help) sed -n '2,40p' "$0" | sed 's/^# \{0,1\}//' && exit 0 ;;
esac
SUITE_FOCUS=$(suite_focus "$SUITE") || fail "unknown suite '$SUITE' (conformance, netpol or all)"
DEFAULT_SUITE=$SUITE
read -r -a PASSES <<<"${SARENA_UPSTREAM_PASSES:-control native vxlan}"
PHASE_WIDTH=60
RID=$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
WORK=$(mktemp -d /tmp/sarena-upstream.XXXXXX)
OUT=${SARENA_UPSTREAM_OUT:-$WORK/results}
mkdir -p "$OUT"
DIR=""

trap 'finish_run $?' EXIT
trap 'exit 130' INT TERM

phase "build: setup-k8s.sh (cached), images"
bash "$REPO/scripts/setup-k8s.sh" >/dev/null
build_images "$WORK"

# A pass is NAME or NAME:SUITE (the suite it runs, default the argument's).
focus_args=()
for entry in "${PASSES[@]}"; do
  pass=${entry%%:*}
  SUITE=$DEFAULT_SUITE
  [ "$entry" = "$pass" ] || SUITE=${entry#*:}
  SUITE_FOCUS=$(suite_focus "$SUITE") || fail "$pass: unknown suite '$SUITE'"
  focus_args+=(--focus-of "$pass=$SUITE_FOCUS")
  case $pass in control | native | vxlan | kernel) ;; *) fail "unknown pass '$pass'" ;; esac
  if [ "$pass" = control ] && control_cached "$OUT/control.tsv"; then
    log "control: results of an earlier run with the same inputs ($(control_key | cut -c1-12))"
    continue
  fi
  DIR=$WORK/$pass
  phase "$pass: cluster, two nodes, CNI, DNS"
  cluster_up "$pass"
  phase "$pass: $SUITE suite"
  run_suite "$pass" "$OUT/$pass.tsv"
  if [ "$pass" = control ] && python3 "$HERE/upstream-table.py" explained \
    --expected "$HERE/upstream-expected.tsv" "$OUT/control.tsv"; then
    control_store "$OUT/control.tsv"
  fi
  phase "$pass: down"
  k8s_down "$DIR" >/dev/null
  clear_pins
  left=$(k8s_leftovers "$DIR") || fail "left after down: $left"
  DIR=""
done

phase "table"
verdict_args=(--enforcing '\[Feature:NetworkPolicy\]' "${focus_args[@]}")
tables=()
for entry in "${PASSES[@]}"; do tables+=("$OUT/${entry%%:*}.tsv"); done
python3 "$HERE/upstream-table.py" table --expected "$HERE/upstream-expected.tsv" \
  ${verdict_args[@]+"${verdict_args[@]}"} "${tables[@]}" | tee "$OUT/table.txt"
