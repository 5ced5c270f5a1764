#!/usr/bin/env bash
# Upgrade and downgrade for real, on the eBPF dataplane, in a node netns:
# release 0.1.0 (commit OLD_REV in lib-upgrade.sh, built from git into a
# cache dir) runs pods networked by its own plugin, with a `ping -i 0.01`
# stream and a TCP connection between two of them; its daemon is replaced by
# this tree's (SIGTERM, start), then this tree's by 0.1.0's again; then the
# same with daemons SIGKILLed in the middle of the migration (fault
# injection, SARENA_TEST_KILL_AT: this tree's daemon built with the
# fault-injection feature, a debug build in target/fault-injection) and a
# rollback from a half-done upgrade.
# Every swap: at most one lost ping, the TCP connection opened before the
# first swap still up, exactly one bpf filter on each hook of each host veth
# at every sample, the registry unchanged, the counters carried (not reset),
# the running release's programs on every hook, every pod's CHECK passing.
# The plugin of either release talks to the daemon of the other (ADD, a
# repeated ADD, CHECK, DEL). Prints each swap's lost pings, longest gap
# between answers and longest round trip, beside a no-swap baseline.
# Usage: e2e/test-upgrade.sh [sarena]   (as root; the eBPF dataplane only)
set -euo pipefail
# shellcheck source=e2e/lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=e2e/lib-upgrade.sh
source "$(dirname "$0")/lib-upgrade.sh"

[ "${1:-sarena}" = sarena ] || { echo "test-upgrade.sh tests Sarena's own releases (mode sarena only)"; exit 0; }
e2e_init upgrade
require_tools socat tc bpftool ss git cargo
build_old_release
new_bin
build_fault_daemon
# A node netns of its own: every daemon's start-up removes the marked lxc*
# links its registry does not own, so pods of another test's daemon in the
# same netns would lose their veths (and this test its own).
node_setup
pick_subnet
unset SARENA_DAEMON_CONFIG
SARENA_DATAPLANE=ebpf SARENA_BIN_DIR=$OLD_BIN mode_setup sarena
DAEMON_RELEASE=old
PLUGIN_RELEASE=old
ensure_driver
CONF="$WORK/net.conflist"
write_conflist "$CONF"

declare -A IP HOSTIF NS ID
PODS=()
# add_pod P: ADD through the plugin in the plugin dir (PLUGIN_RELEASE's).
add_pod() {
  local p=$1
  ADD_CONTEXT="$PLUGIN_RELEASE plugin, $DAEMON_RELEASE daemon" pod_add su "$p" -args "$(pod_args "$p")"
  assert_result_ok "$POD_RESULT"
  HOSTIF[$p]=$(node_host_if "${IP[$p]}")
  PODS+=("$p")
  ping_ok "pod $p (${IP[$p]}, ADDed by the $PLUGIN_RELEASE plugin via the $DAEMON_RELEASE daemon) -> pod a" \
    ip netns exec "${NS[$p]}" ping -c1 -W3 "${IP[a]:-${IP[$p]}}"
}
# readd_pod P: a repeated ADD of pod P (same attachment, its link there).
readd_pod() {
  local p=$1 out
  out=$(drv add "$CONF" "${ID[$p]}" "/run/netns/${NS[$p]}" -args "$(pod_args "$p")") ||
    fail "repeated ADD pod $p ($PLUGIN_RELEASE plugin, $DAEMON_RELEASE daemon): $out"
  IP[$p]=$(jq -r '.result.ips[0].address' <<<"$out" | cut -d/ -f1)
  HOSTIF[$p]=$(node_host_if "${IP[$p]}")
  ping_ok "pod $p (${IP[$p]}) -> pod a after a repeated ADD ($PLUGIN_RELEASE plugin, $DAEMON_RELEASE daemon)" \
    ip netns exec "${NS[$p]}" ping -c1 -W3 "${IP[a]}"
}
# del_pod P: DEL through the plugin in the plugin dir.
del_pod() {
  local p=$1 q keep=()
  drv del "$CONF" "${ID[$p]}" "/run/netns/${NS[$p]}" >/dev/null ||
    fail "DEL pod $p ($PLUGIN_RELEASE plugin, $DAEMON_RELEASE daemon)"
  for q in "${PODS[@]}"; do [ "$q" = "$p" ] || keep+=("$q"); done
  PODS=("${keep[@]}")
  pass "DEL pod $p ($PLUGIN_RELEASE plugin, $DAEMON_RELEASE daemon)"
}
# check_all: CHECK passes on every pod.
check_all() {
  local p out
  for p in "${PODS[@]}"; do
    out=$(drv check "$CONF" "${ID[$p]}" "/run/netns/${NS[$p]}" 2>&1) ||
      fail "CHECK pod $p ($PLUGIN_RELEASE plugin, $DAEMON_RELEASE daemon): $out"
  done
  pass "CHECK passes on pods ${PODS[*]} ($PLUGIN_RELEASE plugin, $DAEMON_RELEASE daemon)"
}
# host_ifs: the host veth of every pod.
host_ifs() {
  local p
  for p in "${PODS[@]}"; do echo "${HOSTIF[$p]}"; done
}
# prog_tags: the tags (hashes of the code) of the programs on both hooks of
# every host veth, one line.
prog_tags() {
  local i hook
  for i in $(host_ifs); do
    for hook in ingress egress; do
      node_exec tc filter show dev "$i" "$hook" | sed -nE 's/.* tag ([0-9a-f]+).*/\1/p'
    done
  done | sort -u | tr '\n' ' '
}

add_pod a
add_pod b
tcp_start "${NS[b]}" "${NS[a]}" "${IP[b]}" 7777
tcp_alive "before the first swap"
REG0=$(registry)
COUNT0=$(SARENA_COUNTERS_PIN=$(counters_pin) ebpf_counter "${HOSTIF[a]}" from_pod_packets)
declare -A TAGS
TAGS[old]=$(prog_tags)
[ "$(wc -w <<<"${TAGS[old]}")" = 2 ] || fail "0.1.0: not one program per hook: ${TAGS[old]}"
REPORT=()

# swap LABEL TO SIGNAL [KILL_AT]: one swap under the ping stream, then its
# assertions (the state ones once a daemon is up again).
swap() {
  local label=$1 to=$2 n=${#REPORT[@]} t0=$SECONDS
  ping_start "${NS[a]}" "${IP[b]}" "$WORK/ping-$n.log"
  sleep 0.5
  # shellcheck disable=SC2046 # host veth names, one per word
  watch_filters $(host_ifs)
  daemon_swap "$to" "$3" "${4:-}"
  sleep 0.5
  stop_watch
  ping_stop "$WORK/ping-$n.log"
  REPORT+=("$(printf '%-58s %2d lost of %4d, longest gap %4d ms, max rtt %s ms' "$label:" "$LOST" "$PINGS_SENT" "$GAP_MS" "$MAX_RTT")")
  log "swap $label: $LOST lost pings of $PINGS_SENT, longest gap $GAP_MS ms ($((SECONDS - t0)) s)"
  [ "$LOST" -le 1 ] || fail "$label: $LOST pings lost (at most 1 per swap)"
  [ ! -s "$WORK/filters.bad" ] || fail "$label: a hook had not exactly one filter: $(head -n 5 "$WORK/filters.bad")"
  [ ! -s "$WORK/filters.unknown" ] ||
    log "$label: $(wc -l <"$WORK/filters.unknown") filter dumps failed in tc (no verdict): $(head -n 2 "$WORK/filters.unknown")"
  tcp_alive "$label"
  pass "$label: $LOST lost, longest gap $GAP_MS ms, one filter per hook throughout, TCP up"
  [ -z "${4:-}" ] || return 0
  local reg count tags
  reg=$(registry)
  [ "$reg" = "$REG0" ] || fail "$label: the registry changed: before $REG0, after $reg"
  count=$(SARENA_COUNTERS_PIN=$(counters_pin) ebpf_counter "${HOSTIF[a]}" from_pod_packets)
  [ "$count" -ge "$COUNT0" ] || fail "$label: pod a's counters went from $COUNT0 to $count"
  tags=$(prog_tags)
  [ "$(wc -w <<<"$tags")" = 2 ] || fail "$label: the host veths run other programs than one per hook: $tags"
  [ -n "${TAGS[$to]:-}" ] || TAGS[$to]=$tags
  [ "$tags" = "${TAGS[$to]}" ] || fail "$label: programs $tags, not the $to release's ${TAGS[$to]}"
  [ "${TAGS[old]}" != "${TAGS[new]:-}" ] || fail "$label: both releases' programs have the tags $tags"
  pass "$label: registry unchanged, pod a's counters $COUNT0 -> $count, every hook runs the $to release's programs ($tags)"
  COUNT0=$count
  check_all
}

# The baseline: the same stream for as long as a swap takes, with no swap
# (what the machine's scheduling alone does to the gaps).
ping_start "${NS[a]}" "${IP[b]}" "$WORK/ping-baseline.log"
sleep 2
ping_stop "$WORK/ping-baseline.log"
REPORT+=("$(printf '%-58s %2d lost of %4d, longest gap %4d ms, max rtt %s ms' "no swap (baseline):" "$LOST" "$PINGS_SENT" "$GAP_MS" "$MAX_RTT")")

# Round 1: graceful swaps, and the plugins of both releases against the
# daemons of both.
swap "upgrade 0.1.0 -> this tree (SIGTERM)" new TERM
add_pod c
use_plugin new
check_all
REG0=$(registry)
swap "downgrade this tree -> 0.1.0 (SIGTERM)" old TERM
add_pod d
readd_pod d
del_pod c
use_plugin old
check_all
REG0=$(registry)

# Round 2: daemons killed in the middle of the migration.
swap "upgrade killed after its first endpoint's swap (SIGKILL)" new TERM first-swap
swap "rollback to 0.1.0 after the killed upgrade" old KILL
swap "upgrade killed after every swap, old pins still there" new TERM swapped
swap "upgrade finished by the next start" new KILL
swap "upgrade killed with the old pins removed, mark unwritten" new TERM retired
swap "upgrade finished again by the next start" new KILL
swap "downgrade after the killed upgrades (SIGTERM)" old TERM

for p in "${PODS[@]}"; do del_pod "$p"; done
mode_assert_released
log "lost pings, the longest gap between answers and the longest round trip, per swap (ping -i 0.01):"
for line in "${REPORT[@]}"; do log "  $line"; done
