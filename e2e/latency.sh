#!/usr/bin/env bash
# ADD and DEL latency through libcni (the Go driver), median and p90 over N
# pods (default 50), for one or more modes measured in the same run.
# Each pod is a fresh netns; all N ADDs run first (one after another), then
# all N DELs. The time is measured inside the driver around
# AddNetworkList/DelNetworkList (plugin exec included, driver start-up
# excluded). Every pod is checked to have its address before DEL, and the
# mode's IPAM must be empty afterwards.
# Usage: e2e/latency.sh [-n N] [MODE...]     (default: ref sarena)
set -euo pipefail
# shellcheck source=e2e/lib.sh
source "$(dirname "$0")/lib.sh"

N=50
if [ "${1:-}" = -n ]; then
  N=$2
  shift 2
fi
[ "$#" -gt 0 ] || set -- ref sarena
[ "$N" -ge 1 ] || fail "-n must be at least 1"

# percentile P FILE: nearest-rank percentile of the numbers in FILE.
percentile() {
  sort -n "$2" | awk -v p="$1" '{v[NR]=$1} END {r=int((p*NR+99)/100); if (r<1) r=1; printf "%.2f", v[r]}'
}

# measure MODE: runs N pods through ADD then DEL; appends rows to $TABLE.
# Runs in its own process (see --one below): own work dir, daemon, cleanup.
measure() {
  e2e_init "latency-$1"
  pick_subnet
  mode_setup "$1"
  ensure_driver
  local conf="$WORK/net.conflist" i ns out
  write_conflist "$conf"
  : >"$WORK/add.ms"
  : >"$WORK/del.ms"
  for ((i = 0; i < N; i++)); do
    ns="se-$RUN_ID-$i"
    new_netns "$ns"
    del_at_exit "$conf" "lat-$RUN_ID-$i"
    out=$(drv add "$conf" "lat-$RUN_ID-$i" "/run/netns/$ns" \
      -args "IgnoreUnknown=1;K8S_POD_NAMESPACE=e2e;K8S_POD_NAME=lat-$i") || fail "ADD pod $i: $out"
    jq -r .elapsedMs <<<"$out" >>"$WORK/add.ms"
    ip -n "$ns" -4 -o addr show dev eth0 | grep inet >/dev/null || fail "pod $i has no address after ADD"
  done
  mode_assert_holding "$N"
  for ((i = 0; i < N; i++)); do
    out=$(drv del "$conf" "lat-$RUN_ID-$i" "/run/netns/se-$RUN_ID-$i") || fail "DEL pod $i: $out"
    jq -r .elapsedMs <<<"$out" >>"$WORK/del.ms"
  done
  mode_assert_released
  local op
  for op in add del; do
    printf '%-24s %-4s %4d %10s %10s\n' "$MODE_LABEL" "${op^^}" "$N" \
      "$(percentile 50 "$WORK/$op.ms")" "$(percentile 90 "$WORK/$op.ms")" >>"$TABLE"
  done
}

if [ "${1:-}" = --one ]; then
  measure "$2"
  exit 0
fi

TABLE=$(mktemp /tmp/sarena-e2e-latency-table.XXXXXX)
trap 'rm -f "$TABLE"' EXIT
if [ -z "${E2E_DRIVER:-}" ]; then
  E2E_DRIVER=$(mktemp /tmp/sarena-e2e-driver.XXXXXX)
  trap 'rm -f "$TABLE" "$E2E_DRIVER"' EXIT
  E2E_TEST=latency build_driver "$E2E_DRIVER"
  export E2E_DRIVER
fi
rc=0
export TABLE N
for m in "$@"; do
  bash "$0" -n "$N" --one "$m" || rc=1
done
echo
echo "CNI latency through libcni, $N pods each, ms (machine: $(nproc) cores, $(uname -r))"
printf '%-24s %-4s %4s %10s %10s\n' conflist op pods median p90
cat "$TABLE"
exit "$rc"
