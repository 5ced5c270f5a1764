# shellcheck shell=bash
# shellcheck disable=SC2034 # the variables set here are used by the other harness files
# Identity, paths and daemon bookkeeping of one cluster directory. Sourced by
# e2e/k8s/lib.sh; these functions run in a child bash with `set -euo pipefail`
# (see _k8s_child), so they may exit on error.

K8S_SERVICE_IP=10.96.0.1

# _k8s_net_vars: the cluster's addresses, as recorded in DIR/state.env by up
# (from SARENA_K8S_UNDERLAY, SARENA_K8S_DUAL_STACK and SARENA_K8S_CLUSTER_DNS
# then). The underlay is one /24 (and with dual stack one /64) on a bridge in
# the control-plane netns. K8S_CLUSTER_DNS: the kubelets' clusterDNS (empty:
# none; e2e/k8s/dns-lib.sh deploys a DNS Service at that address).
# K8S_NODE_MASK: the IPv4 podCIDR size per node (SARENA_K8S_NODE_MASK, 24:
# 256 nodes in 10.244.0.0/16; 26: 1,024).
_k8s_net_vars() {
  K8S_UNDERLAY=${SARENA_K8S_UNDERLAY:-172.30.0} K8S_DUAL_STACK=${SARENA_K8S_DUAL_STACK:-0}
  K8S_CLUSTER_DNS=${SARENA_K8S_CLUSTER_DNS:-} K8S_NODE_MASK=${SARENA_K8S_NODE_MASK:-24}
  if [ -s "$D/state.env" ]; then
    K8S_UNDERLAY=$(sed -n 's/^UNDERLAY=//p' "$D/state.env")
    K8S_DUAL_STACK=$(sed -n 's/^DUAL_STACK=//p' "$D/state.env")
    K8S_CLUSTER_DNS=$(sed -n 's/^CLUSTER_DNS=//p' "$D/state.env")
    K8S_NODE_MASK=$(sed -n 's/^NODE_MASK=//p' "$D/state.env")
    K8S_NODE_MASK=${K8S_NODE_MASK:-24}
  fi
  [[ $K8S_NODE_MASK =~ ^(1[7-9]|2[0-8])$ ]] || _k8s_die "SARENA_K8S_NODE_MASK '$K8S_NODE_MASK': 17 to 28"
  K8S_CP_IP=$K8S_UNDERLAY.1
  K8S_UNDERLAY6=fd00:172:30:: K8S_CP_IP6=fd00:172:30::1
  K8S_SERVICE_CIDR=10.96.0.0/12 K8S_CLUSTER_CIDR=10.244.0.0/16
  if [ "$K8S_DUAL_STACK" = 1 ]; then
    K8S_SERVICE_CIDR+=,fd00:10:96::/112 K8S_CLUSTER_CIDR+=,fd00:10:244::/56
    K8S_NODE_MASK_FLAGS=(--node-cidr-mask-size-ipv4="$K8S_NODE_MASK" --node-cidr-mask-size-ipv6=64)
    K8S_FEATURE_GATES=(--feature-gates=IPv6DualStack=true)
  else
    K8S_NODE_MASK_FLAGS=(--node-cidr-mask-size="$K8S_NODE_MASK")
    K8S_FEATURE_GATES=()
  fi
}

_k8s_log() { printf '[k8s] %s\n' "$*" >&2; }
_k8s_warn() { printf '[k8s] WARNING: %s\n' "$*" >&2; }
_k8s_die() {
  printf '[k8s] ERROR: %s\n' "$*" >&2
  exit 1
}

# _k8s_dir DIR [create]: the cluster's identity and paths.
#   D      absolute DIR            ID   8 hex digits of sha256(D)
#   CP_NS  control-plane netns     RUN/LOGS/PKI  pid files, logs, certificates
_k8s_dir() {
  [ -n "${1:-}" ] || _k8s_die "missing cluster DIR"
  if [ "${2:-}" = create ]; then mkdir -p "$1"; fi
  [ -d "$1" ] || _k8s_die "$1: no such directory (k8s_up first)"
  D=$(cd "$1" && pwd -P)
  ID=$(printf %s "$D" | sha256sum | cut -c1-8)
  CP_NS=sk8s-$ID-cp
  RUN=$D/run LOGS=$D/logs PKI=$D/pki
  _k8s_net_vars
}

# _k8s_dir_place DIR (absolute): fails for a cluster DIR below a path the
# node mount namespaces lay their own views over.
_k8s_dir_place() {
  case ${1%/}/ in
    /run/* | /var/run/* | /var/lib/* | /var/log/* | /etc/* | /opt/*)
      _k8s_die "cluster DIR $1: put it outside /run, /var/lib, /var/log, /etc and /opt" ;;
  esac
}

# _k8s_node_vars NAME: NAME, ND (its dir), NS (its netns).
_k8s_node_vars() {
  NAME=${1:-}
  # cp and host name the control plane's and the machine's own units
  if ! [[ $NAME =~ ^[a-z0-9]([-a-z0-9]{0,30}[a-z0-9])?$ ]] || [ "$NAME" = cp ] || [ "$NAME" = host ]; then
    _k8s_die "node name '$NAME': [a-z0-9-], at most 32 characters, not 'cp' or 'host'"
  fi
  ND=$D/nodes/$NAME NS=sk8s-$ID-$NAME
}

_k8s_bin() {
  local b
  for b in "$@"; do
    [ -x "$SARENA_K8S_BIN/$b" ] || _k8s_die "$SARENA_K8S_BIN/$b missing: run scripts/setup-k8s.sh"
  done
}

# --- daemons -------------------------------------------------------------------
# Each daemon runs with SARENA_K8S_ID=<id> and SARENA_K8S_UNIT=<unit> in its
# environment (containerd's shims inherit them). A recorded PID is signalled
# only while its process still carries this cluster's marker, so a recycled
# PID is never hit.

_k8s_ours() { grep -qsxz "SARENA_K8S_ID=$ID" "/proc/$1/environ" 2>/dev/null; }

# _k8s_pid UNIT: prints the PID of a running unit, fails if it is not running.
_k8s_pid() {
  local p
  p=$(cat "$RUN/$1.pid" 2>/dev/null) || return 1
  [ -n "$p" ] && _k8s_ours "$p" && echo "$p"
}

# _k8s_reserved_unit NODE NAME: NAME is one of the harness's own units there.
_k8s_reserved_unit() {
  case $1:$2 in
    cp:etcd | cp:kube-apiserver | cp:kube-controller-manager | cp:kube-scheduler) return 0 ;;
    cp:* | host:*) return 1 ;;
    *:holder | *:containerd | *:kubelet | *:kube-proxy) return 0 ;;
  esac
  return 1
}

# _k8s_spawn UNIT CMD...: start CMD detached, log in $LOGS/UNIT.log; the
# command line is kept in $RUN/UNIT.cmd for _k8s_restart.
_k8s_spawn() {
  local unit=$1 i
  shift
  rm -f "$RUN/$unit.pid"
  printf '%s\0' "$@" >"$RUN/$unit.cmd"
  # shellcheck disable=SC2016 # $$ and $0 belong to the inner bash
  SARENA_K8S_ID=$ID SARENA_K8S_DIR=$D SARENA_K8S_UNIT=$unit \
    setsid nice -n "${SARENA_K8S_DAEMON_NICE:-0}" \
    bash -c 'echo $$ >"$0.tmp" && mv "$0.tmp" "$0" && exec "$@"' "$RUN/$unit.pid" "$@" \
    >>"$LOGS/$unit.log" 2>&1 </dev/null &
  for i in $(seq 100); do
    [ -s "$RUN/$unit.pid" ] && return 0
    sleep 0.05
  done
  _k8s_die "$unit did not start (log: $LOGS/$unit.log)"
}

# _k8s_restart UNIT [SIGNAL]: stop it (SIGNAL, default TERM), start it again
# with the same command line.
_k8s_restart() {
  local unit=$1 cmd=()
  [ -s "$RUN/$unit.cmd" ] || _k8s_die "$unit was never started"
  mapfile -d '' cmd <"$RUN/$unit.cmd"
  _k8s_stop "$unit" 15 "${2:-TERM}"
  _k8s_spawn "$unit" "${cmd[@]}"
}

# _k8s_stop UNIT [SECONDS] [SIGNAL] [quiet]: SIGNAL (TERM), SIGKILL after
# SECONDS (15), with a warning unless quiet.
_k8s_stop() {
  local unit=$1 secs=${2:-15} sig=${3:-TERM} quiet=${4:-} p i
  if p=$(_k8s_pid "$unit"); then
    kill "-$sig" "$p" 2>/dev/null || true
    for ((i = 0; i < secs * 10; i++)); do
      _k8s_ours "$p" || break
      sleep 0.1
    done
    if _k8s_ours "$p"; then
      [ -n "$quiet" ] || _k8s_warn "$unit ($p) still running after SIG$sig, killing it"
      kill -KILL "$p" 2>/dev/null || true
      sleep 0.2
    fi
  fi
  rm -f "$RUN/$unit.pid"
}

# _k8s_marked [UNIT_REGEX]: PIDs carrying this cluster's marker (and a unit matching).
_k8s_marked() {
  local files f p
  files=$(grep -lsxz "SARENA_K8S_ID=$ID" /proc/[0-9]*/environ 2>/dev/null || true)
  if [ -n "$files" ] && [ -n "${1:-}" ]; then
    # shellcheck disable=SC2086 # one /proc/PID/environ path per word
    files=$(grep -lsxzE "SARENA_K8S_UNIT=($1)" $files 2>/dev/null || true)
  fi
  for f in $files; do
    p=${f#/proc/}
    p=${p%/environ}
    [ "$p" = $$ ] || [ "$p" = "$BASHPID" ] || echo "$p"
  done
}

# _k8s_wait SECONDS UNIT|- CMD...: retry CMD until it succeeds; fail early if UNIT dies.
_k8s_wait() {
  local secs=$1 unit=$2 i
  shift 2
  for ((i = 0; i < secs * 4; i++)); do
    "$@" >/dev/null 2>&1 && return 0
    if [ "$unit" != - ] && ! _k8s_pid "$unit" >/dev/null; then
      _k8s_warn "$unit exited (log: $LOGS/$unit.log)"
      return 1
    fi
    sleep 0.25
  done
  return 1
}

# --- entering the namespaces -------------------------------------------------
_k8s_in_cp() { nsenter --net="/run/netns/$CP_NS" -- "$@"; }
_k8s_kubectl() {
  _k8s_in_cp "$SARENA_K8S_BIN/kubectl" --kubeconfig "$D/kubeconfig" --cache-dir "$D/kubectl-cache" "$@"
}

# _k8s_enter NODE CMD...: run CMD as the node sees the machine: a kubelet node's
# mount + network namespace, a netns node's network namespace ('cp': the
# control plane's).
_k8s_enter() {
  local node=$1 h
  shift
  if [ "$node" = cp ]; then
    _k8s_in_cp "$@"
  elif h=$(_k8s_pid "$node.holder"); then
    nsenter -t "$h" -m -n -- "$@"
  elif [ -e "/run/netns/sk8s-$ID-$node" ]; then
    nsenter --net="/run/netns/sk8s-$ID-$node" -- "$@"
  else
    _k8s_die "node $node of $D is not up"
  fi
}
