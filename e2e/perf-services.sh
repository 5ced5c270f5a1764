#!/usr/bin/env bash
# Per-packet cost of the Services-correct fast path and anti-spoofing
# (issues 11, 16): 1-byte TCP request/response rate and iperf3 throughput,
# pod a -> pod b direct and pod a -> ClusterIP -> pod b (a kube-proxy style
# DNAT in the node netns), for several contenders in the same run, rounds
# interleaved so that the machine's load hits them alike. Reports, never
# asserts (exit 0 unless a measurement could not run).
#
# Usage: e2e/perf-services.sh [-r ROUNDS] [-t SECONDS] [-s] NAME=MODE[:BIN_DIR]...
#   MODE: ebpf | kernel (Sarena, binaries from BIN_DIR) | ref (ptp + host-local)
#   -s: turn on kernel.bpf_stats_enabled for the run (restored at exit) and
#       report the programs' own run time per invocation during each
#       request/response test (eBPF contenders): the per-packet cost, free of
#       the scheduling noise that dominates the round-trip rate.
#   e.g. e2e/perf-services.sh before=ebpf:/tmp/main-bin after=ebpf:target/release ref=ref
set -euo pipefail
# shellcheck source=e2e/lib.sh
source "$(dirname "$0")/lib.sh"

if [ "${1:-}" = --one ]; then
  # One contender, one round: prints "rr_direct rr_svc gbps_direct gbps_svc
  # from_ns_direct to_ns_direct from_ns_svc to_ns_svc".
  SPEC=$2 SECS=$3 RR=$4
  NAME=${SPEC%%=*}
  REST=${SPEC#*=}
  WHICH=${REST%%:*}
  [ "$REST" = "$WHICH" ] || export SARENA_BIN_DIR=${REST#*:}
  e2e_init "perf-$NAME"
  ensure_driver
  node_setup
  pick_subnet
  if [ "$WHICH" = ref ]; then
    mode_setup ref
  else
    SARENA_DATAPLANE=$WHICH mode_setup sarena
  fi
  CONF="$WORK/net.conflist"
  write_conflist "$CONF"
  declare -A IP NS
  for p in a b; do
    NS[$p]="sq-$RUN_ID-$p"
    new_netns "${NS[$p]}"
    del_at_exit "$CONF" "perf-$RUN_ID-$p"
    out=$(drv add "$CONF" "perf-$RUN_ID-$p" "/run/netns/${NS[$p]}") || fail "ADD pod $p: $out"
    IP[$p]=$(jq -r '.result.ips[0].address' <<<"$out" | cut -d/ -f1)
  done
  SVC="10.96.$((RANDOM % 256)).10"
  for port in 5001 5201; do
    node_exec iptables -t nat -A PREROUTING -d "$SVC/32" -p tcp --dport "$port" -j DNAT --to-destination "${IP[b]}:$port"
  done
  ip netns exec "${NS[b]}" "$RR" server 5001 &
  defer kill "$!"
  ip netns exec "${NS[b]}" iperf3 -s -p 5201 >/dev/null 2>&1 &
  defer kill "$!"
  sleep 0.5
  # A path that does not work (e.g. pod -> ClusterIP -> pod on programs
  # without the host-stack flows map) reports "fail".
  rr() { timeout $((SECS + 10)) ip netns exec "${NS[a]}" "$RR" client "$1" 5001 "$SECS" 2>/dev/null || echo fail; }
  gbps() {
    local out
    out=$(timeout $((SECS + 10)) ip netns exec "${NS[a]}" iperf3 -c "$1" -p 5201 -t "$SECS" --connect-timeout 3000 -J 2>/dev/null) &&
      jq -e '.end.sum_received.bits_per_second / 1e9 * 100 | floor / 100' <<<"$out" 2>/dev/null || echo fail
  }
  # The ids of the programs on pod a's host veth (one program serves all veths).
  PROGS=()
  if [ "$WHICH" != ref ] && [ "$(cat /proc/sys/kernel/bpf_stats_enabled)" = 1 ]; then
    hostif=$(node_host_if "${IP[a]}")
    for name in from_container to_container; do
      id=$(node_exec bpftool -j net show dev "$hostif" |
        jq -r --arg n "$name" '[.. | objects | select(.name? == $n) | .prog_id // .id] | first // empty')
      [ -n "$id" ] && PROGS+=("$id")
    done
  fi
  # stats: "run_time_ns run_cnt" of each program in PROGS.
  stats() {
    local id
    for id in "${PROGS[@]}"; do
      bpftool -j prog show id "$id" | jq -r '"\(.run_time_ns // 0) \(.run_cnt // 0)"'
    done
  }
  # per_run BEFORE AFTER: ns per invocation of each program between two stats.
  per_run() {
    paste <(echo "$1") <(echo "$2") | awk '{n = $4 - $2; printf "%s ", (n > 0) ? sprintf("%.0f", ($3 - $1) / n) : "-"}'
  }
  # measured_rr IP: sets RATE (round trips/s) and RR_NS (ns per run of each program).
  measured_rr() {
    local before after
    before=$(stats)
    RATE=$(rr "$1")
    after=$(stats)
    RR_NS="- - "
    [ "${#PROGS[@]}" != 2 ] || RR_NS=$(per_run "$before" "$after")
  }
  measured_rr "${IP[b]}"
  rr_direct=$RATE ns_direct=$RR_NS
  measured_rr "$SVC"
  rr_svc=$RATE ns_svc=$RR_NS
  echo "$rr_direct $rr_svc $(gbps "${IP[b]}") $(gbps "$SVC") $ns_direct$ns_svc" >"$WORK/result"
  cat "$WORK/result" >&3
  exit 0
fi

ROUNDS=3
SECS=5
STATS=0
while getopts r:t:s o; do
  case "$o" in
    r) ROUNDS=$OPTARG ;;
    t) SECS=$OPTARG ;;
    s) STATS=1 ;;
    *) exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ "$#" -gt 0 ] || {
  sed -n 's/^# \{0,1\}//; 2,12p' "$0" >&2
  exit 2
}
E2E_TEST=perf
command -v gcc >/dev/null || fail "gcc missing (it compiles the request/response tool)"
TMP=$(mktemp -d /tmp/sarena-perf.XXXXXX)
OLD_STATS=$(cat /proc/sys/kernel/bpf_stats_enabled)
trap 'rm -rf "$TMP"; echo "$OLD_STATS" >/proc/sys/kernel/bpf_stats_enabled' EXIT
[ "$STATS" = 0 ] || echo 1 >/proc/sys/kernel/bpf_stats_enabled
gcc -O2 -o "$TMP/rr" "$E2E_DIR/perf/rr.c" || fail "cannot compile e2e/perf/rr.c"
if [ -z "${E2E_DRIVER:-}" ]; then
  export E2E_DRIVER="$TMP/driver"
  build_driver "$E2E_DRIVER"
fi

declare -A RESULTS
for ((r = 1; r <= ROUNDS; r++)); do
  for spec in "$@"; do
    res=$(bash "$0" --one "$spec" "$SECS" "$TMP/rr" 3>&1 >/dev/null 2>"$TMP/log") || {
      cat "$TMP/log" >&2
      fail "round $r of ${spec%%=*} failed"
    }
    log "round $r ${spec%%=*}: $res"
    RESULTS[${spec%%=*}]+="$res"$'\n'
  done
done

median() {
  sort -n | awk '$1 == "fail" {f = 1; next} {v[++n] = $1}
    END {if (f) print "fail"; else if (!n) print "-"; else print (n % 2) ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2}'
}
printf '\n%s round(s) of %s s each; medians (1-byte TCP round trips/s, iperf3 Gbit/s)\n\n' "$ROUNDS" "$SECS"
printf '| contender | RR direct | RR via ClusterIP | iperf3 direct | iperf3 via ClusterIP | ns/run direct (from, to) | ns/run via ClusterIP (from, to) |\n|---|---|---|---|---|---|---|\n'
for spec in "$@"; do
  n=${spec%%=*}
  row="| $n (${spec#*=}) "
  for col in 1 2 3 4 5 6 7 8; do
    case "$col" in 6 | 8) row+=", " ;; *) row+="| " ;; esac
    row+="$(awk -v c="$col" 'NF {print $c}' <<<"${RESULTS[$n]}" | { grep -v '^-$' || true; } | median) "
  done
  echo "$row|"
done
