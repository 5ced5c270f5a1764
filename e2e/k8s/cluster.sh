#!/usr/bin/env bash
# cluster.sh: the e2e/k8s harness from the command line (as root).
#
#   cluster.sh up DIR
#   cluster.sh netns-node DIR NODE
#   cluster.sh register-node DIR NODE
#   cluster.sh kubelet-node DIR NODE [--cni-bin D] [--cni-conf D] [--image TAR]... [--no-kube-proxy]
#   cluster.sh import DIR NODE TAR...
#   cluster.sh start DIR NODE|cp|host UNIT CMD...
#   cluster.sh stop DIR NODE|cp|host UNIT [SIGNAL]
#   cluster.sh restart DIR NODE|cp|host UNIT [SIGNAL]
#   cluster.sh kubectl DIR ARGS...
#   cluster.sh exec DIR NODE|cp CMD...
#   cluster.sh sa-kubeconfig DIR NAMESPACE SERVICEACCOUNT FILE
#   cluster.sh status DIR
#   cluster.sh leftovers DIR
#   cluster.sh node-down DIR NODE
#   cluster.sh down DIR
#
# See e2e/k8s/lib.sh for what each does, the layout of DIR and the environment.
# scripts/cluster.sh is the user's command over this one: a cluster with
# Sarena installed, reachable from the host.
set -euo pipefail
# shellcheck source=e2e/k8s/lib.sh
. "$(dirname "$0")/lib.sh"

usage() {
  sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

status() {
  _k8s_dir "${1:-}"
  local f unit p
  echo "cluster $D: id $ID, netns $CP_NS"
  for f in "$RUN"/*.pid; do
    [ -e "$f" ] || continue
    unit=${f##*/}
    unit=${unit%.pid}
    if p=$(_k8s_pid "$unit"); then
      printf '  %-32s running (pid %s)\n' "$unit" "$p"
    else
      printf '  %-32s not running (log %s)\n' "$unit" "$LOGS/$unit.log"
    fi
  done
  if _k8s_pid cp.kube-apiserver >/dev/null; then _k8s_kubectl get nodes -o wide | sed 's/^/  /'; fi
}

[ "$(id -u)" = 0 ] || _k8s_die "run as root"
verb=${1:-}
[ -n "$verb" ] || usage
shift
case $verb in
  up) k8s_up "$@" ;;
  netns-node) k8s_netns_node "$@" ;;
  register-node) k8s_register_node "$@" ;;
  kubelet-node) k8s_kubelet_node "$@" ;;
  import) k8s_import "$@" ;;
  start) k8s_start "$@" ;;
  stop) k8s_stop "$@" ;;
  restart) k8s_restart "$@" ;;
  kubectl) k8s_kubectl "$@" ;;
  exec) k8s_exec "$@" ;;
  sa-kubeconfig) k8s_sa_kubeconfig "$@" ;;
  status) status "$@" ;;
  leftovers) k8s_leftovers "$@" ;;
  node-down) k8s_node_down "$@" ;;
  down) k8s_down "$@" ;;
  -h | --help | help) usage ;;
  *) usage ;;
esac
