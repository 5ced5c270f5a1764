# shellcheck shell=bash
# Shared helpers of the end-to-end tests. Sourced by e2e/*.sh, never run.
#
# A test calls `e2e_init NAME`, then `mode_setup MODE` (ref | sarena | custom),
# registers every resource it creates with `defer COMMAND ARG...` right after
# creating it, and exits non-zero on the first failed assertion. The EXIT trap
# runs the deferred commands in reverse order, so cleanup happens even on
# failure or Ctrl-C.

E2E_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_DIR=$(cd "$E2E_DIR/.." && pwd)

log() { printf '[%s] %s\n' "${E2E_TEST:-e2e}" "$*" >&2; }
pass() { log "ok: $*"; }
fail() {
  log "FAIL: $*"
  exit 1
}

# --- cleanup stack -----------------------------------------------------------

# Every deferred command's words, one command after another, and how many
# words each has: a stack of argument vectors, run without eval.
_DEFER_WORDS=()
_DEFER_COUNTS=()
# defer COMMAND ARG...: run COMMAND (a program or a function) with these
# arguments, as they are now, at exit; last registered first.
defer() {
  _DEFER_WORDS+=("$@")
  _DEFER_COUNTS+=("$#")
}

# run_deferred: runs the deferred commands, last first, each whatever the
# others did (output discarded: what they remove may already be gone).
run_deferred() {
  local i n end=${#_DEFER_WORDS[@]}
  for ((i = ${#_DEFER_COUNTS[@]} - 1; i >= 0; i--)); do
    n=${_DEFER_COUNTS[i]}
    end=$((end - n))
    "${_DEFER_WORDS[@]:end:n}" >/dev/null 2>&1
  done
  _DEFER_WORDS=()
  _DEFER_COUNTS=()
}

# stop_pid PID: SIGTERM and wait (a no-op for a process already gone).
stop_pid() {
  kill "$1" 2>/dev/null || return 0
  wait "$1" 2>/dev/null || true
}

# stop_tree PID: SIGTERM to PID's children, then to PID (a forking server
# and the connections it still serves).
stop_tree() {
  pkill -P "$1"
  kill "$1"
}

_e2e_exit() {
  local rc=$?
  set +e
  trap - EXIT INT TERM
  if [ "$rc" != 0 ] && [ -n "${WORK:-}" ] && [ -d "$WORK" ]; then
    for f in "$WORK"/*.log; do
      [ -s "$f" ] || continue
      log "---- tail of $f"
      tail -n 40 "$f" >&2
    done
  fi
  run_deferred
  if [ -n "${WORK:-}" ] && [ -d "$WORK" ]; then
    if [ "${E2E_KEEP:-0}" = 1 ]; then
      log "E2E_KEEP=1: keeping $WORK"
    else
      # Never delete through a mount a runtime may have left behind.
      awk -v w="$WORK/" 'index($5, w) == 1 {print $5}' /proc/self/mountinfo | sort -r |
        while read -r m; do umount -l "$m"; done
      rm -rf --one-file-system "$WORK"
    fi
  fi
  if [ "$rc" = 0 ]; then log "PASS"; else log "FAILED (exit $rc)"; fi
  exit "$rc"
}

# require_tools TOOL...: fail, naming the set-up script, unless each is on PATH.
require_tools() {
  local tool
  for tool in "$@"; do
    command -v "$tool" >/dev/null || fail "$tool missing: run scripts/setup-e2e.sh"
  done
}

# each_contender SCRIPT WHICH: for WHICH "all", run SCRIPT once per
# contender (ref, ebpf, kernel) and exit with 1 if any run failed; else return.
each_contender() {
  [ "$2" = all ] || return 0
  local rc=0 m
  for m in ref ebpf kernel; do
    bash "$1" "$m" || rc=1
  done
  exit "$rc"
}

# e2e_init NAME: unique run id, private work dir, cleanup trap.
e2e_init() {
  E2E_TEST=$1
  [ "$(id -u)" = 0 ] || fail "the end-to-end tests need root"
  require_tools ip jq curl ping
  RUN_ID=$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
  WORK=$(mktemp -d "/tmp/sarena-e2e-$E2E_TEST.XXXXXX")
  chmod 755 "$WORK"
  NET_NAME="sarena-e2e-$RUN_ID"
  trap _e2e_exit EXIT
  trap 'exit 130' INT TERM
  log "run $RUN_ID, work dir $WORK"
}

# --- addresses: lib-addr.sh ----------------------------------------------------

# shellcheck source=e2e/lib-addr.sh
source "$E2E_DIR/lib-addr.sh"




# --- modes: which plugin is under test --------------------------------------------

# mode_setup MODE: sets PLUGIN_DIR, BASE_PLUGINS (JSON array: the plugins
# under test; chained plugins are appended after them), CNI_VERSION,
# MODE_LABEL. Needs pick_subnet first. Modes:
#   ref     Debian's ptp + host-local from /usr/lib/cni
#   sarena  sarena-cni with a private sarena-daemon (see sarena_start)
#   custom  E2E_PLUGIN_DIR + E2E_CONFLIST (its plugins and cniVersion; its
#           name is replaced by a unique one)
mode_setup() {
  MODE=$1
  # libcni 1.1.x (the Go driver, podman 4.3, containerd 1.6) and Debian's
  # reference plugins speak CNI up to 1.0.0.
  CNI_VERSION=${E2E_CNI_VERSION:-1.0.0}
  case "$MODE" in
    ref)
      PLUGIN_DIR=${E2E_PLUGIN_DIR:-/usr/lib/cni}
      mkdir -p "$WORK/host-local"
      BASE_PLUGINS=$(jq -cn --arg subnet "$POD_SUBNET" --arg gw "$POD_GATEWAY" \
        --arg subnet6 "${POD_SUBNET6:-}" --arg gw6 "${POD_GATEWAY6:-}" \
        --arg dir "$WORK/host-local" '[{type:"ptp", ipMasq:false, mtu:1500,
          ipam:{type:"host-local", dataDir:$dir,
                ranges:([[{subnet:$subnet, gateway:$gw}]]
                  + (if $subnet6 == "" then [] else [[{subnet:$subnet6, gateway:$gw6}]] end)),
                routes:([{dst:"0.0.0.0/0"}]
                  + (if $subnet6 == "" then [] else [{dst:"::/0"}] end))}}]')
      MODE_LABEL="ref (ptp+host-local)"
      ;;
    sarena)
      sarena_start
      BASE_PLUGINS=$(jq -cn --arg sock "$SARENA_SOCKET" --arg log "$WORK/sarena-cni.log" \
        --arg q "$SARENA_STATE/delete-queue" \
        '[{type:"sarena-cni", "daemon-endpoint":$sock, "log-file":$log, "delete-queue-dir":$q}]')
      MODE_LABEL="sarena"
      ;;
    custom)
      [[ -n ${E2E_PLUGIN_DIR:-} && -f ${E2E_CONFLIST:-} ]] ||
        fail "custom mode needs E2E_PLUGIN_DIR and E2E_CONFLIST"
      PLUGIN_DIR=$E2E_PLUGIN_DIR
      BASE_PLUGINS=$(jq -c '.plugins' "$E2E_CONFLIST")
      CNI_VERSION=${E2E_CNI_VERSION:-$(jq -r '.cniVersion' "$E2E_CONFLIST")}
      MODE_LABEL="custom ($(jq -r '[.plugins[].type]|join("+")' "$E2E_CONFLIST"))"
      ;;
    *) fail "unknown mode '$MODE' (ref | sarena | custom)" ;;
  esac
  log "mode $MODE_LABEL, plugins from $PLUGIN_DIR, pod subnet $POD_SUBNET"
}

# write_conflist FILE [EXTRA_PLUGINS_JSON_ARRAY]: the network under test.
write_conflist() {
  local extra=${2:-[]}
  jq -n --arg v "$CNI_VERSION" --arg name "$NET_NAME" \
    --argjson base "$BASE_PLUGINS" --argjson extra "$extra" \
    '{cniVersion:$v, name:$name, plugins:($base + $extra)}' >"$1"
}

# --- Sarena --------------------------------------------------------------------------

# sarena_start: a private daemon (own socket, state dir, config) and a plugin
# dir holding sarena-cni plus copies of the reference plugins for chaining.
# SARENA_BIN_DIR (default target/sarena-bin, else target/release, else target/debug) holds
# sarena-cni and sarena-daemon; SARENA_DAEMON_CONFIG may name a TOML template
# in which @SUBNET@ and @GATEWAY@ (and @SUBNET6@, @GATEWAY6@) are replaced;
# after pick_subnet6 the default config's pool is dual-stack; SARENA_DATAPLANE picks the
# dataplane of the default config (ebpf, the default, or kernel). With
# NODE_NS set (see node_setup) the daemon runs in that netns, its pins on the
# node's private bpffs.
sarena_start() {
  local bin=${SARENA_BIN_DIR:-}
  if [ -z "$bin" ]; then
    for d in "$REPO_DIR/target/sarena-bin" "$REPO_DIR/target/release" "$REPO_DIR/target/debug"; do
      if [ -x "$d/sarena-cni" ] && [ -x "$d/sarena-daemon" ]; then
        bin=$d
        break
      fi
    done
  fi
  [[ -n $bin && -x $bin/sarena-cni && -x $bin/sarena-daemon ]] ||
    fail "sarena-cni/sarena-daemon not built: cargo build --release -p sarena-cni -p sarena-daemon (or set SARENA_BIN_DIR)"
  PLUGIN_DIR="$WORK/cni-bin"
  mkdir -p "$PLUGIN_DIR"
  cp "$bin/sarena-cni" "$PLUGIN_DIR/"
  local p
  for p in ptp host-local loopback portmap bandwidth tuning; do
    cp /usr/lib/cni/$p "$PLUGIN_DIR/"
  done
  SARENA_SOCKET="$WORK/sarena.sock"
  SARENA_STATE="$WORK/sarena-state"
  mkdir -p "$SARENA_STATE"
  local cfg="$WORK/sarena.toml"
  if [ -n "${SARENA_DAEMON_CONFIG:-}" ]; then
    sed -e "s|@SUBNET@|$POD_SUBNET|g" -e "s|@GATEWAY@|$POD_GATEWAY|g" \
      -e "s|@SUBNET6@|${POD_SUBNET6:-}|g" -e "s|@GATEWAY6@|${POD_GATEWAY6:-}|g" \
      "$SARENA_DAEMON_CONFIG" >"$cfg"
  else
    local cidrs="\"$POD_SUBNET\"" gateways="\"$POD_GATEWAY\""
    if [ -n "${POD_SUBNET6:-}" ]; then
      cidrs+=", \"$POD_SUBNET6\""
      gateways+=", \"$POD_GATEWAY6\""
    fi
    cat >"$cfg" <<EOF
dataplane = "${SARENA_DATAPLANE:-ebpf}"
masquerade = false
[[ipam.pools]]
name = "e2e"
cidrs = [$cidrs]
gateways = [$gateways]
EOF
  fi
  # The daemon replays the plugin's deletion queue from
  # <state-dir>/delete-queue; the conflist points the plugin there too.
  # The kernel dataplane puts each pool's gateway on a node-wide device that
  # outlives the daemon (by design: pod traffic survives restarts). This
  # run's pool is unique, so its gateway address is ours to remove at exit,
  # and so is the device if this run's daemon created it and nothing else
  # uses it by then. (In a node netns all of that goes with the netns.)
  if [ -z "${NODE_NS:-}" ]; then
    SARENA_LINKS_BEFORE=$(ip -o link show | awk -F': ' '{print $2}' | sed 's/@.*//')
    SARENA_NFT_BEFORE=$(nft list tables 2>/dev/null || true)
    defer sarena_node_cleanup
  fi
  SARENA_DAEMON=("$bin/sarena-daemon" --socket "$SARENA_SOCKET" --state-dir "$SARENA_STATE" --config "$cfg")
  SARENA_PIN_DIR=
  if "$bin/sarena-daemon" --help 2>/dev/null | grep -- --bpf-pin-dir >/dev/null; then
    # eBPF pins outlive the daemon: a private pin dir, removed at exit.
    if [ -n "${NODE_NS:-}" ]; then
      SARENA_PIN_DIR="$NODE_BPFFS/sarena"
    else
      SARENA_PIN_DIR="/sys/fs/bpf/sarena-e2e-$RUN_ID"
      defer rm -rf "$SARENA_PIN_DIR"
    fi
    SARENA_DAEMON+=(--bpf-pin-dir "$SARENA_PIN_DIR")
  fi
  sarena_daemon_up
}

# sarena_daemon_up: starts SARENA_DAEMON (in NODE_NS if set) and waits for
# its health endpoint; the daemon is stopped at exit.
sarena_daemon_up() {
  # A simple command (not a function) in the background: $! is the daemon.
  if [ -n "${NODE_NS:-}" ]; then
    ip netns exec "$NODE_NS" "${SARENA_DAEMON[@]}" >>"$WORK/sarena-daemon.log" 2>&1 &
  else
    "${SARENA_DAEMON[@]}" >>"$WORK/sarena-daemon.log" 2>&1 &
  fi
  SARENA_PID=$!
  defer stop_pid "$SARENA_PID"
  local i
  for ((i = 0; i < 100; i++)); do
    if [ -S "$SARENA_SOCKET" ] && sarena_get /daemon/health >/dev/null 2>&1; then
      log "sarena-daemon $SARENA_PID up on $SARENA_SOCKET"
      return 0
    fi
    kill -0 "$SARENA_PID" 2>/dev/null || fail "sarena-daemon exited; see $WORK/sarena-daemon.log"
    sleep 0.1
  done
  fail "sarena-daemon did not answer on $SARENA_SOCKET within 10s"
}

# sarena_restart: stops the daemon (SIGTERM) and starts it again with the
# same arguments: pins, filters and the registry must carry pod traffic on.
sarena_restart() {
  stop_pid "$SARENA_PID"
  rm -f "$SARENA_SOCKET"
  sarena_daemon_up
}

# node_exec CMD...: CMD in the node netns (NODE_NS) when there is one, else here.
node_exec() {
  if [ -n "${NODE_NS:-}" ]; then
    ip netns exec "$NODE_NS" "$@"
  else
    "$@"
  fi
}

# node_setup: a throwaway "node": netns NODE_NS (its own netfilter rules,
# routes and daemon; nothing lands in the host netns), a private bpffs
# NODE_BPFFS for the daemon's pins, and an "outside" netns OUT_NS behind the
# node's uplink (NODE_IP on the node, OUT_IP outside, a /24 of 198.18/15),
# the node's default route pointing there. Call before mode_setup.
node_setup() {
  NODE_NS="sn-$RUN_ID"
  OUT_NS="so-$RUN_ID"
  new_netns "$NODE_NS"
  new_netns "$OUT_NS"
  NODE_BPFFS="$WORK/bpffs"
  mkdir -p "$NODE_BPFFS"
  mount -t bpf bpf "$NODE_BPFFS" || fail "cannot mount a bpffs on $NODE_BPFFS"
  defer umount -l "$NODE_BPFFS"
  local net="198.$((18 + RANDOM % 2)).$((RANDOM % 256))"
  NODE_IP="$net.1"
  OUT_IP="$net.2"
  ip -n "$NODE_NS" link add uplink type veth peer name uplink netns "$OUT_NS"
  ip -n "$NODE_NS" addr add "$NODE_IP/24" dev uplink
  ip -n "$OUT_NS" addr add "$OUT_IP/24" dev uplink
  ip -n "$NODE_NS" link set uplink up
  ip -n "$OUT_NS" link set uplink up
  ip -n "$NODE_NS" route add default via "$OUT_IP"
  log "node netns $NODE_NS ($NODE_IP), outside netns $OUT_NS ($OUT_IP)"
}

# contender_setup WHICH: a node of this run (node_setup, pick_subnet) running
# WHICH, the plugin under test: ref (the reference ptp) or Sarena on its
# ebpf or kernel dataplane; and the libcni driver.
contender_setup() {
  ensure_driver
  node_setup
  pick_subnet
  case "$1" in
    ref) mode_setup ref ;;
    ebpf | kernel)
      command -v bpftool >/dev/null || [ "$1" = kernel ] || fail "bpftool missing: run scripts/setup-e2e.sh"
      SARENA_DATAPLANE=$1 mode_setup sarena
      MODE_LABEL="sarena $1"
      ;;
    *) fail "unknown mode '$1' (all | ref | ebpf | kernel)" ;;
  esac
}

# ebpf_counter IFNAME FIELD: FIELD of the eBPF counters of the node's host
# veth IFNAME, summed over CPUs (bpftool on the pinned counters map; layout
# of sarena_common::EndpointCounters, whose first six fields and first four
# drop slots release 0.1.0's had at the same offsets). FIELD: from_pod_packets,
# to_pod_packets, redirected_packets, arp_replies, host_stack_flow_packets,
# host_flows_recorded, ndp_replies, ipv6_from_pod_packets,
# ipv6_redirected_packets, host_flows_started, drops (all reasons) or drop:N (reason N).
ebpf_counter() {
  local ifname=$1 field=$2 ifindex idx key=() json map
  ifindex=$(node_exec cat "/sys/class/net/$ifname/ifindex") || fail "no host veth $ifname"
  case "$field" in
    from_pod_packets) idx='[0]' ;;
    to_pod_packets) idx='[2]' ;;
    redirected_packets) idx='[4]' ;;
    arp_replies) idx='[5]' ;;
    host_stack_flow_packets) idx='[6]' ;;
    host_flows_recorded) idx='[7]' ;;
    host_flows_started) idx='[11]' ;;
    ndp_replies) idx='[8]' ;;
    ipv6_from_pod_packets) idx='[9]' ;;
    ipv6_redirected_packets) idx='[10]' ;;
    drops) idx="[$(seq -s, 12 27)]" ;;
    drop:*) idx="[$((12 + ${field#drop:}))]" ;;
    *) fail "ebpf_counter: unknown field $field" ;;
  esac
  # The key: the ifindex's four bytes, little-endian, one word each.
  read -r -a key <<<"$(printf '%08x' "$ifindex" | sed -E 's/(..)(..)(..)(..)/\4 \3 \2 \1/')"
  # SARENA_COUNTERS_V2 since layout generation 2 (sarena_common::layouts);
  # SARENA_COUNTERS_PIN names another (e2e/test-upgrade.sh, release 0.1.0's).
  map=${SARENA_COUNTERS_PIN:-SARENA_COUNTERS_V2}
  json=$(bpftool -j map lookup pinned "$SARENA_PIN_DIR/maps/$map" key hex "${key[@]}") ||
    fail "bpftool: no counters for $ifname (ifindex $ifindex)"
  jq --argjson idx "$idx" '
    def hex: ltrimstr("0x") | ascii_downcase | explode
      | map(if . >= 97 then . - 87 else . - 48 end) | reduce .[] as $d (0; . * 16 + $d);
    def u64($i): .[($i * 8):($i * 8 + 8)] | map(hex) | reverse | reduce .[] as $b (0; . * 256 + $b);
    [.values[].value as $v | $idx[] | . as $i | $v | u64($i)] | add' <<<"$json"
}


# sarena_node_cleanup: after the daemon stopped, removes this run's gateway
# address, and the link that carried it if the daemon created that link
# during this run and it carries no other IPv4 address (a veth pair: its
# peer goes with it); likewise the anti-spoofing tables (inet and arp
# "sarena") when this run created them and no pod is guarded in them.
sarena_node_cleanup() {
  local dev family
  for family in inet arp; do
    grep -qx "table $family sarena" <<<"${SARENA_NFT_BEFORE:-}" && continue
    nft list set "$family" sarena guarded 2>/dev/null | grep 'elements' >/dev/null && continue
    nft delete table "$family" sarena 2>/dev/null
  done
  dev=$(ip -o -4 addr show | awk -v a="$POD_GATEWAY/32" '$4 == a {print $2}' | head -n1)
  dev=${dev%%@*}
  remove_host_address "$POD_GATEWAY"
  [ -z "${POD_GATEWAY6:-}" ] || remove_host_address "$POD_GATEWAY6"
  [ -n "$dev" ] || return 0
  if ! grep -qxF "$dev" <<<"$SARENA_LINKS_BEFORE" && [ -z "$(ip -o -4 addr show dev "$dev")" ]; then
    ip link del "$dev"
  fi
  return 0
}

# sarena_get PATH: GET /v1PATH from the private daemon.
sarena_get() {
  curl -sf --max-time 5 --unix-socket "$SARENA_SOCKET" "http://sarena/v1$1"
}

# mode_assert_holding N: the IPAM of the mode under test holds the
# addresses of exactly N pods, one per family (and, for Sarena, N
# endpoints): the positive twin of mode_assert_released, so that an empty
# state at the end means something.
mode_assert_holding() {
  local n=$1 addresses=$1
  [ -z "${POD_SUBNET6:-}" ] || addresses=$((2 * n))
  case "$MODE" in
    ref)
      local held
      held=$(find "$WORK/host-local" -type f ! -name lock ! -name 'last_reserved_ip*' | wc -l)
      [ "$held" = "$addresses" ] || fail "host-local holds $held addresses, expected $addresses"
      pass "host-local holds $addresses addresses"
      ;;
    sarena)
      local eps ipam
      eps=$(sarena_get /endpoints) || fail "GET /v1/endpoints failed"
      [ "$(jq 'length' <<<"$eps")" = "$n" ] || fail "daemon has not $n endpoints: $eps"
      ipam=$(sarena_get /ipam) || fail "GET /v1/ipam failed"
      [ "$(jq '.allocations | length' <<<"$ipam")" = "$addresses" ] ||
        fail "daemon has not $addresses allocated addresses: $ipam"
      pass "daemon: $n endpoints and $addresses allocated addresses"
      ;;
    custom) ;;
  esac
}

# mode_assert_released: the IPAM of the mode under test holds nothing.
mode_assert_released() {
  case "$MODE" in
    ref)
      local left
      left=$(find "$WORK/host-local" -type f ! -name lock ! -name 'last_reserved_ip*' 2>/dev/null)
      [ -z "$left" ] || fail "host-local still holds addresses: $left"
      pass "host-local holds no address"
      ;;
    sarena)
      local eps ipam
      eps=$(sarena_get /endpoints) || fail "GET /v1/endpoints failed"
      [ "$(jq 'length' <<<"$eps")" = 0 ] || fail "daemon still has endpoints: $eps"
      ipam=$(sarena_get /ipam) || fail "GET /v1/ipam failed"
      [ "$(jq '(.allocations | length) + ([.pools[].allocated] | add // 0)' <<<"$ipam")" = 0 ] ||
        fail "daemon still has allocations: $ipam"
      pass "daemon: GET /v1/endpoints and /v1/ipam empty"
      ;;
    custom) log "custom mode: IPAM state not inspected" ;;
  esac
}

# --- libcni driver -------------------------------------------------------------------

# ensure_driver: DRIVER is the libcni driver binary (E2E_DRIVER if set, else
# built offline now in GOPATH mode into the work dir).
ensure_driver() {
  if [ -n "${E2E_DRIVER:-}" ] && [ -x "$E2E_DRIVER" ]; then
    DRIVER=$E2E_DRIVER
    return 0
  fi
  DRIVER="$WORK/libcni-driver"
  build_driver "$DRIVER"
}

# build_driver OUT: go build against Debian's golang-github-appc-cni-dev.
build_driver() {
  command -v go >/dev/null || fail "go missing: run scripts/setup-e2e.sh"
  [ -d /usr/share/gocode/src/github.com/containernetworking/cni/libcni ] ||
    fail "libcni source missing: run scripts/setup-e2e.sh"
  local gp
  gp=$(mktemp -d /tmp/sarena-e2e-gopath.XXXXXX)
  (cd "$E2E_DIR/libcni-driver" &&
    GO111MODULE=off GOFLAGS='' GOPATH="$gp:/usr/share/gocode" GOCACHE="$gp/cache" \
      go build -o "$1" .) || {
    rm -rf "$gp"
    fail "building the libcni driver failed"
  }
  rm -rf "$gp"
}

# drv COMMAND CONFLIST CONTAINER_ID NETNS [driver flags...]: prints the JSON
# (the plugins run in NODE_NS when it is set).
drv() {
  local cmd=$1 conf=$2 id=$3 netns=$4
  shift 4
  node_exec "$DRIVER" -conflist "$conf" -plugin-dir "$PLUGIN_DIR" -cache-dir "$WORK/cni-cache" \
    -id "$id" -netns "$netns" -ifname eth0 "$@" "$cmd"
}

# --- pods and assertions ----------------------------------------------------------------

# del_at_exit CONF ID: DEL container ID from the network CONF at exit, with
# no netns (it may be gone by then); DEL is idempotent.
del_at_exit() {
  defer node_exec "$DRIVER" -conflist "$1" -plugin-dir "$PLUGIN_DIR" -cache-dir "$WORK/cni-cache" \
    -id "$2" -netns '' del
}

# pod_add PREFIX P [driver flags...]: pod P of this run: netns
# PREFIX-RUN_ID-P (NS[P]) and container id e2e-RUN_ID-P (ID[P]), ADDed to
# the network CONF and DELed at exit. Sets POD_RESULT (the ADD's JSON) and
# IP[P] (its first address); the caller declares NS, ID and IP (declare -A).
# ADD_CONTEXT, when set, is named in the failure.
# shellcheck disable=SC2004,SC2034,SC2153  # NS, ID, IP: the caller's associative arrays (string keys); CONF: the caller's network
pod_add() {
  local prefix=$1 p=$2
  shift 2
  NS[$p]="$prefix-$RUN_ID-$p"
  ID[$p]="e2e-$RUN_ID-$p"
  new_netns "${NS[$p]}"
  del_at_exit "$CONF" "${ID[$p]}"
  POD_RESULT=$(drv add "$CONF" "${ID[$p]}" "/run/netns/${NS[$p]}" "$@") ||
    fail "ADD pod $p${ADD_CONTEXT:+ ($ADD_CONTEXT)}: $POD_RESULT"
  IP[$p]=$(jq -r '.result.ips[0].address' <<<"$POD_RESULT" | cut -d/ -f1)
}

# pod_args P [K=V...]: the CNI_ARGS of pod P as a kubelet's runtime passes them.
pod_args() {
  local p=$1 args
  shift
  args="IgnoreUnknown=1;K8S_POD_NAMESPACE=e2e;K8S_POD_NAME=pod-$p"
  [ "$#" = 0 ] || args+=$(printf ';%s' "$@")
  echo "$args"
}

# wait_listening NETNS PORT: waits up to 5 s for a TCP listener on PORT in
# NETNS, then returns anyway (the test's own assertion tells what is wrong).
wait_listening() {
  local i
  for ((i = 0; i < 50; i++)); do
    ip netns exec "$1" ss -Htln "sport = :$2" | grep . >/dev/null && return 0
    sleep 0.1
  done
  return 0
}

# node_host_if IP: the node's link to pod address IP.
node_host_if() {
  local dev
  dev=$(node_exec ip -o -4 route get "$1" | sed -n 's/.* dev \([^ ]*\).*/\1/p')
  [ -n "$dev" ] || fail "the node has no route to $1"
  echo "$dev"
}


# new_netns NAME: creates /run/netns/NAME, deleted at exit.
new_netns() {
  ip netns add "$1"
  defer ip netns del "$1"
  ip -n "$1" link set lo up
}


# assert_result_ok JSON: the ADD result has an IP and a sandbox interface
# with a MAC (podman needs the MAC).
assert_result_ok() {
  jq -e '.result.ips | length > 0' <<<"$1" >/dev/null || fail "ADD result has no ips: $1"
  jq -e '[.result.interfaces[]? | select(.sandbox != null and .sandbox != "" and (.mac // "") != "")] | length > 0' \
    <<<"$1" >/dev/null || fail "ADD result has no sandbox interface with a mac: $1"
}

# ping_ok WHAT CMD...: CMD (a ping) must succeed.
ping_ok() {
  local what=$1
  shift
  "$@" >/dev/null 2>&1 || "$@" >/dev/null 2>&1 || fail "$what: '$*' failed"
  pass "$what"
}


# assert_no_cache DIR...: no libcni cache entry of this run's network.
assert_no_cache() {
  local d left
  for d in "$@"; do
    [ -d "$d" ] || continue
    left=$(find "$d" -name "$NET_NAME-*" 2>/dev/null)
    [ -z "$left" ] || fail "libcni cache entries left: $left"
  done
  pass "no libcni cache entry for $NET_NAME"
}

# make_rootfs DIR: a busybox-static root filesystem.
make_rootfs() {
  local r=$1 bb
  bb=$(command -v busybox) || fail "busybox missing: run scripts/setup-e2e.sh"
  file_is_static "$bb" || bb=/bin/busybox
  mkdir -p "$r"/{bin,sbin,etc,proc,sys,dev,tmp,run,root,var/www}
  cp "$bb" "$r/bin/busybox"
  chroot "$r" /bin/busybox --install -s /bin
  echo 'root:x:0:0:root:/root:/bin/sh' >"$r/etc/passwd"
  echo 'root:x:0:' >"$r/etc/group"
  : >"$r/etc/hosts"
  : >"$r/etc/resolv.conf"
}

# remove_cgroup NAME: removes the (empty) top-level cgroup NAME and any empty
# cgroups below it, in every hierarchy (v1 controllers and v2).
remove_cgroup() {
  local c
  for c in /sys/fs/cgroup/"$1" /sys/fs/cgroup/*/"$1"; do
    [ -d "$c" ] || continue
    find "$c" -mindepth 1 -depth -type d -exec rmdir {} \; 2>/dev/null
    rmdir "$c" 2>/dev/null || log "warning: cannot remove cgroup $c"
  done
  return 0
}

file_is_static() { ! ldd "$1" >/dev/null 2>&1; }
