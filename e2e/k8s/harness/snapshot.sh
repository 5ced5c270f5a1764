# shellcheck shell=bash
# What a node looks like to the network, as normalised sorted text, so that
# two snapshots of a node taken before Sarena's install and after its
# uninstall can be compared line by line (e2e/k8s/test-k8s-uninstall.sh).
# Sourced by e2e/k8s/lib.sh; runs in a child bash with `set -euo pipefail`.
#
#   k8s_node_snapshot DIR NODE   prints the snapshot of NODE (in its network
#                                and mount namespaces; the Node object through
#                                the API)
#   k8s_snapshot_diff A B        prints `diff -u A B`; fails when they differ
#
# Every line starts with its section. Left out: statistics, lifetimes and
# timers, ifindexes and other ids that change when an unrelated object is
# re-created, and the iptables-nft tables (filter, nat, mangle, raw,
# security: kube-proxy rewrites them all the time). bpftool's programs and
# maps are global to the machine: only the counts of Sarena's names are
# taken (the e2e tests run one at a time).

_k8s_node_snapshot() {
  _k8s_dir "${1:-}"
  _k8s_node_vars "${2:-}"
  {
    # the kernel and files, in the node (harness/snapshot-node.sh)
    _k8s_enter "$NAME" bash "$K8S_HARNESS/harness/snapshot-node.sh" "$NAME"
    # the Node: its conditions' types and reasons (no times), its taints
    nsenter --net="/run/netns/$CP_NS" -- "$SARENA_K8S_BIN/kubectl" --kubeconfig "$D/kubeconfig" \
      --cache-dir "$D/kubectl-cache" get node "$NAME" -o json |
      jq -r '(.status.conditions[] | "node condition \(.type) \(.status) \(.reason // "-")"),
             (.spec.taints // [] | .[] | "node taint \(.key) \(.effect)")'
  } | LC_ALL=C sort
}

_k8s_snapshot_diff() {
  diff -u "$1" "$2"
}

k8s_node_snapshot() { _k8s_child _k8s_node_snapshot "$@"; }
k8s_snapshot_diff() { _k8s_child _k8s_snapshot_diff "$@"; }
