# shellcheck shell=bash
# A real Kubernetes (v1.20.2, built by scripts/setup-k8s.sh) in network
# namespaces on this machine, for the Kubernetes end-to-end tests. Sourced by
# tests (and by e2e/k8s/cluster.sh); needs root.
#
# Every function takes the cluster directory DIR first; all state lives there:
#   DIR/kubeconfig          admin (token auth, CA pinned), https://172.30.0.1:6443
#   DIR/logs/NODE.UNIT.log  cp.etcd, cp.kube-apiserver, ..., node1.kubelet, node1.UNIT
#   DIR/run/NODE.UNIT.pid   the daemons this cluster started (and .cmd: their command)
#   DIR/nodes/NODE/         ip, netns, podcidrs, kind (netns | kubelet); kubelet
#                           nodes also: net.d/ (default CNI conf dir), cni-bin/,
#                           containerd/, kubelet/, log/pods/
# Names: netns sk8s-<id>-cp and sk8s-<id>-NODE, <id> = 8 hex digits of
# sha256(DIR), so clusters in different DIRs coexist. Network: the
# control-plane netns holds bridge `underlay` 172.30.0.1/24; node number N
# (1, 2, ... in order of creation) gets eth0 172.30.0.(10+N), default route via
# 172.30.0.1. Services 10.96.0.0/12 (kubernetes = 10.96.0.1), pods
# 10.244.0.0/16, a /24 per node from the controller-manager. Nothing is
# attached to the host's own netns.
#
#   k8s_up DIR                     control plane; waits for /readyz and the
#                                  controller-manager; a failed up cleans up
#   k8s_netns_node DIR NODE        a bare node: netns + underlay address (no kubelet)
#   k8s_register_node DIR NODE     a Node object for a netns node (InternalIP
#                                  = its address); prints its podCIDR
#   k8s_kubelet_node DIR NODE [--cni-bin D] [--cni-conf D] [--image TAR]... [--no-kube-proxy]
#                                  containerd + kubelet + kube-proxy; waits for
#                                  the podCIDR (and Ready if the conf dir has a config)
#   k8s_import DIR NODE TAR...     import image tars into a kubelet node's containerd
#   k8s_start DIR NODE|cp|host UNIT CMD...   run CMD in the node's namespaces
#                                  (host: the machine's own) as a daemon of the
#                                  cluster (log DIR/logs/NODE.UNIT.log); prints its PID
#   k8s_stop DIR NODE|cp|host UNIT [SIGNAL]  stop it (SIGNAL, default SIGTERM; SIGKILL
#                                  after 15 s); UNIT may be the harness's own:
#                                  cp: etcd kube-apiserver kube-controller-manager
#                                  kube-scheduler; kubelet nodes: containerd kubelet kube-proxy
#   k8s_restart DIR NODE|cp|host UNIT [SIGNAL]  stop it, start it again with the same
#                                  command line; prints the new PID
#   k8s_kubectl DIR ARGS...        kubectl as admin, from the control-plane netns
#   k8s_exec DIR NODE|cp CMD...    CMD as the node sees the machine
#   k8s_node_ip DIR NODE           its underlay address
#   k8s_sa_kubeconfig DIR NS SA FILE   a kubeconfig with a service account's token
#   k8s_node_down DIR NODE         stop one node, remove its netns
#   k8s_down DIR                   stop everything started for DIR (by recorded
#                                  PID), kill leftover containers, remove the
#                                  netns, restore the sysctls kubelet changed
#   k8s_leftovers DIR              print what is left of DIR's cluster; fails if any
#   k8s_node_snapshot DIR NODE     the node's network state as sorted text
#                                  (harness/snapshot.sh); k8s_snapshot_diff A B
#
# A kubelet node has a private mount namespace (see harness/nodes.sh): a tmpfs
# /run, copy-on-write /etc /opt /var/lib /var/log, and /etc/cni/net.d,
# /opt/cni/bin, /var/lib/kubelet bound from its node dir, so the host's are
# never touched and a CNI DaemonSet's hostPath volumes land in the node's own
# dirs. A netns node's CMD runs with `nsenter --net` (not `ip netns exec`,
# which remounts /sys and hides /sys/fs/bpf and the cgroups).
#
# Environment: SARENA_K8S_CACHE (/var/cache/sarena-k8s), SARENA_K8S_BIN
# ($SARENA_K8S_CACHE/bin), SARENA_K8S_IMAGES ($SARENA_K8S_CACHE/images),
# SARENA_K8S_AUTHORIZATION (apiserver --authorization-mode, RBAC),
# SARENA_K8S_DAEMON_NICE (0); read by k8s_up and kept for the cluster's life
# in DIR/state.env: SARENA_K8S_UNDERLAY (172.30.0), SARENA_K8S_DUAL_STACK (0;
# 1: feature gate IPv6DualStack, pods also fd00:10:244::/56 with a /64 per
# node, services also fd00:10:96::/112, underlay also fd00:172:30::/64 with
# node N at fd00:172:30::(10+N), in DIR/nodes/NODE/ip6), SARENA_K8S_CLUSTER_DNS
# (empty; an address in 10.96.0.0/12: the kubelets' clusterDNS, for a DNS
# Service at that ClusterIP, see e2e/k8s/dns-lib.sh), SARENA_K8S_NODE_MASK
# (24; the IPv4 podCIDR size per node, 17 to 28: 26 fits 1,024 nodes in
# 10.244.0.0/16; with dual stack the IPv6 side stays a /64 each, 256 nodes).
#
# The functions are safe under `set -e`: each returns non-zero on failure
# (its work runs in a child bash with `set -euo pipefail`).

K8S_HARNESS=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export SARENA_K8S_CACHE=${SARENA_K8S_CACHE:-/var/cache/sarena-k8s}
export SARENA_K8S_BIN=${SARENA_K8S_BIN:-$SARENA_K8S_CACHE/bin}
export SARENA_K8S_IMAGES=${SARENA_K8S_IMAGES:-$SARENA_K8S_CACHE/images}

# shellcheck source=e2e/k8s/harness/common.sh
. "$K8S_HARNESS/harness/common.sh"
# shellcheck source=e2e/k8s/harness/control-plane.sh
. "$K8S_HARNESS/harness/control-plane.sh"
# shellcheck source=e2e/k8s/harness/nodes.sh
. "$K8S_HARNESS/harness/nodes.sh"
# shellcheck source=e2e/k8s/harness/teardown.sh
. "$K8S_HARNESS/harness/teardown.sh"
# shellcheck source=e2e/k8s/harness/snapshot.sh
. "$K8S_HARNESS/harness/snapshot.sh"

# _k8s_child FUNCTION ARGS...: FUNCTION in a fresh bash with errexit on, so a
# failing step stops it whatever the caller's shell options are.
_k8s_child() {
  bash -c 'set -euo pipefail; . "$1/lib.sh"; shift; "$@"' sk8s "$K8S_HARNESS" "$@"
}

k8s_up() { _k8s_child _k8s_up "$@"; }
k8s_netns_node() { _k8s_child _k8s_netns_node "$@"; }
k8s_register_node() { _k8s_child _k8s_register_node "$@"; }
k8s_kubelet_node() { _k8s_child _k8s_kubelet_node "$@"; }
k8s_import() { _k8s_child _k8s_import "$@"; }
k8s_start() { _k8s_child _k8s_start "$@"; }
k8s_sa_kubeconfig() { _k8s_child _k8s_sa_kubeconfig "$@"; }
k8s_node_down() { _k8s_child _k8s_node_down_cmd "$@"; }
k8s_down() { _k8s_child _k8s_down "$@"; }
k8s_leftovers() { _k8s_child _k8s_leftovers "$@"; }

k8s_stop() { _k8s_child _k8s_unit_cmd stop "$@"; }
k8s_restart() { _k8s_child _k8s_unit_cmd restart "$@"; }
# _k8s_unit_cmd stop|restart DIR NODE UNIT [SIGNAL]
_k8s_unit_cmd() {
  _k8s_dir "${2:-}"
  local unit=${3:?NODE}.${4:?UNIT}
  if [ "$1" = stop ]; then
    _k8s_pid "$unit" >/dev/null || _k8s_die "$unit is not running"
    _k8s_stop "$unit" 15 "${5:-TERM}"
  else
    _k8s_restart "$unit" "${5:-TERM}"
    _k8s_pid "$unit"
  fi
}

k8s_kubectl() { _k8s_child _k8s_kubectl_cmd "$@"; }
_k8s_kubectl_cmd() {
  _k8s_dir "${1:-}"
  shift
  exec nsenter --net="/run/netns/$CP_NS" -- "$SARENA_K8S_BIN/kubectl" \
    --kubeconfig "$D/kubeconfig" --cache-dir "$D/kubectl-cache" "$@"
}

# wait_until SECONDS CMD...: CMD until it succeeds (every 0.25 s), at most
# SECONDS. CMD's words are expanded once, by the caller: wrap a command
# substitution that must be re-run each time in a function.
wait_until() {
  local secs=$1 i
  shift
  for ((i = 0; i < secs * 4; i++)); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.25
  done
  return 1
}

# phase NAME: the test's next phase, logged; the time of the one before
# goes to PHASES (its name padded to PHASE_WIDTH, default 58). `phase ""`
# ends the last one.
PHASES=() PHASE_T=$SECONDS PHASE_NAME=""
phase() {
  if [ -n "$PHASE_NAME" ]; then
    PHASES+=("$(printf '%-*s %4ss' "${PHASE_WIDTH:-58}" "$PHASE_NAME" $((SECONDS - PHASE_T)))")
  fi
  PHASE_NAME=$1 PHASE_T=$SECONDS
  [ -z "$1" ] || log "== $1"
}
# phase_report: ends the last phase and logs every phase's time.
phase_report() {
  phase ""
  log "phase times:"
  printf '  %s\n' "${PHASES[@]}" >&2
}

# k ARGS...: kubectl against the cluster in $DIR.
k() { k8s_kubectl "$DIR" "$@"; }

k8s_exec() { _k8s_child _k8s_exec_cmd "$@"; }
_k8s_exec_cmd() {
  _k8s_dir "${1:-}"
  local node=${2:-}
  shift 2 || _k8s_die "exec: DIR NODE CMD..."
  [ $# -gt 0 ] || _k8s_die "exec: missing command"
  export KUBECONFIG=$D/kubeconfig
  _k8s_enter "$node" "$@"
}

k8s_node_ip() { cat "${1:?DIR}/nodes/${2:?NODE}/ip"; }

# sarena_manifests OUT ROUTING DATAPLANE: deploy/kubernetes/ (its uninstall/
# and optional/ too) copied to OUT with the ConfigMap's `routing` (native |
# vxlan) and `dataplane` (ebpf | kernel) set: the operator's edit for a
# non-default install (scripts/cluster.sh install, the tests' passes). Fails,
# saying which, when a value is unknown or the ConfigMap no longer has the line.
sarena_manifests() {
  local out=$1 routing=$2 dataplane=$3 cfg
  case $routing in native | vxlan) ;; *) echo "routing '$routing': native or vxlan" >&2 && return 1 ;; esac
  case $dataplane in ebpf | kernel) ;; *) echo "dataplane '$dataplane': ebpf or kernel" >&2 && return 1 ;; esac
  rm -rf "$out" && cp -r "$K8S_HARNESS/../../deploy/kubernetes" "$out" || return 1
  cfg=$out/10-config.yaml
  sed -i -e "s/^\(    routing = \)\"native\"/\1\"$routing\"/" \
    -e "s/^\(    dataplane = \)\"ebpf\"/\1\"$dataplane\"/" "$cfg"
  grep -qx "    routing = \"$routing\"" "$cfg" || { echo "could not set routing = \"$routing\" in $cfg" >&2 && return 1; }
  grep -qx "    dataplane = \"$dataplane\"" "$cfg" || { echo "could not set dataplane = \"$dataplane\" in $cfg" >&2 && return 1; }
}

# image_mismatch TAG DEPLOY_DIR: every `image:` of DEPLOY_DIR's manifests (the
# install's and uninstall/'s) is TAG (build-image.sh's); prints the first
# file:line that is not, or that there is none, and fails.
image_mismatch() {
  local tag=$1 dir=$2 found
  found=$(grep -Hn -E '^[[:space:]-]*image:[[:space:]]' "$dir"/*.yaml "$dir"/uninstall/*.yaml 2>/dev/null) || true
  if [ -z "$found" ]; then
    echo "no image: line in $dir/*.yaml"
    return 1
  fi
  awk -v t="$tag" '{ for (i = 1; i < NF; i++) if ($i ~ /image:$/) { img = $(i + 1); break }
    split($0, p, ":"); if (img != t) { print p[1] ":" p[2] ": " img; bad = 1; exit } }
    END { exit bad }' <<<"$found"
}
