# shellcheck shell=bash
# Nodes: a netns on the underlay bridge ("netns node"), optionally with
# containerd + kubelet + kube-proxy in a private mount namespace ("kubelet
# node"). Sourced by e2e/k8s/lib.sh; runs in a child bash with `set -euo pipefail`.

# The sysctls kubelet sets at start (pkg/kubelet/cm setupKernelTunables);
# they are not per netns, so each cluster saves and restores them.
K8S_KUBELET_SYSCTLS="vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops kernel.keys.root_maxkeys kernel.keys.root_maxbytes"

_k8s_require_up() {
  _k8s_pid cp.kube-apiserver >/dev/null || _k8s_die "the control plane of $D is not up (k8s_up first)"
}

# _k8s_plug NAME: the node's netns, with eth0 on the underlay bridge.
# Sets IDX and IP; records index, ip, netns in the node dir.
_k8s_plug() {
  mkdir -p "$ND"
  if [ -s "$ND/index" ]; then
    IDX=$(cat "$ND/index")
  else
    for ((IDX = 1; IDX < 240; IDX++)); do
      cat "$D"/nodes/*/index 2>/dev/null | grep -x "$IDX" >/dev/null || break
    done
    [ "$IDX" -lt 240 ] || _k8s_die "no free node index"
    echo "$IDX" >"$ND/index"
  fi
  IP=$K8S_UNDERLAY.$((10 + IDX)) IP6=$K8S_UNDERLAY6$((10 + IDX))
  echo "$IP" >"$ND/ip"
  if [ "$K8S_DUAL_STACK" = 1 ]; then echo "$IP6" >"$ND/ip6"; fi
  echo "$NS" >"$ND/netns"
  ip netns del "$NS" 2>/dev/null || true
  ip -n "$CP_NS" link del "n$IDX" 2>/dev/null || true
  ip netns add "$NS"
  ip -n "$NS" link set lo up
  ip -n "$CP_NS" link add "n$IDX" type veth peer name eth0 netns "$NS"
  ip -n "$CP_NS" link set "n$IDX" master underlay up
  ip -n "$NS" addr add "$IP/24" dev eth0
  ip -n "$NS" link set eth0 up
  ip -n "$NS" route add default via "$K8S_CP_IP"
  # Nothing leaves the cluster's netns: the cloud metadata address the
  # kubelet probes (AWS credentials, cadvisor's cloud detection) is
  # refused at once, instead of a silent drop at the control plane that
  # held each kubelet's start-up ~4 s.
  ip -n "$NS" route add unreachable 169.254.169.254/32
  if [ "$K8S_DUAL_STACK" = 1 ]; then
    ip -n "$NS" addr add "$IP6/64" dev eth0 nodad
    ip -n "$NS" route add default via "$K8S_CP_IP6"
    nsenter --net="/run/netns/$NS" -- sh -c 'echo 1 >/proc/sys/net/ipv6/conf/all/forwarding'
  fi
  # what a node is expected to have; both are per netns
  # shellcheck disable=SC2016 # expanded by the inner sh
  nsenter --net="/run/netns/$NS" -- sh -c '
    echo 1 >/proc/sys/net/ipv4/ip_forward
    for f in /proc/sys/net/bridge/bridge-nf-call-iptables /proc/sys/net/bridge/bridge-nf-call-ip6tables; do
      if [ -e $f ]; then echo 1 >$f; fi
    done'
}

_k8s_netns_node() {
  _k8s_dir "${1:-}"
  _k8s_node_vars "${2:-}"
  _k8s_require_up
  [ ! -e "/run/netns/$NS" ] || _k8s_die "node $NAME is already up"
  _k8s_plug
  echo netns >"$ND/kind"
  _k8s_log "netns node $NAME: netns $NS, eth0 $IP/24 on the underlay"
}

# _k8s_register_node DIR NAME: a Node object for a netns node (InternalIP =
# its underlay address); waits for the controller-manager's podCIDR, routes it
# from the control plane; prints the podCIDR.
_k8s_register_node() {
  _k8s_dir "${1:-}"
  _k8s_node_vars "${2:-}"
  _k8s_require_up
  [ -s "$ND/ip" ] || _k8s_die "node $NAME has no address (k8s_netns_node first)"
  IP=$(cat "$ND/ip")
  local v6=""
  if [ -s "$ND/ip6" ]; then
    IP6=$(cat "$ND/ip6")
    v6="{\"type\": \"InternalIP\", \"address\": \"$IP6\"},"
  fi
  _k8s_kubectl apply -f - >/dev/null <<EOF
{"apiVersion": "v1", "kind": "Node",
 "metadata": {"name": "$NAME", "labels": {"kubernetes.io/hostname": "$NAME",
   "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}},
 "status": {"addresses": [{"type": "InternalIP", "address": "$IP"}, $v6
                          {"type": "Hostname", "address": "$NAME"}]}}
EOF
  _k8s_await_pod_cidr
  echo "$CIDR"
}

# _k8s_await_pod_cidr: wait for NAME's podCIDR(s), route them via IP from the
# control plane (pod -> apiserver replies, webhooks). Sets CIDR (the first).
_k8s_await_pod_cidr() {
  local i cidrs="" c
  for ((i = 0; i < 240; i++)); do
    cidrs=$(_k8s_kubectl get node "$NAME" -o 'jsonpath={.spec.podCIDRs[*]}' 2>/dev/null || true)
    [ -n "$cidrs" ] && break
    if [ -e "$RUN/$NAME.kubelet.pid" ] && ! _k8s_pid "$NAME.kubelet" >/dev/null; then
      _k8s_die "kubelet of $NAME exited (log: $LOGS/$NAME.kubelet.log)"
    fi
    sleep 0.25
  done
  [ -n "$cidrs" ] || _k8s_die "node $NAME got no podCIDR"
  echo "$cidrs" >"$ND/podcidrs"
  for c in $cidrs; do
    case $c in
      *:*) if [ -s "$ND/ip6" ]; then ip -n "$CP_NS" route replace "$c" via "$(cat "$ND/ip6")"; fi ;;
      *) ip -n "$CP_NS" route replace "$c" via "$IP" ;;
    esac
  done
  CIDR=${cidrs%% *}
}

# --- kubelet nodes ---------------------------------------------------------------

# The node's mount namespace, set up by its first process (the holder, already
# in the node's netns), joined by containerd, kubelet and kube-proxy:
#   /run            a private tmpfs (containerd state and shim sockets, runc
#                   state, CRI pod netns under /run/netns, daemons' /run/x)
#   /etc /opt /var/lib /var/log   copy-on-write views of the host's (overlayfs,
#                   upper dirs in the private /run): hostPath writes stay there
#   /var/lib/kubelet /var/lib/cni /var/log/pods /var/log/containers
#                   bound from the node dir (paths kubelet and libcni hard-code)
#   /etc/cni/net.d /opt/cni/bin   bound from --cni-conf / --cni-bin
# It stays the node's until the holder and every process in it exit.
_k8s_write_holder() {
  cat >"$ND/holder.sh" <<'EOF'
#!/bin/bash
# holder.sh NODE_DIR CNI_CONF CNI_BIN (run by e2e/k8s under unshare -m)
set -euo pipefail
trap 'echo "holder: line $LINENO: $BASH_COMMAND failed" >&2' ERR
nd=$1 conf=$2 bin=$3
mount -t tmpfs -o mode=0755,size=1g sk8s-run /run
mkdir -p -m 1777 /run/lock
mkdir -p /run/.sk8s
for base in /etc /opt /var/lib /var/log; do
  [ -d "$base" ] || continue
  o=/run/.sk8s/overlay${base//\//_}
  mkdir -p "$o/upper" "$o/work" "$o/keep"
  # overlayfs shows the lower dir without its submounts: carry them over
  subs=$(awk -v b="$base/" 'index($5, b) == 1 {print $5}' /proc/self/mountinfo | sort -u)
  [ -z "$subs" ] || mount --rbind "$base" "$o/keep"
  mount -t overlay sk8s-overlay -o "lowerdir=$base,upperdir=$o/upper,workdir=$o/work" "$base"
  for m in $subs; do mount --rbind "$o/keep${m#"$base"}" "$m"; done
  [ -z "$subs" ] || umount -l "$o/keep"
done
bind() { mkdir -p "$2" && mount --bind "$1" "$2"; }
bind "$nd/kubelet" /var/lib/kubelet
bind "$nd/cni-state" /var/lib/cni
bind "$nd/log/pods" /var/log/pods
bind "$nd/log/containers" /var/log/containers
bind "$conf" /etc/cni/net.d
bind "$bin" /opt/cni/bin
# No upstream resolver for the node's own lookups either (cadvisor's cloud
# detection asks for metadata.google.internal): the host's nameserver is
# outside the cluster, and the query waited 5 s for nothing. Mounted over
# the file, so a host whose /etc/resolv.conf is itself a mount keeps it.
: >"$nd/etc-resolv.conf"
if [ -f /etc/resolv.conf ]; then mount --bind "$nd/etc-resolv.conf" /etc/resolv.conf; fi
# shared, as on a systemd host (the host here may have private mounts):
# kubelet's HostToContainer and Bidirectional volumes need it; nothing
# propagates back to the host (its copies are slaves or private)
mount --make-rshared /
touch "$nd/holder.ready"
exec sleep infinity
EOF
}

_k8s_write_containerd_config() {
  local runc
  runc=$(command -v runc) || _k8s_die "runc not installed (scripts/setup-k8s.sh)"
  cat >"$ND/containerd.toml" <<EOF
# containerd of node $NAME; /run is the node's private tmpfs
version = 2
root = "$ND/containerd"
state = "/run/containerd"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "/run/containerd/containerd.sock"
[ttrpc]
  address = "/run/containerd/containerd.sock.ttrpc"
[debug]
  address = ""
# CRI metrics on the node's own loopback (its netns): the benches read
# containerd_cri_sandbox_create_network (the network part of RunPodSandbox)
[metrics]
  address = "127.0.0.1:1338"
[plugins."io.containerd.internal.v1.opt"]
  path = "$ND/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "sarena.local/pause:3.4"
  stream_server_address = "127.0.0.1"
  enable_selinux = false
  # no CAP_SYS_RESOURCE here: never try to lower a container's oom_score_adj
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/opt/cni/bin"
    conf_dir = "/etc/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "$runc"
        SystemdCgroup = false
EOF
}

_k8s_write_kubelet_config() {
  : >"$ND/resolv.conf" # no upstream resolver (the cluster's DNS, if any, is clusterDNS)
  cat >"$ND/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $IP
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
# cgroup v1 with split hierarchies, no systemd: no per-QoS cgroups; each
# container gets /k8s.io/<id> from containerd
cgroupDriver: cgroupfs
cgroupsPerQOS: false
enforceNodeAllocatable: []
failSwapOn: false
# no CAP_SYS_RESOURCE: keep the default oom_score_adj
oomScoreAdj: 0
# no registry: imported images must never be collected
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
# absolute floors: on a large, nearly full shared disk 1% (2.5 GB of 252) made
# kubelet evict the test pods (disk pressure) in the middle of a test
evictionHard: {memory.available: "1Mi", nodefs.available: "100Mi", nodefs.inodesFree: "1%", imagefs.available: "100Mi"}
staticPodPath: $ND/manifests
volumePluginDir: $ND/kubelet/volume-plugins
clusterDomain: cluster.local
clusterDNS: [$K8S_CLUSTER_DNS]
resolvConf: $ND/resolv.conf
serializeImagePulls: false
featureGates: {IPv6DualStack: $([ "$K8S_DUAL_STACK" = 1 ] && echo true || echo false)}
EOF
}

_k8s_write_proxy_config() {
  cat >"$ND/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $D/kubeconfig}
hostnameOverride: $NAME
bindAddress: $IP
clusterCIDR: "$K8S_CLUSTER_CIDR"
mode: iptables
featureGates: {IPv6DualStack: $([ "$K8S_DUAL_STACK" = 1 ] && echo true || echo false)}
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
oomScoreAdj: 0
# zeros: leave the machine-wide conntrack sysctls alone
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
EOF
}

# _k8s_ctr NODE ARGS...: ctr against the node's containerd, namespace k8s.io
_k8s_ctr() {
  local node=$1
  shift
  _k8s_enter "$node" ctr --address /run/containerd/containerd.sock --namespace k8s.io "$@"
}

# _k8s_import DIR NODE TAR...: import image tars into a kubelet node's containerd.
_k8s_import() {
  _k8s_dir "${1:-}"
  _k8s_node_vars "${2:-}"
  shift 2
  local tar attempt why
  for tar in "$@"; do
    [ -f "$tar" ] || _k8s_die "$tar: no such image tar"
    # A second attempt: containerd's first unpack on a fresh node has failed
    # once in CI with its cause lost; the log tail and the free space below
    # name it when both attempts fail (the cluster directory is removed).
    for attempt in 1 2; do
      _k8s_ctr "$NAME" images import "$(realpath "$tar")" >>"$LOGS/$NAME.import.log" 2>&1 && break
      why="$(tail -n 5 "$LOGS/$NAME.import.log" | tr '\n' ' ')[free: $({ df -h --output=avail "$ND" 2>/dev/null || echo '?'; } | tail -n 1 | tr -d ' ')]"
      [ "$attempt" = 1 ] || _k8s_die "importing $tar into $NAME failed twice: $why"
      _k8s_warn "importing $tar into $NAME failed (attempt 1), trying again: $why"
      sleep 2
    done
  done
}

# DIRs of the other clusters whose kubelet runs now.
_k8s_other_kubelet_dirs() {
  local f
  for f in $(grep -lsxzE 'SARENA_K8S_UNIT=.+\.kubelet' /proc/[0-9]*/environ 2>/dev/null || true); do
    tr '\0' '\n' <"$f" 2>/dev/null | sed -n 's/^SARENA_K8S_DIR=//p'
  done | grep -vxF "$D" | sort -u || true
}

# Before this cluster's first kubelet: remember the machine's values (taken
# from a cluster whose kubelet already changed them, if there is one).
_k8s_save_sysctls() {
  [ ! -s "$D/sysctls.orig" ] || return 0
  local other k
  for other in $(_k8s_other_kubelet_dirs); do
    if [ -s "$other/sysctls.orig" ]; then
      cp "$other/sysctls.orig" "$D/sysctls.orig"
      return 0
    fi
  done
  for k in $K8S_KUBELET_SYSCTLS; do echo "$k=$(cat "/proc/sys/${k//.//}")"; done >"$D/sysctls.orig.tmp"
  mv "$D/sysctls.orig.tmp" "$D/sysctls.orig"
}

_k8s_any_kubelet() {
  local f
  for f in "$RUN"/*.kubelet.pid; do
    [ -e "$f" ] || continue
    f=${f##*/}
    _k8s_pid "${f%.pid}" >/dev/null && return 0
  done
  return 1
}

# After this cluster's last kubelet: put them back, unless another cluster's
# kubelet still runs (that cluster holds the same originals).
_k8s_restore_sysctls() {
  [ -s "$D/sysctls.orig" ] || return 0
  ! _k8s_any_kubelet || return 0
  if [ -n "$(_k8s_other_kubelet_dirs)" ]; then
    _k8s_log "sysctls left to the other cluster still running a kubelet"
  else
    local line k v
    while IFS= read -r line; do
      k=${line%%=*} v=${line#*=}
      [ "$(cat "/proc/sys/${k//.//}")" = "$v" ] || echo "$v" >"/proc/sys/${k//.//}" ||
        _k8s_warn "could not restore $k=$v"
    done <"$D/sysctls.orig"
  fi
  rm -f "$D/sysctls.orig"
}

_k8s_node_ready() {
  [ "$(_k8s_kubectl get node "$NAME" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}')" = True ]
}

_k8s_kubelet_node() {
  _k8s_dir "${1:-}"
  _k8s_node_vars "${2:-}"
  shift 2
  local cni_bin="" cni_conf="" proxy=1 images=() t0=$SECONDS
  while [ $# -gt 0 ]; do
    case $1 in
      --cni-bin) cni_bin=${2:?--cni-bin DIR} && shift 2 ;;
      --cni-conf) cni_conf=${2:?--cni-conf DIR} && shift 2 ;;
      --image) images+=("${2:?--image TAR}") && shift 2 ;;
      --no-kube-proxy) proxy=0 && shift ;;
      *) _k8s_die "kubelet-node: unknown option $1" ;;
    esac
  done
  _k8s_bin kubelet kube-proxy
  local tool
  for tool in containerd containerd-shim-runc-v2 ctr runc iptables conntrack unshare nsenter; do
    command -v "$tool" >/dev/null || _k8s_die "$tool not installed: run scripts/setup-k8s.sh"
  done
  for tool in pause.tar busybox.tar; do
    [ -s "$SARENA_K8S_IMAGES/$tool" ] || _k8s_die "$SARENA_K8S_IMAGES/$tool missing: run scripts/setup-k8s.sh"
  done
  _k8s_require_up
  [ ! -e "/run/netns/$NS" ] || _k8s_die "node $NAME is already up"
  # shellcheck disable=SC2154 # rc is the trap's own
  trap 'rc=$?; if [ $rc != 0 ]; then _k8s_warn "node $NAME failed, stopping it"; _k8s_node_down "$NAME"; fi' EXIT

  rm -rf --one-file-system "$ND"
  mkdir -p "$ND"/{containerd,kubelet,cni-state,log/pods,log/containers,manifests}
  echo kubelet >"$ND/kind"
  if [ -z "$cni_conf" ]; then cni_conf=$ND/net.d && mkdir -p "$cni_conf"; fi
  if [ -z "$cni_bin" ]; then # a private copy: a DaemonSet may install into it
    cni_bin=$ND/cni-bin
    mkdir -p "$cni_bin"
    cp -a /usr/lib/cni/. "$cni_bin/"
  fi
  cni_conf=$(cd "$cni_conf" && pwd -P) cni_bin=$(cd "$cni_bin" && pwd -P)
  printf '%s\n' "$cni_conf" >"$ND/cni-conf-dir"
  printf '%s\n' "$cni_bin" >"$ND/cni-bin-dir"
  _k8s_plug

  _k8s_write_holder
  # The set-up failed twice on 2026-12-03 (once in bench-policy-cluster,
  # once in a CI run's netpol-table; every other node start of those days
  # passed), cause not yet known: it now says why in its log (the failed
  # command), and is tried once more from scratch (its mount namespace
  # went with it).
  local attempt
  for attempt in 1 2; do
    _k8s_spawn "$NAME.holder" unshare --mount --propagation slave \
      nsenter --net="/run/netns/$NS" -- bash "$ND/holder.sh" "$ND" "$cni_conf" "$cni_bin"
    _k8s_wait 20 "$NAME.holder" test -e "$ND/holder.ready" && break
    _k8s_warn "node $NAME: mount namespace set-up failed (attempt $attempt): $(tail -n 3 "$LOGS/$NAME.holder.log" | tr '\n' ' ')"
    [ "$attempt" = 1 ] || _k8s_die "node $NAME: mount namespace set-up failed (log: $LOGS/$NAME.holder.log)"
    _k8s_stop "$NAME.holder" 5
  done
  local holder
  holder=$(_k8s_pid "$NAME.holder")

  _k8s_write_containerd_config
  # runc puts containers in /k8s.io/<id>; remember whether we made /k8s.io
  if ! ls -d /sys/fs/cgroup/*/k8s.io /sys/fs/cgroup/k8s.io >/dev/null 2>&1; then
    touch "$D/cgroup-k8s.io.ours"
  fi
  _k8s_spawn "$NAME.containerd" nsenter -t "$holder" -m -n -- containerd --config "$ND/containerd.toml"
  _k8s_wait 30 "$NAME.containerd" _k8s_ctr "$NAME" version ||
    _k8s_die "containerd of $NAME did not start (log: $LOGS/$NAME.containerd.log)"
  _k8s_import "$D" "$NAME" "$SARENA_K8S_IMAGES/pause.tar" "$SARENA_K8S_IMAGES/busybox.tar" \
    ${images[@]+"${images[@]}"}

  _k8s_save_sysctls
  _k8s_write_kubelet_config
  _k8s_spawn "$NAME.kubelet" nsenter -t "$holder" -m -n -- "$SARENA_K8S_BIN/kubelet" \
    --config="$ND/kubelet.yaml" --kubeconfig="$D/kubeconfig" \
    --container-runtime=remote --container-runtime-endpoint=unix:///run/containerd/containerd.sock \
    --pod-infra-container-image=sarena.local/pause:3.4 \
    --node-ip="$IP$([ "$K8S_DUAL_STACK" = 1 ] && echo ",$IP6")" --hostname-override="$NAME" --v=1
  _k8s_await_pod_cidr

  if [ "$proxy" = 1 ]; then
    _k8s_write_proxy_config
    _k8s_spawn "$NAME.kube-proxy" nsenter -t "$holder" -m -n -- "$SARENA_K8S_BIN/kube-proxy" \
      --config="$ND/kube-proxy.yaml" --v=1
    _k8s_wait 30 "$NAME.kube-proxy" _k8s_enter "$NAME" curl -sf http://127.0.0.1:10256/healthz ||
      _k8s_die "kube-proxy of $NAME not healthy (log: $LOGS/$NAME.kube-proxy.log)"
  fi
  trap - EXIT
  _k8s_log "kubelet node $NAME up in $((SECONDS - t0))s: $IP, podCIDR $CIDR, CNI conf $cni_conf, bin $cni_bin"
  if compgen -G "$cni_conf/*.conf*" >/dev/null || compgen -G "$cni_conf/*.json" >/dev/null; then
    _k8s_wait 90 "$NAME.kubelet" _k8s_node_ready || _k8s_die "node $NAME not Ready after 90s"
    _k8s_log "node $NAME Ready"
  fi
}

# _k8s_start DIR NODE UNIT CMD...: run CMD in NODE's namespaces as a daemon
# of this cluster (log: logs/NODE.UNIT.log), stopped by node-down and down.
# NODE 'host': the machine's own namespaces (e.g. a forwarder into the
# control plane, scripts/cluster.sh), stopped by down.
_k8s_start() {
  _k8s_dir "${1:-}"
  local node=${2:-} unit=${3:-}
  shift 3 || _k8s_die "start: DIR NODE UNIT CMD..."
  [ $# -gt 0 ] || _k8s_die "start: missing command"
  [[ $unit =~ ^[A-Za-z0-9_][A-Za-z0-9_.-]*$ ]] || _k8s_die "unit name '$unit': [A-Za-z0-9_.-]"
  if _k8s_reserved_unit "$node" "$unit"; then _k8s_die "unit name '$unit' is the harness's own"; fi
  case $node in cp | host) ;; *) _k8s_node_vars "$node" ;; esac
  ! _k8s_pid "$node.$unit" >/dev/null || _k8s_die "$node.$unit is already running"
  local h netns
  if [ "$node" = host ]; then
    _k8s_spawn "$node.$unit" "$@"
    _k8s_pid "$node.$unit" || _k8s_die "$node.$unit exited (log: $LOGS/$node.$unit.log)"
    return 0
  elif [ "$node" = cp ]; then
    netns=/run/netns/$CP_NS
    _k8s_spawn "$node.$unit" nsenter --net="$netns" -- "$@"
  elif h=$(_k8s_pid "$node.holder"); then
    netns=/proc/$h/ns/net
    _k8s_spawn "$node.$unit" nsenter -t "$h" -m -n -- "$@"
  elif [ -e "/run/netns/$NS" ]; then
    netns=/run/netns/$NS
    _k8s_spawn "$node.$unit" nsenter --net="$netns" -- "$@"
  else
    _k8s_die "node $node of $D is not up"
  fi
  # return once CMD runs in the node (nsenter has switched namespaces)
  local p i
  p=$(cat "$RUN/$node.$unit.pid")
  for ((i = 0; i < 100; i++)); do
    [ "$(stat -L -c %i "/proc/$p/ns/net" 2>/dev/null)" != "$(stat -L -c %i "$netns")" ] || break
    _k8s_pid "$node.$unit" >/dev/null || _k8s_die "$node.$unit exited (log: $LOGS/$node.$unit.log)"
    sleep 0.05
  done
  _k8s_pid "$node.$unit"
}
