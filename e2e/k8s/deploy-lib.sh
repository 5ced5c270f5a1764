# shellcheck shell=bash
# Helpers of e2e/k8s/test-k8s-deploy.sh: Sarena installed by its DaemonSet
# on kubelet nodes of an e2e/k8s cluster, checked through the API (kubectl:
# pods, exec into them, the daemon pods' `sarena` CLI). Sourced after
# e2e/k8s/lib.sh with DIR (the cluster directory) and RID (the run's id) set.

log() { printf '[k8s-deploy] %s\n' "$*" >&2; }
fail() {
  log "FAIL: $*"
  exit 1
}

ks() { k8s_kubectl "$DIR" -n kube-system "$@"; }

# --- nodes and the daemon pods ------------------------------------------------

# node_ready NODE: "True" or "False" (kubelet's Ready condition).
node_ready() { k get node "$1" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}'; }
# node_ready_since NODE: the Ready condition's lastTransitionTime.
node_ready_since() { k get node "$1" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].lastTransitionTime}'; }
is_ready() { [ "$(node_ready "$1")" = True ]; }
is_not_ready() { [ "$(node_ready "$1")" = False ]; }

# ds_pod NODE: the name of the Sarena pod on NODE that is not terminating
# (empty while there is none).
ds_pod() {
  ks get pods -l app.kubernetes.io/name=sarena --field-selector "spec.nodeName=$1" -o json |
    jq -r '[.items[] | select(.metadata.deletionTimestamp == null) | .metadata.name][0] // empty'
}

# ds_pod_ready NODE: the Sarena pod on NODE exists and is Ready.
ds_pod_ready() {
  local p
  p=$(ds_pod "$1")
  [ -n "$p" ] && [ "$(ks get pod "$p" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}')" = True ]
}

# sarena_on NODE ARGS...: the `sarena` CLI in NODE's daemon pod.
sarena_on() {
  local node=$1 p
  shift
  p=$(ds_pod "$node")
  [ -n "$p" ] || fail "no Sarena pod on $node"
  ks exec "$p" -c sarena -- sarena "$@"
}

# endpoints_json NODE: the daemon's endpoints, [{container_id, host_ifname, addresses}]
endpoints_json() {
  sarena_on "$1" -o json endpoint list |
    jq -c '[.[] | {container_id: .endpoint.owner.container_id, host_ifname: .endpoint.host_ifname,
                   addresses: .endpoint.addresses}] | sort_by(.container_id)'
}

no_endpoints() { [ "$(endpoints_json "$1")" = "[]" ]; }

# --- the daemon container, as the kernel sees it -----------------------------------

# daemon_cgroup NODE: the cgroup (v1, below a controller's root) of the
# daemon container in NODE's Sarena pod: containerd puts it in /k8s.io/ID.
daemon_cgroup() {
  local id
  id=$(ks get pod "$(ds_pod "$1")" -o json |
    jq -r '.status.containerStatuses[] | select(.name == "sarena") | .containerID | sub("^containerd://"; "")')
  [ -n "$id" ] && echo "k8s.io/$id"
}

# daemon_pid NODE: the host PID of the daemon, its container's PID 1.
daemon_pid() {
  local cg pid
  cg=$(daemon_cgroup "$1") || return 1
  while read -r pid; do
    if [ "$(status_field "$pid" NSpid | awk '{print $NF}')" = 1 ]; then
      echo "$pid"
      return 0
    fi
  done <"/sys/fs/cgroup/pids/$cg/cgroup.procs"
  return 1
}

# status_field PID FIELD: FIELD's value in /proc/PID/status.
status_field() { sed -n "s/^$2:[[:space:]]*//p" "/proc/$1/status" 2>/dev/null; }

# mount_options PID PATH: the per-mount options of the mount at PATH in
# PID's mount namespace (the top one: the last listed).
mount_options() { awk -v m="$2" '$5 == m {o = $6} END {print o}' "/proc/$1/mountinfo"; }

# daemon_memory NODE: a line for the report: the daemon's RSS and peak RSS,
# its container's memory cgroup usage and peak (eBPF maps are charged there
# when the daemon creates them) and limit, in MiB.
daemon_memory() {
  local pid cg
  pid=$(daemon_pid "$1") || fail "$1: no daemon process"
  cg=/sys/fs/cgroup/memory/$(daemon_cgroup "$1")
  printf '%s: RSS %s MiB (peak %s), cgroup %s MiB (peak %s), limit %s MiB\n' "$1" \
    $(($(status_field "$pid" VmRSS | awk '{print $1}') / 1024)) \
    $(($(status_field "$pid" VmHWM | awk '{print $1}') / 1024)) \
    $(($(cat "$cg/memory.usage_in_bytes") >> 20)) $(($(cat "$cg/memory.max_usage_in_bytes") >> 20)) \
    $(($(cat "$cg/memory.limit_in_bytes") >> 20))
}

# --- pods -------------------------------------------------------------------------

# pod_table SELECTOR: "name ip node" per pod, sorted by name.
pod_table() {
  k get pods -l "$1" -o 'jsonpath={range .items[*]}{.metadata.name} {.status.podIP} {.spec.nodeName}{"\n"}{end}' |
    sort
}

# pod_identity SELECTOR: "name ip containerID restarts" per pod (what must survive a restart).
pod_identity() {
  k get pods -l "$1" -o 'jsonpath={range .items[*]}{.metadata.name} {.status.podIP} {.status.containerStatuses[0].containerID} {.status.containerStatuses[0].restartCount}{"\n"}{end}' |
    sort
}

# all_ready SELECTOR N: exactly N pods, every one Ready.
all_ready() {
  local states
  states=$(k get pods -l "$1" -o 'jsonpath={range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}')
  [ "$(grep -c . <<<"$states")" = "$2" ] && ! grep -qv '^True$' <<<"$states"
}

# in_cidr IP CIDR: IP (v4) lies in CIDR.
in_cidr() {
  python3 -c 'import ipaddress, sys; sys.exit(ipaddress.ip_address(sys.argv[1]) not in ipaddress.ip_network(sys.argv[2]))' "$1" "$2"
}

# mesh SELECTOR: every pod fetches http://IP:8080/ of every pod (itself
# included) in one exec; each must answer its own pod name.
mesh() {
  local table ips want p got names
  table=$(pod_table "$1")
  ips=$(awk '{print $2}' <<<"$table" | tr '\n' ' ')
  want=$(awk '{print $1}' <<<"$table")
  mapfile -t names <<<"$want"
  for p in "${names[@]}"; do
    # shellcheck disable=SC2016 # expanded in the pod
    got=$(k exec "$p" -- sh -c 'for ip in $0; do timeout 3 wget -qO- "http://$ip:8080/" || echo "FAILED $ip"; done' "$ips")
    [ "$got" = "$want" ] || fail "$p -> the other pods: got [$(tr '\n' ' ' <<<"$got")], want [$(tr '\n' ' ' <<<"$want")]"
  done
}

# ping_counts FILE: "sent received" from busybox ping's summary in FILE.
ping_counts() {
  sed -n 's/^\([0-9]*\) packets transmitted, \([0-9]*\) packets received.*/\1 \2/p' "$1"
}

# --- the sandbox-ready measurement --------------------------------------------------

# watch_pods SELECTOR OUT: a watch of the pods in the background, each event
# stamped on arrival ("EPOCH NAME PHASE" lines in OUT); sets WATCHER (its
# process group, stopped by stop_watch).
watch_pods() {
  # shellcheck disable=SC2016 # expanded by the inner bash
  setsid bash -c '. "$0/lib.sh"
    k8s_kubectl "$1" get pods -l "$2" -w -o "jsonpath={.metadata.name} {.status.phase}{\"\n\"}" |
      while read -r pod phase; do echo "$EPOCHREALTIME $pod $phase"; done' \
    "$K8S_HARNESS" "$DIR" "$1" >"$2" 2>/dev/null &
  WATCHER=$!
  echo "$WATCHER" >>"$DIR/watchers"
}
stop_watch() { kill -- "-$WATCHER" 2>/dev/null || true; }

# running_count OUT: pods seen Running in OUT.
running_count() { awk '$3 == "Running" {print $2}' "$1" | sort -u | wc -l; }

# kubelet_sandbox_stats NODE: "sum count" of kubelet's RunPodSandbox timer
# ("0 0" when unreadable: measured, not asserted).
kubelet_sandbox_stats() {
  { k8s_exec "$DIR" cp curl -sk --max-time 5 "https://$(k8s_node_ip "$DIR" "$1"):10250/metrics" || true; } |
    awk '/^kubelet_runtime_operations_duration_seconds_(sum|count)\{operation_type="run_podsandbox"\}/ {
           v[$1 ~ /_sum/ ? "s" : "c"] = $2 } END { print v["s"] + 0, v["c"] + 0 }'
}

# containerd_network_stats NODE: "sum count" of containerd's
# sandbox_create_network timer (the network part of RunPodSandbox: mostly the
# pod's netns made and the CNI ADD of the whole chain), from its CRI metrics
# on the node's loopback (e2e/k8s/harness/nodes.sh); "0 0" when unreadable
# (measured, not asserted).
containerd_network_stats() {
  { k8s_exec "$DIR" "$1" curl -s --max-time 5 http://127.0.0.1:1338/v1/metrics || true; } |
    awk '/^containerd_cri_sandbox_create_network_seconds_(sum|count) / {
           v[$1 ~ /_sum/ ? "s" : "c"] = $2 } END { print v["s"] + 0, v["c"] + 0 }'
}

# mean_ms BEFORE AFTER: the mean of a timer's samples between two "sum
# count" readings, in ms ("null" without a sample).
mean_ms() {
  awk -v b="$1" -v a="$2" 'BEGIN { split(b, x, " "); split(a, y, " ");
      c = y[2] - x[2]; if (c > 0) printf "%.1f", (y[1] - x[1]) / c * 1000; else print "null" }'
}

# shown_ms MEAN: "MEAN ms", or "n/a" for mean_ms's "null".
shown_ms() { if [ "$1" = null ]; then echo n/a; else echo "$1 ms"; fi; }

# measure SLUG LABEL NODE N: N busybox pods on NODE at once (one
# Deployment, bench-SLUG-N); per pod, the time from its creation (the
# watch's first event) to Running, the mean RunPodSandbox time from
# kubelet's metrics and the mean of its network part from containerd's.
# Appends a line to $DIR/measurements and a JSON object to
# $DIR/measurements.jsonl; the pods are deleted after.
measure() {
  local slug=$1 label=$2 node=$3 n=$4 name out t0 before after net_before net_after i
  name=bench-$slug-$n out=$DIR/watch-$slug-$n.txt
  before=$(kubelet_sandbox_stats "$node")
  net_before=$(containerd_network_stats "$node")
  watch_pods "bench=$name" "$out"
  sleep 1.5 # the watch is established (kubectl prints nothing for an empty list)
  t0=$EPOCHREALTIME
  k apply -f - >/dev/null <<EOF
{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "$name", "namespace": "default"},
 "spec": {"replicas": $n, "selector": {"matchLabels": {"bench": "$name"}},
  "template": {"metadata": {"labels": {"bench": "$name"}},
   "spec": {"nodeSelector": {"kubernetes.io/hostname": "$node"}, "terminationGracePeriodSeconds": 0,
    "containers": [{"name": "c", "image": "sarena.local/busybox:1.35", "imagePullPolicy": "Never",
                    "command": ["sleep", "3600"]}]}}}}
EOF
  for ((i = 0; i < 1200; i++)); do
    [ "$(running_count "$out")" -ge "$n" ] && break
    sleep 0.25
  done
  stop_watch
  [ "$(running_count "$out")" -ge "$n" ] || fail "$label: only $(running_count "$out") of $n pods Running after 300 s"
  after=$(kubelet_sandbox_stats "$node")
  net_after=$(containerd_network_stats "$node")
  local p50 p90 max all
  read -r p50 p90 max all < <(awk -v t0="$t0" '
      !($2 in first) { first[$2] = $1 }
      $3 == "Running" && !($2 in run) { run[$2] = $1; d[++k] = $1 - first[$2]; if ($1 > last) last = $1 }
      END {
        for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (d[j] < d[i]) { t = d[i]; d[i] = d[j]; d[j] = t }
        printf "%.2f %.2f %.2f %.2f\n", d[int((k + 1) / 2)], d[int(k * 0.9 + 0.999)], d[k], last - t0
      }' "$out")
  local sandbox network
  sandbox=$(mean_ms "$before" "$after") network=$(mean_ms "$net_before" "$net_after")
  printf '%-26s %3d pods: p50 %ss  p90 %ss  max %ss  all %d Running after %ss; RunPodSandbox mean %s, its network part %s\n' \
    "$label" "$n" "$p50" "$p90" "$max" "$n" "$all" "$(shown_ms "$sandbox")" "$(shown_ms "$network")" |
    tee -a "$DIR/measurements" >&2
  printf '{"slug": "%s", "contender": "%s", "pods": %d, "p50_s": %s, "p90_s": %s, "max_s": %s, "all_running_s": %s, "sandbox_mean_ms": %s, "network_mean_ms": %s}\n' \
    "$slug" "$label" "$n" "$p50" "$p90" "$max" "$all" "$sandbox" "$network" >>"$DIR/measurements.jsonl"
  k delete deployment "$name" --wait=false >/dev/null
  wait_until 180 no_pods "bench=$name" || fail "$label: pods of $name not gone after 180 s"
}

# no_pods SELECTOR: no pod matches.
no_pods() { [ -z "$(k get pods -l "$1" -o name)" ]; }
