#!/usr/bin/env bash
# A/B of two sarena-cni binaries: STATUS, ADD and DEL wall time from exec to
# exit, interleaved (A, B, A, B, ...) against one release daemon in a
# throwaway node netns, so both see the same machine load. Prints p50/p90 in
# microseconds. As root.
#
# Usage: scripts/plugin-ab.sh A_CNI B_CNI [DAEMON] [N]
#   e.g. the plugin of an earlier commit against this tree's:
#   git worktree add /tmp/before REV && (cd /tmp/before && cargo build --release -p sarena-cni)
#   scripts/plugin-ab.sh /tmp/before/target/release/sarena-cni target/release/sarena-cni
set -euo pipefail
[ "$#" -ge 2 ] || {
  echo "usage: $0 A_CNI B_CNI [DAEMON] [N]" >&2
  exit 1
}
A=$1 B=$2 DAEMON=${3:-target/release/sarena-daemon} N=${4:-200}
[ "$(id -u)" = 0 ] || {
  echo "error: run as root (netns, veths, bpffs)" >&2
  exit 1
}
id=ab$$
node=sarena-$id
work=$(mktemp -d "/tmp/sarena-$id.XXXX")
pins=/sys/fs/bpf/sarena-$id
dpid=
cleanup() {
  [ -z "$dpid" ] || { kill "$dpid" 2>/dev/null || true; wait "$dpid" 2>/dev/null || true; }
  local ns
  for ns in $(ip netns list | awk '{print $1}' | grep "^$id-p" || true); do ip netns del "$ns"; done
  ip netns del "$node" 2>/dev/null || true
  rm -rf "$pins" "$work"
}
trap cleanup EXIT

ip netns add "$node"
ip -n "$node" link set lo up
# nsenter, not `ip netns exec`: the latter remounts /sys, hiding bpffs.
nsenter --net="/var/run/netns/$node" "$DAEMON" --socket "$work/s.sock" \
  --state-dir "$work/state" --bpf-pin-dir "$pins" >"$work/daemon.log" 2>&1 &
dpid=$!
for _ in $(seq 100); do
  [ -S "$work/s.sock" ] && break
  sleep 0.1
done
[ -S "$work/s.sock" ] || {
  echo "error: the daemon did not start:" >&2
  cat "$work/daemon.log" >&2
  exit 1
}
mkdir -p "$work/bin"
cp "$A" "$work/bin/a"
cp "$B" "$work/bin/b"
export work id N
export conf='{"cniVersion":"1.0.0","name":"ab","type":"sarena-cni","daemon-endpoint":"'"$work/s.sock"'","delete-queue-dir":"'"$work/dq"'"}'

# one BIN CMD CONTAINER_ID NETNS: the run's wall time in microseconds.
one() {
  local t0 t1 c=$conf
  [ "$2" = STATUS ] && c=${c/1.0.0/1.1.0} # STATUS is a CNI 1.1.0 verb
  t0=$(date +%s%N)
  CNI_COMMAND=$2 CNI_CONTAINERID=$3 CNI_NETNS=$4 CNI_IFNAME=eth0 CNI_PATH=$work/bin \
    "$work/bin/$1" <<<"$c" >/dev/null 2>>"$work/err.log" || echo "failed: $1 $2" >&2
  t1=$(date +%s%N)
  echo $(((t1 - t0) / 1000))
}
measure() {
  local i b ns
  for i in $(seq "$N"); do
    for b in a b; do
      echo "$b status $(one "$b" STATUS x /dev/null)" >>"$work/times"
      ns=$id-p$i$b
      ip netns add "$ns"
      echo "$b add $(one "$b" ADD "c$i$b" "/var/run/netns/$ns")" >>"$work/times"
      echo "$b del $(one "$b" DEL "c$i$b" "/var/run/netns/$ns")" >>"$work/times"
      ip netns del "$ns"
    done
  done
}
export -f one measure
nsenter --net="/var/run/netns/$node" bash -c measure

echo "verb    binary  p50_us  p90_us   (N=$N each, interleaved; A=$A B=$B)"
for verb in status add del; do
  for b in a b; do
    grep "^$b $verb " "$work/times" | awk '{print $3}' | sort -n |
      awk -v v="$verb" -v b="$b" '{t[NR]=$1} END {printf "%-7s %-7s %7d %7d\n", v, toupper(b), t[int(NR*0.5)+0], t[int(NR*0.9)+0]}'
  done
done
if [ -s "$work/err.log" ]; then
  echo "plugin stderr (first lines):"
  head -5 "$work/err.log"
fi
