#!/usr/bin/env bash
# uninstall.sh: Sarena removed from a Kubernetes cluster, every node left as
# it was before the install (README.md, "Removing Sarena"):
#   1. kubectl apply -f deploy/kubernetes/uninstall/
#      the DaemonSet sarena now runs `sarena-daemon --uninstall` on every
#      node (each pod Ready once its node is clean);
#   2. kubectl -n kube-system rollout status daemonset/sarena --timeout=10m
#   3. each node's report (the pods' logs);
#   4. kubectl delete -f deploy/kubernetes/
#      the DaemonSet (now the clean-up), the ConfigMap, the RBAC.
# When a node does not become clean in time, the reports are printed and
# nothing is deleted: the pods keep trying; run this again once fixed.
# Drain the nodes first: pods still on Sarena's network lose it, and their
# sandboxes can only be torn down once the next CNI is installed.
#
# Usage: scripts/uninstall.sh [--kubeconfig FILE] [--context NAME] [-f DIR]
#                             [--timeout DURATION] [--recover]
#   -f DIR      the manifests [deploy/kubernetes next to this script]; DIR/uninstall/
#               must hold the uninstall DaemonSet (edit both the same way)
#   --timeout   for the rollout [10m]
#   --recover   the install was already deleted (`kubectl delete -f
#               deploy/kubernetes/` stops Sarena, it does not uninstall it):
#               DIR/00-rbac.yaml is applied again first
#   KUBECTL     the kubectl command [kubectl]
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
log() { printf '[uninstall] %s\n' "$*" >&2; }
die() {
  log "ERROR: $*"
  exit 1
}

DIR=$HERE/../deploy/kubernetes TIMEOUT=10m RECOVER=0 KARGS=()
while [ $# -gt 0 ]; do
  case $1 in
    --kubeconfig) KARGS+=(--kubeconfig "${2:?--kubeconfig FILE}") && shift 2 ;;
    --kubeconfig=*) KARGS+=("$1") && shift ;;
    --context) KARGS+=(--context "${2:?--context NAME}") && shift 2 ;;
    --context=*) KARGS+=("$1") && shift ;;
    -f) DIR=${2:?-f DIR} && shift 2 ;;
    --timeout) TIMEOUT=${2:?--timeout DURATION} && shift 2 ;;
    --recover) RECOVER=1 && shift ;;
    -h | --help) sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//' && exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done
[ -d "$DIR/uninstall" ] || die "$DIR/uninstall: no such directory (-f DIR: the manifests)"
read -r -a KUBECTL_CMD <<<"${KUBECTL:-kubectl}"
kc() { "${KUBECTL_CMD[@]}" ${KARGS[@]+"${KARGS[@]}"} "$@"; }
ks() { kc -n kube-system "$@"; }

# reports: each Sarena pod's node and log (the last line is its JSON summary).
reports() {
  local pod node
  while read -r pod node; do
    [ -n "$pod" ] || continue
    echo "---- node $node ($pod)"
    ks logs "$pod" 2>&1 || true
  done < <(ks get pods -l app.kubernetes.io/name=sarena \
    -o 'jsonpath={range .items[*]}{.metadata.name} {.spec.nodeName}{"\n"}{end}')
}

if [ "$RECOVER" = 1 ]; then
  log "kubectl apply -f $DIR/00-rbac.yaml (recovery: the install was deleted)"
  kc apply -f "$DIR/00-rbac.yaml"
fi
log "kubectl apply -f $DIR/uninstall/"
kc apply -f "$DIR/uninstall/"
log "kubectl -n kube-system rollout status daemonset/sarena --timeout=$TIMEOUT"
if ! ks rollout status daemonset/sarena --timeout="$TIMEOUT"; then
  reports
  die "not every node is clean after $TIMEOUT (the reports above; the pods keep trying): nothing deleted"
fi
reports
log "every node is clean; kubectl delete -f $DIR/"
kc delete --ignore-not-found -f "$DIR/"
log "done: Sarena is removed (nodes stay NotReady until the next CNI is installed)"
