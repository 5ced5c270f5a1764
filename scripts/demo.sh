#!/usr/bin/env bash
# The main job: a daemon on the embedded default config, two pods networked
# by the real plugin binary, traffic between them through the dataplane.
# Everything it creates has a unique name and is removed on exit.
# Usage (root): scripts/demo.sh [--release]   (DATAPLANE=kernel|ebpf overrides
# the embedded default's dataplane)
set -euo pipefail
cd "$(dirname "$0")/.."

# Each step's wall time, printed at the end (a fresh machine spends most of
# the demo in set-up and the build).
DEMO_START=$SECONDS
STEP_TIMES=()
step_done() { STEP_TIMES+=("$(printf '%-44s %5d s' "$1" $((SECONDS - $2)))"); }

t=$SECONDS
bash scripts/setup.sh
step_done "set-up (scripts/setup.sh)" "$t"
# The demo shows what Sarena does, not how fast it does it: it builds the
# debug profile (the one scripts/test.sh builds too), minutes faster on a
# fresh machine than the optimized, link-time-optimized release build; the
# eBPF programs are optimized in both. --release (or SARENA_DEMO_PROFILE=
# release) builds and runs the release binaries, as scripts/bench.sh
# measures them.
PROFILE=${SARENA_DEMO_PROFILE:-debug}
[ "${1:-}" != --release ] || PROFILE=release
case $PROFILE in
  debug) BUILD_ARGS=() ;;
  release) BUILD_ARGS=(--release) ;;
  *)
    echo "SARENA_DEMO_PROFILE=$PROFILE: debug or release" >&2
    exit 2
    ;;
esac
t=$SECONDS
cargo build -q "${BUILD_ARGS[@]}" -p sarena-cni -p sarena-daemon
step_done "build (cargo build, $PROFILE profile)" "$t"
BIN="$PWD/target/$PROFILE"
RUN_T=$SECONDS

RUN="sarena-demo-$$-$RANDOM"
WORK="$(mktemp -d "/tmp/$RUN.XXXX")"
SOCK="$WORK/sarena.sock"
DAEMON_PID=""
NETNS=("$RUN-a" "$RUN-b")
PIN_DIR="/sys/fs/bpf/$RUN"
# The node-level device the dataplane creates; removed at the end only if
# this demo created it.
HAD_GATEWAY_DEVICE=0
ip link show sarena_host >/dev/null 2>&1 && HAD_GATEWAY_DEVICE=1

cleanup() {
  set +e
  for i in 0 1; do
    [ -e "/var/run/netns/${NETNS[$i]}" ] || continue
    cni DEL "${NETNS[$i]}" >/dev/null 2>&1
    ip netns del "${NETNS[$i]}" 2>/dev/null
  done
  if [ -n "$DAEMON_PID" ]; then kill -TERM "$DAEMON_PID" 2>/dev/null; wait "$DAEMON_PID" 2>/dev/null; fi
  rm -rf "$WORK" "$PIN_DIR"
  [ "$HAD_GATEWAY_DEVICE" = 1 ] || ip link del sarena_host 2>/dev/null
}
trap cleanup EXIT

conf() {
  cat <<JSON
{"cniVersion":"1.1.0","name":"sarena","type":"sarena-cni","daemon-endpoint":"$SOCK",
 "log-file":"$WORK/sarena-cni.log","delete-queue-dir":"$WORK/state/delete-queue"}
JSON
}

# cni COMMAND NETNS: runs the plugin exactly as a runtime does.
cni() {
  conf | env -i PATH="$PATH" CNI_COMMAND="$1" CNI_CONTAINERID="$2" CNI_NETNS="/var/run/netns/$2" \
    CNI_IFNAME=eth0 CNI_PATH="$BIN" CNI_ARGS="K8S_POD_NAMESPACE=default;K8S_POD_NAME=$2" \
    "$BIN/sarena-cni"
}

DAEMON_ARGS=(--socket "$SOCK" --state-dir "$WORK/state" --bpf-pin-dir "$PIN_DIR" --log-level info)
if [ -n "${DATAPLANE:-}" ]; then
  # DATAPLANE=kernel|ebpf overrides the embedded default's dataplane.
  printf 'dataplane = "%s"\n' "$DATAPLANE" > "$WORK/config.toml"
  DAEMON_ARGS+=(--config "$WORK/config.toml")
  echo "== starting sarena-daemon (dataplane $DATAPLANE)"
else
  echo "== starting sarena-daemon (embedded default config)"
fi
"$BIN/sarena-daemon" "${DAEMON_ARGS[@]}" 2>"$WORK/daemon.log" &
DAEMON_PID=$!
for _ in $(seq 100); do [ -S "$SOCK" ] && break; sleep 0.05; done
[ -S "$SOCK" ] || { cat "$WORK/daemon.log"; echo "daemon did not start" >&2; exit 1; }
curl -s --unix-socket "$SOCK" http://sarena/v1/daemon/config; echo

declare -a IPS
for i in 0 1; do
  ns="${NETNS[$i]}"
  ip netns add "$ns"
  echo "== CNI ADD $ns"
  out="$(cni ADD "$ns")"
  echo "$out" | jq -c .
  IPS[i]="$(echo "$out" | jq -r '.ips[0].address' | cut -d/ -f1)"
done

echo "== pod a (${IPS[0]}) -> pod b (${IPS[1]})"
ip netns exec "${NETNS[0]}" ping -c 3 -i 0.2 "${IPS[1]}"
echo "== pod b (${IPS[1]}) -> pod a (${IPS[0]})"
ip netns exec "${NETNS[1]}" ping -c 3 -i 0.2 "${IPS[0]}"

if [ "${DATAPLANE:-ebpf}" = ebpf ]; then
  # A drop explained: pod a claims an address that is not its own; the
  # programs drop the ping and say so (`sarena monitor` streams the same).
  echo "== pod a pings from an address that is not its own: dropped, and the drop event"
  ip netns exec "${NETNS[0]}" ip addr add 10.200.255.254/32 dev eth0
  ip netns exec "${NETNS[0]}" ping -c 1 -W 1 -I 10.200.255.254 "${IPS[1]}" >/dev/null 2>&1 || true
  curl -s --unix-socket "$SOCK" 'http://sarena/v1/events?drops=1&since=60' |
    jq -c '{reason, direction, pod, packet: "\(.packet.src) -> \(.packet.dst) \(.packet.protocol)"}'
fi

echo "== endpoints registered"
curl -s --unix-socket "$SOCK" http://sarena/v1/endpoints | jq -c '.[] | {pod: .pod.name, host_ifname, addresses}'

for i in 0 1; do
  echo "== CNI DEL ${NETNS[$i]}"
  cni DEL "${NETNS[$i]}"
  ip netns del "${NETNS[$i]}"
done
echo "== endpoints after DEL: $(curl -s --unix-socket "$SOCK" http://sarena/v1/endpoints)"
step_done "demo (daemon, two pods, traffic, DEL)" "$RUN_T"
echo "== step times"
for line in "${STEP_TIMES[@]}"; do echo "  $line"; done
printf '  %-44s %5d s\n' total $((SECONDS - DEMO_START))
echo "demo OK"
