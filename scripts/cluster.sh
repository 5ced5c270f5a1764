#!/usr/bin/env bash
# cluster.sh: a local Kubernetes cluster with Sarena in it, to try Sarena the
# way an operator runs it (as root). A real Kubernetes 1.20.2 in network
# namespaces of this machine (e2e/k8s/lib.sh): a control plane and N kubelet
# nodes (containerd, kube-proxy), Sarena's image built from this checkout
# and imported into every node, then `kubectl apply -f deploy/kubernetes/`.
# The first `up` builds Kubernetes from Debian's source, offline
# (scripts/setup-k8s.sh: about 30 min on 2 cores; cached after). Sarena's
# own Kubernetes tests bring their clusters up with this command.
#
# Usage: scripts/cluster.sh COMMAND [--dir DIR] [OPTIONS]
#   up [--nodes N] [--routing native|vxlan] [--dataplane ebpf|kernel] [--no-install]
#      [--port PORT] [--node-prefix P] [--image TAR] [--import TAR]...
#         the cluster: N kubelet nodes (2) named P1..PN (P: node), then
#         `install` (unless --no-install); prints the KUBECONFIG to use.
#         --port: the API on the host at 127.0.0.1:PORT (the first free from
#         16443); --image: Sarena's image, prebuilt (default: built by
#         scripts/build-image.sh); --import: more images for every node
#         (there is no registry: use imagePullPolicy: Never)
#   install [--routing native|vxlan] [--dataplane ebpf|kernel] [--manifests MDIR]
#         kubectl apply -f deploy/kubernetes/ (for another routing or
#         dataplane, a copy with the ConfigMap edited; MDIR: those manifests
#         as they are), the DaemonSet rolled out, every node Ready
#   status   the cluster's daemons, nodes and Sarena's pods
#   kubectl ARGS...   kubectl as the cluster's admin (--dir comes first)
#   down [--keep]     everything stopped, the netns and DIR removed (--keep:
#         DIR kept, for its logs); fine when nothing is up
# DIR: the cluster's directory [$SARENA_CLUSTER_DIR, else /var/tmp/sarena-cluster]:
# kubeconfig.host (from the host), kubeconfig (inside the netns), logs/,
# nodes/NODE/; outside /run, /var/lib, /var/log, /etc and /opt.
# Environment: SARENA_BIN_DIR=DIR (the image from these binaries, no
# cargo), SARENA_CLUSTER_PORT, SARENA_K8S_KEEP=1 (a failed up keeps DIR),
# and e2e/k8s/lib.sh's SARENA_K8S_* (SARENA_K8S_DUAL_STACK=1, ...).
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=e2e/k8s/lib.sh
. "$REPO/e2e/k8s/lib.sh"
# shellcheck source=scripts/apt.sh
. "$REPO/scripts/apt.sh"

log() { printf '[cluster] %s\n' "$*" >&2; }
die() {
  log "ERROR: $*"
  exit 1
}
# usage: the header above
usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }

DEFAULT_DIR=${SARENA_CLUSTER_DIR:-/var/tmp/sarena-cluster}
DIR=$DEFAULT_DIR
# made by up in DIR: down removes no directory without it
MARK=.sarena-cluster
# the first port tried for the API on the host
PORT_BASE=16443

# need OPTION [VALUE...]: OPTION has a value.
need() {
  if [ $# -lt 2 ] || [ -z "$2" ] || [[ $2 == --* ]]; then die "$1 needs a value (see --help)"; fi
}
bad_option() { die "unknown option '$1' for '$2' (see --help)"; }

# --- the cluster directory ------------------------------------------------------

# set_dir: DIR absolute (socat's address syntax takes no ',' ':' '!'),
# where the harness accepts it.
set_dir() {
  [[ $DIR =~ ^[A-Za-z0-9._/@+-]+$ ]] || die "--dir '$DIR': letters, digits and . _ / @ + - only"
  DIR=$(realpath -m -- "$DIR")
  (_k8s_dir_place "$DIR") || die "--dir $DIR: choose another directory"
}

# dir_opt: " --dir DIR" for a command to print, when DIR is not the default.
dir_opt() { [ "$DIR" = "$(realpath -m -- "$DEFAULT_DIR")" ] || printf ' --dir %s' "$DIR"; }

# is_up: DIR's apiserver runs.
is_up() {
  [ -e "$DIR/state.env" ] && (_k8s_dir "$DIR" && _k8s_pid cp.kube-apiserver) >/dev/null 2>&1
}
require_up() { is_up || die "no cluster up in $DIR (scripts/cluster.sh up first)"; }

host_kubectl() {
  "$SARENA_K8S_BIN/kubectl" --kubeconfig "$DIR/kubeconfig.host" --cache-dir "$DIR/kubectl-cache" "$@"
}

# teardown KEEP: everything of DIR's cluster stopped (the harness's down),
# its nodes' bpffs pins (the daemons leave them, by design) removed, then
# DIR unless KEEP=1. Fails, keeping DIR, when anything is left.
teardown() {
  local keep=$1 nodes n left
  nodes=$(ls "$DIR/nodes" 2>/dev/null || true)
  if [ -e "$DIR/state.env" ]; then k8s_down "$DIR" >>"$DIR/down.log" 2>&1 || true; fi
  for n in $nodes; do rm -rf "/sys/fs/bpf/sarena-node/$n"; done
  rmdir /sys/fs/bpf/sarena-node 2>/dev/null || true
  if ! left=$(k8s_leftovers "$DIR"); then
    log "left after down (kept: $DIR; the down's log: $DIR/down.log):"
    printf '  %s\n' "$left" >&2
    return 1
  fi
  [ "$keep" = 1 ] || rm -rf --one-file-system "$DIR"
}

# --- the API on the host --------------------------------------------------------

port_free() { [ -z "$(ss -Hltn "sport = :$1")" ]; }

# forward_api PORT: the apiserver at 127.0.0.1:PORT on the host, through two
# socats, units of the cluster (down stops them): in the control-plane netns
# from a Unix socket in DIR to the apiserver, on the host from the port to
# that socket (a socket file is reachable from every netns). The apiserver's
# certificate names 127.0.0.1: kubectl verifies it as it does inside.
# Writes DIR/kubeconfig.host.
forward_api() {
  local port=$1 server
  server=$(sed -n 's|^    server: https://||p' "$DIR/kubeconfig")
  [ -n "$server" ] || die "no server in $DIR/kubeconfig"
  k8s_start "$DIR" cp api-socket socat "UNIX-LISTEN:$DIR/api.sock,fork,unlink-early,perm=600" "TCP:$server" >/dev/null
  k8s_start "$DIR" host api-forward socat "TCP-LISTEN:$port,bind=127.0.0.1,reuseaddr,fork" \
    "UNIX-CONNECT:$DIR/api.sock" >/dev/null
  (
    umask 077
    sed -e "1s|.*|# cluster $DIR from the host: 127.0.0.1:$port is forwarded to $server (scripts/cluster.sh)|" \
      -e "s|^    server: https://$server\$|    server: https://127.0.0.1:$port|" "$DIR/kubeconfig" >"$DIR/kubeconfig.host.tmp"
  )
  mv "$DIR/kubeconfig.host.tmp" "$DIR/kubeconfig.host"
  wait_until 30 host_kubectl get --raw /readyz ||
    die "the API does not answer at https://127.0.0.1:$port (logs: $DIR/logs/host.api-forward.log, $DIR/logs/cp.api-socket.log)"
}

# print_usage: how to reach the cluster (stdout).
print_usage() {
  local server
  server=$(sed -n 's|^    server: ||p' "$DIR/kubeconfig.host")
  cat <<EOF
export KUBECONFIG=$DIR/kubeconfig.host   # $server, as the cluster's admin
export PATH=$SARENA_K8S_BIN:\$PATH   # kubectl v1.20.2
kubectl get nodes -o wide
kubectl -n kube-system get pods -o wide
bash $REPO/scripts/cluster.sh status$(dir_opt)   # or: kubectl ARGS..., down
EOF
}

# --- install --------------------------------------------------------------------

# install_sarena ROUTING DATAPLANE [MANIFESTS]: what an operator does, timed.
install_sarena() {
  local routing=$1 dataplane=$2 src=${3:-} what t0=$SECONDS nodes
  if [ -n "$src" ]; then
    [ -f "$src/20-daemonset.yaml" ] || die "--manifests $src: no 20-daemonset.yaml there"
    what=$src
  elif [ "$routing:$dataplane" = native:ebpf ]; then
    src=$REPO/deploy/kubernetes what=deploy/kubernetes/
  else
    src=$DIR/deploy
    sarena_manifests "$src" "$routing" "$dataplane" || die "could not edit the manifests' ConfigMap"
    what="deploy/kubernetes/ with routing = \"$routing\", dataplane = \"$dataplane\" ($src)"
  fi
  log "install: kubectl apply -f $what"
  # the daemons read the ConfigMap at start only (10-config.yaml)
  if k -n kube-system get daemonset sarena >/dev/null 2>&1; then
    log "the DaemonSet was there already: a changed ConfigMap takes effect after kubectl -n kube-system rollout restart daemonset/sarena"
  fi
  k apply -f "$src/" >/dev/null
  if ! k -n kube-system rollout status daemonset/sarena --timeout=180s >/dev/null; then
    k -n kube-system get pods -l app.kubernetes.io/name=sarena -o wide >&2 || true
    die "the DaemonSet did not roll out in 180 s (scripts/cluster.sh kubectl -n kube-system describe pods)"
  fi
  if ! k wait --for=condition=Ready node --all --timeout=90s >/dev/null; then
    k get nodes >&2 || true
    die "not every node is Ready 90 s after the DaemonSet rolled out"
  fi
  nodes=$(k get nodes -o name | wc -l)
  log "Sarena installed in $((SECONDS - t0))s: DaemonSet rolled out, every node Ready ($nodes)"
}

cmd_install() {
  local routing=native dataplane=ebpf manifests="" edited=""
  while [ $# -gt 0 ]; do
    case $1 in
      --dir) need "$@" && DIR=$2 && shift 2 ;;
      --routing) need "$@" && routing=$2 edited=1 && shift 2 ;;
      --dataplane) need "$@" && dataplane=$2 edited=1 && shift 2 ;;
      --manifests) need "$@" && manifests=$(realpath -m -- "$2") && shift 2 ;;
      -h | --help) usage && exit 0 ;;
      *) bad_option "$1" install ;;
    esac
  done
  check_modes "$routing" "$dataplane"
  [ -z "$manifests" ] || [ -z "$edited" ] ||
    die "--manifests are applied as they are: set routing and dataplane in their ConfigMap, not with --routing/--dataplane"
  set_dir
  require_up
  install_sarena "$routing" "$dataplane" "$manifests"
}

check_modes() {
  case $1 in native | vxlan) ;; *) die "--routing '$1': native or vxlan" ;; esac
  case $2 in ebpf | kernel) ;; *) die "--dataplane '$2': ebpf or kernel" ;; esac
}

# --- up ---------------------------------------------------------------------------

cmd_up() {
  local nodes=2 routing=native dataplane=ebpf install=1 edited="" port=${SARENA_CLUSTER_PORT:-}
  local prefix=node image="" imports=() import_args=() name i t0=$SECONDS t tag out bad
  while [ $# -gt 0 ]; do
    case $1 in
      --dir) need "$@" && DIR=$2 && shift 2 ;;
      --nodes) need "$@" && nodes=$2 && shift 2 ;;
      --routing) need "$@" && routing=$2 edited=1 && shift 2 ;;
      --dataplane) need "$@" && dataplane=$2 edited=1 && shift 2 ;;
      --no-install) install=0 && shift ;;
      --port) need "$@" && port=$2 && shift 2 ;;
      --node-prefix) need "$@" && prefix=$2 && shift 2 ;;
      --image) need "$@" && image=$(realpath -m -- "$2") && shift 2 ;;
      --import) need "$@" && imports+=("$(realpath -m -- "$2")") && shift 2 ;;
      -h | --help) usage && exit 0 ;;
      *) bad_option "$1" up ;;
    esac
  done
  [[ $nodes =~ ^[1-9][0-9]{0,2}$ ]] || die "--nodes '$nodes': a number from 1"
  check_modes "$routing" "$dataplane"
  [ "$install" = 1 ] || [ -z "$edited" ] || die "--routing and --dataplane choose the install: not with --no-install"
  [ -z "$image" ] || [ -f "$image" ] || die "--image $image: no such file"
  for out in ${imports[@]+"${imports[@]}"}; do
    [ -f "$out" ] || die "--import $out: no such file"
    import_args+=(--image "$out")
  done
  set_dir

  # everything that can be refused is, before anything starts
  if is_up; then die "a cluster is up in $DIR: scripts/cluster.sh down$(dir_opt) first, or another --dir"; fi
  if [ -e "$DIR" ] && [ ! -e "$DIR/$MARK" ] && [ -n "$(ls -A "$DIR" 2>/dev/null)" ]; then
    die "--dir $DIR: not empty and not made by scripts/cluster.sh: choose another"
  fi
  if [ -n "$port" ]; then
    if ! [[ $port =~ ^[1-9][0-9]{0,4}$ ]] || [ "$port" -gt 65535 ]; then die "--port '$port': 1-65535"; fi
    port_free "$port" || die "--port $port: something listens on it already"
  else
    for ((port = PORT_BASE; port < PORT_BASE + 100; port++)); do port_free "$port" && break; done
    port_free "$port" || die "no free port in $PORT_BASE-$((PORT_BASE + 99)): choose one with --port"
  fi
  if [ -e "$DIR/$MARK" ]; then
    log "removing the stopped cluster in $DIR"
    teardown 0 || die "could not remove the stopped cluster in $DIR"
  fi
  for ((i = 1; i <= nodes; i++)); do
    name=$prefix$i
    # the harness's rule for node names (D and ID: placeholders, unused)
    (D=/ ID=0 _k8s_node_vars "$name") || die "--node-prefix '$prefix' makes node name '$name'"
    [ ! -e "/sys/fs/bpf/sarena-node/$name" ] ||
      die "/sys/fs/bpf/sarena-node/$name exists: a node $name runs Sarena in another cluster (or a crash left its pins): choose another --node-prefix"
  done

  ensure_packages socat # the API forwarder
  if [ ! -x "$SARENA_K8S_BIN/kubelet" ]; then
    log "first run: scripts/setup-k8s.sh builds Kubernetes 1.20.2 from Debian's source, offline (about 30 min on 2 cores; cached in $SARENA_K8S_CACHE after)"
  fi
  bash "$REPO/scripts/setup-k8s.sh" >/dev/null

  mkdir -p "$DIR"
  touch "$DIR/$MARK"
  # a failed up leaves nothing (SARENA_K8S_KEEP=1: DIR with its logs)
  # shellcheck disable=SC2154 # rc is the trap's own
  trap 'rc=$?; if [ $rc != 0 ]; then log "up failed: stopping what it started$([ "${SARENA_K8S_KEEP:-0}" = 1 ] && echo ", keeping $DIR" || echo " and removing $DIR (SARENA_K8S_KEEP=1 keeps it, with the logs)")"; teardown "${SARENA_K8S_KEEP:-0}" || true; fi' EXIT
  trap 'exit 130' INT TERM

  t=$SECONDS
  if [ -z "$image" ]; then
    out=$(bash "$REPO/scripts/build-image.sh" -o "$DIR/sarena-image.tar") || die "scripts/build-image.sh failed"
    read -r tag image <<<"$out"
    bad=$(image_mismatch "$tag" "$REPO/deploy/kubernetes") || die "build-image.sh tagged $tag, but $bad"
    log "image $tag in $((SECONDS - t))s"
  fi
  k8s_up "$DIR"
  forward_api "$port"
  for ((i = 1; i <= nodes; i++)); do
    k8s_kubelet_node "$DIR" "$prefix$i" --image "$image" ${import_args[@]+"${import_args[@]}"}
  done
  if [ "$install" = 1 ]; then install_sarena "$routing" "$dataplane"; fi
  trap - EXIT
  log "up in $((SECONDS - t0))s: $nodes node(s), $([ "$install" = 1 ] && echo "Sarena installed ($routing routing, $dataplane dataplane)" || echo "no CNI yet (nodes NotReady): scripts/cluster.sh install$(dir_opt)")"
  print_usage
}

# --- status, kubectl, down ---------------------------------------------------------------

cmd_status() {
  while [ $# -gt 0 ]; do
    case $1 in
      --dir) need "$@" && DIR=$2 && shift 2 ;;
      -h | --help) usage && exit 0 ;;
      *) bad_option "$1" status ;;
    esac
  done
  set_dir
  [ -e "$DIR/$MARK" ] || die "no cluster in $DIR (scripts/cluster.sh up)"
  bash "$REPO/e2e/k8s/cluster.sh" status "$DIR"
  is_up || return 0
  echo "  Sarena:"
  k -n kube-system get daemonset,pods -l app.kubernetes.io/name=sarena -o wide 2>&1 | sed 's/^/  /'
  print_usage
}

cmd_kubectl() {
  if [ "${1:-}" = --dir ]; then
    need "$@"
    DIR=$2
    shift 2
  fi
  set_dir
  require_up
  k8s_kubectl "$DIR" "$@"
}

cmd_down() {
  local keep=0 t0=$SECONDS
  while [ $# -gt 0 ]; do
    case $1 in
      --dir) need "$@" && DIR=$2 && shift 2 ;;
      --keep) keep=1 && shift ;;
      -h | --help) usage && exit 0 ;;
      *) bad_option "$1" down ;;
    esac
  done
  set_dir
  if [ ! -e "$DIR" ]; then
    log "nothing to stop: no $DIR"
    return 0
  fi
  [ -e "$DIR/$MARK" ] || die "$DIR was not made by scripts/cluster.sh up: not touching it (e2e/k8s/cluster.sh down DIR stops a harness cluster)"
  teardown "$keep" || die "down incomplete"
  log "down in $((SECONDS - t0))s: nothing of the cluster left$([ "$keep" = 1 ] && echo "; kept $DIR" || echo ", $DIR removed")"
}

verb=${1:-}
[ $# -eq 0 ] || shift
case $verb in
  -h | --help | help) usage && exit 0 ;;
  up | install | status | kubectl | down) ;;
  "") usage >&2 && exit 2 ;;
  *) die "unknown command '$verb' (up, install, status, kubectl, down; see --help)" ;;
esac
[ "$(id -u)" = 0 ] || die "run as root"
"cmd_$verb" "$@"
