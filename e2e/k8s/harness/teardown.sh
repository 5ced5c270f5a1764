# shellcheck shell=bash
# Teardown: node-down, down, and the leftover check. Carries on past errors
# (everything it can stop, it stops). Sourced by e2e/k8s/lib.sh.

# _k8s_descendants PID...: those PIDs' descendants (not themselves).
_k8s_descendants() {
  [ $# -gt 0 ] || return 0
  # pid ppid of every process; comm may hold spaces and parentheses
  sed -E 's/^([0-9]+) \(.*\) [A-Za-z] ([0-9]+) .*/\1 \2/' /proc/[0-9]*/stat 2>/dev/null |
    awk -v roots="$*" '
      { parent[$1] = $2 }
      END {
        n = split(roots, r, " "); for (i = 1; i <= n; i++) mark[r[i]] = 1
        do { grew = 0; for (p in parent) if (!(p in mark) && (parent[p] in mark)) { mark[p] = 2; grew = 1 } } while (grew)
        for (p in mark) if (mark[p] == 2) print p
      }'
}

# _k8s_container_cgroups PID...: the /k8s.io/<id> cgroup paths of those processes.
_k8s_container_cgroups() {
  local p
  for p in "$@"; do
    cut -d: -f3 "/proc/$p/cgroup" 2>/dev/null || true
  done | grep -E '^/k8s\.io/[0-9a-f]{64}$' | sort -u || true
}

_k8s_rmdir_cgroups() {
  local cg dir i
  for cg in "$@"; do
    for dir in /sys/fs/cgroup/*"$cg" /sys/fs/cgroup"$cg"; do
      [ -d "$dir" ] || continue
      for ((i = 0; i < 20; i++)); do
        rmdir "$dir" 2>/dev/null && break
        sleep 0.1
      done
      [ ! -d "$dir" ] || _k8s_warn "cgroup $dir still busy"
    done
  done
}

# _k8s_stop_units NODE: stop the daemons the tests started there (k8s_start).
_k8s_stop_units() {
  local f unit
  for f in "$RUN/$1".*.pid; do
    [ -e "$f" ] || continue
    unit=${f##*/}
    unit=${unit%.pid}
    _k8s_reserved_unit "$1" "${unit#"$1".}" || _k8s_stop "$unit" 10
  done
}

# _k8s_node_down NAME (D, ID set): stop the node's daemons and containers,
# remove its netns and its underlay port. Keeps its dir (logs, state).
_k8s_node_down() {
  local NAME ND NS flags=$-
  set +e
  _k8s_node_vars "$1"
  _k8s_stop_units "$NAME"
  _k8s_stop "$NAME.kubelet"
  _k8s_stop "$NAME.kube-proxy"
  # the containers: the shims' descendants (the shims carry our marker)
  local shims procs p id
  shims=$(_k8s_marked "$NAME\\.containerd" | grep -vx "$(_k8s_pid "$NAME.containerd" || echo none)")
  # shellcheck disable=SC2086 # PID lists
  procs="$shims $(_k8s_descendants $shims)"
  # shellcheck disable=SC2086 # PID list, one per word
  _k8s_container_cgroups $procs >>"$ND/cgroups" 2>/dev/null
  if _k8s_pid "$NAME.containerd" >/dev/null; then
    for id in $(_k8s_ctr "$NAME" tasks ls -q 2>/dev/null); do
      _k8s_ctr "$NAME" tasks kill --signal SIGKILL --all "$id" >/dev/null 2>&1
    done
  fi
  _k8s_stop "$NAME.containerd"
  for p in $procs; do kill -KILL "$p" 2>/dev/null; done
  # shellcheck disable=SC2046 # cgroup paths, one per word
  _k8s_rmdir_cgroups $(sort -u "$ND/cgroups" 2>/dev/null)
  _k8s_stop "$NAME.holder" 5
  rm -f "$ND/holder.ready"
  if [ -e "/run/netns/$NS" ]; then ip netns del "$NS" || _k8s_warn "could not delete netns $NS"; fi
  if [ -s "$ND/index" ]; then
    ip -n "$CP_NS" link del "n$(cat "$ND/index")" 2>/dev/null
  fi
  local c
  # shellcheck disable=SC2013 # one or two CIDRs on one line
  for c in $(cat "$ND/podcidrs" 2>/dev/null); do
    ip -n "$CP_NS" route del "$c" 2>/dev/null
  done
  _k8s_restore_sysctls
  if [[ $flags == *e* ]]; then set -e; fi
  return 0
}

_k8s_node_down_cmd() {
  _k8s_dir "${1:-}"
  _k8s_node_vars "${2:-}"
  _k8s_node_down "$NAME"
  _k8s_log "node $NAME down"
}

# _k8s_down_all (D, ID set): stop everything this cluster started.
_k8s_down_all() {
  local n p f flags=$-
  set +e
  # first what reaches into the cluster from the machine (no new connections)
  _k8s_stop_units host
  for n in "$D"/nodes/*/; do
    [ -d "$n" ] && _k8s_node_down "$(basename "$n")"
  done
  _k8s_stop_units cp
  _k8s_stop cp.kube-scheduler
  _k8s_stop cp.kube-controller-manager
  # its endpoint reconciler may wait 20 s for itself on the way out: no need here
  _k8s_stop cp.kube-apiserver 5 TERM quiet
  _k8s_stop cp.etcd
  # anything else still carrying the marker (a lost pid file)
  for p in $(_k8s_marked); do
    _k8s_warn "killing stray $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | cut -c1-80) ($p)"
    kill -KILL "$p" 2>/dev/null
  done
  _k8s_restore_sysctls
  if [ -e "$D/cgroup-k8s.io.ours" ] && [ -z "$(_k8s_other_kubelet_dirs)" ]; then
    rmdir /sys/fs/cgroup/*/k8s.io /sys/fs/cgroup/k8s.io 2>/dev/null
    rm -f "$D/cgroup-k8s.io.ours"
  fi
  if [ -e "/run/netns/$CP_NS" ]; then ip netns del "$CP_NS" || _k8s_warn "could not delete netns $CP_NS"; fi
  if [[ $flags == *e* ]]; then set -e; fi
  return 0
}

_k8s_down() {
  _k8s_dir "${1:-}"
  _k8s_down_all
  _k8s_log "down: $D (logs kept in $LOGS)"
}

# _k8s_leftovers DIR: prints what of this cluster is still on the machine
# (processes, netns, mounts, cgroups); fails if anything is.
_k8s_leftovers() {
  _k8s_dir "${1:-}"
  local out="" p
  for p in $(_k8s_marked); do
    out+="process $p: $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | cut -c1-80)"$'\n'
  done
  out+=$(ip netns list | awk -v id="sk8s-$ID-" 'index($1, id) == 1 {print "netns " $1}')
  out+=$(awk -v d="$D/" 'index($5, d) == 1 {print "mount " $5}' /proc/self/mountinfo)
  local cg
  for cg in $(cat "$D"/nodes/*/cgroups 2>/dev/null || true); do
    for p in /sys/fs/cgroup/*"$cg" /sys/fs/cgroup"$cg"; do
      if [ -d "$p" ]; then out+="cgroup $p"$'\n'; fi
    done
  done
  out=$(printf '%s' "$out" | sed '/^$/d')
  [ -z "$out" ] || {
    printf '%s\n' "$out"
    return 1
  }
}
