# shellcheck shell=bash disable=SC2034 # its globals are read by test-upgrade.sh
# Helpers of e2e/test-upgrade.sh: the previous release built from git, the
# daemon and plugin of either release swapped in, and what each swap is
# measured by (a ping stream, a long-lived TCP connection, the filters on
# every host veth, the registry, the counters). Sourced after lib.sh.

# The previous release, 0.1.0 (map layout generation 1), by commit: a CI
# clone may have no tags. The tag v0.1.0 names the same commit where it exists.
OLD_REV=86d6440dfdabbe509837c0d948109e6f75e71aea
# Its source and its target dir live here across runs (the first build takes
# minutes, the next ones are cargo's no-op check).
UPGRADE_CACHE=${SARENA_UPGRADE_CACHE:-/var/cache/sarena-upgrade}

# build_old_release: OLD_BIN is the previous release's binaries, built from
# `git archive $OLD_REV` of this clone into UPGRADE_CACHE when missing, in
# the dev profile of this tree (see below).
build_old_release() {
  local src="$UPGRADE_CACHE/src-${OLD_REV:0:7}" target="$UPGRADE_CACHE/target" started=$SECONDS
  if [ ! -f "$src/Cargo.toml" ]; then
    # A shallow clone may lack it: fetched from origin then, if there is one.
    git -C "$REPO_DIR" cat-file -e "$OLD_REV^{commit}" 2>/dev/null ||
      git -C "$REPO_DIR" fetch --quiet origin "$OLD_REV" 2>/dev/null ||
      fail "commit $OLD_REV (release 0.1.0) is not in this clone (a shallow clone?) and origin did not give it: git fetch origin $OLD_REV"
    rm -rf "$src.partial"
    mkdir -p "$src.partial"
    git -C "$REPO_DIR" archive "$OLD_REV" | tar -x -C "$src.partial" ||
      fail "git archive $OLD_REV failed"
    mv "$src.partial" "$src"
  fi
  log "building release 0.1.0 ($OLD_REV) in $UPGRADE_CACHE"
  # Its build script builds the eBPF programs with the floating `nightly`
  # (the toolchain was pinned later), which needs rust-src: a fresh machine's
  # nightly has none. A no-op when present.
  rustup component add rust-src --toolchain nightly >"$WORK/old-toolchain.log" 2>&1 ||
    fail "rust-src for nightly (release 0.1.0's eBPF build): see $WORK/old-toolchain.log"
  # Its own code in this tree's dev profile (its eBPF programs are optimized
  # whatever the profile): what the upgrade swaps (map layouts, pins, the
  # registry, the plugin) does not depend on it. Its dependencies are a
  # subset of this tree's, at the same versions: the first build seeds its
  # target dir with hard links to target/debug's artifacts (scripts/test.sh
  # built them), so that only what differs is compiled (~1 minute, not the
  # 3-4 of an optimized build from nothing). Keep the profile in step with
  # the workspace's [profile.dev].
  seed_target "$target"
  (cd "$src" && SARENA_EBPF_REQUIRED=1 CARGO_INCREMENTAL=0 \
    cargo build --locked -p sarena-cni -p sarena-daemon \
    --config 'profile.dev.debug="line-tables-only"' \
    --config 'profile.dev.package."*".debug=false' \
    --target-dir "$target") >"$WORK/old-build.log" 2>&1 ||
    fail "building release 0.1.0 failed; see $WORK/old-build.log"
  OLD_BIN="$target/debug"
  pass "release 0.1.0 built ($((SECONDS - started)) s)"
}

# seed_target DIR: DIR/debug (and DIR/ebpf-programs, where
# sarena-daemon/build.rs builds the eBPF programs) made of hard links to
# target/'s, unless DIR/debug exists (or there is none, or DIR is on another
# file system: the build then starts from nothing). Not cargo's lock files:
# a build in DIR must not wait on one in target/ (scripts/test.sh lints it
# meanwhile).
seed_target() {
  [ ! -d "$1/debug" ] && [ -d "$REPO_DIR/target/debug" ] || return 0
  mkdir -p "$1"
  if cp -al "$REPO_DIR/target/debug" "$1/debug" 2>/dev/null; then
    if [ -d "$REPO_DIR/target/ebpf-programs" ] && [ ! -d "$1/ebpf-programs" ]; then
      cp -al "$REPO_DIR/target/ebpf-programs" "$1/ebpf-programs" 2>/dev/null || rm -rf "$1/ebpf-programs"
    fi
    find "$1" \( -name .cargo-lock -o -name .sarena-build.lock \) -delete
  else
    rm -rf "$1/debug"
  fi
}

# new_bin: NEW_BIN is this tree's binaries (SARENA_BIN_DIR, else
# target/release, else target/debug).
new_bin() {
  NEW_BIN=${SARENA_BIN_DIR:-}
  local d
  for d in "$REPO_DIR/target/release" "$REPO_DIR/target/debug"; do
    [ -n "$NEW_BIN" ] && break
    [ -x "$d/sarena-daemon" ] && [ -x "$d/sarena-cni" ] && NEW_BIN=$d
  done
  [[ -n $NEW_BIN && -x $NEW_BIN/sarena-daemon ]] ||
    fail "this tree's binaries are not built: cargo build --release -p sarena-cni -p sarena-daemon"
}

# build_fault_daemon: FAULT_BIN holds this tree's sarena-daemon built with
# the fault-injection feature, which the swaps that kill a daemon mid-way
# need (SARENA_TEST_KILL_AT; release and default builds have no kill points).
# Only sarena-daemon, debug, in a target dir of its own
# (target/fault-injection, so that target/ keeps its feature-less binaries),
# seeded with hard links to target/debug's artifacts the first time: the
# dependencies are then fresh and only sarena-core and sarena-daemon are
# compiled again (scripts/test.sh built `-p sarena-daemon` there first).
# SARENA_FAULT_BIN_DIR names a prebuilt one instead.
build_fault_daemon() {
  FAULT_BIN=${SARENA_FAULT_BIN_DIR:-}
  if [ -z "$FAULT_BIN" ]; then
    local started=$SECONDS
    log "building sarena-daemon with fault injection in target/fault-injection"
    seed_target "$REPO_DIR/target/fault-injection"
    (cd "$REPO_DIR" && SARENA_EBPF_REQUIRED=1 cargo build --locked -p sarena-daemon \
      --features fault-injection --target-dir "$REPO_DIR/target/fault-injection") \
      >"$WORK/fault-build.log" 2>&1 ||
      fail "building sarena-daemon with fault injection failed; see $WORK/fault-build.log"
    FAULT_BIN="$REPO_DIR/target/fault-injection/debug"
    pass "sarena-daemon with fault injection built ($((SECONDS - started)) s)"
  fi
  [ -x "$FAULT_BIN/sarena-daemon" ] || fail "no sarena-daemon in $FAULT_BIN"
}

# use_plugin old|new: the plugin dir's sarena-cni is that release's.
use_plugin() {
  local bin=$OLD_BIN
  [ "$1" = new ] && bin=$NEW_BIN
  cp "$bin/sarena-cni" "$PLUGIN_DIR/.sarena-cni.new"
  mv -f "$PLUGIN_DIR/.sarena-cni.new" "$PLUGIN_DIR/sarena-cni"
  PLUGIN_RELEASE=$1
}

# counters_pin: the counters map the running daemon's programs count into.
counters_pin() {
  if [ "$DAEMON_RELEASE" = new ]; then echo SARENA_COUNTERS_V2; else echo SARENA_COUNTERS; fi
}

# watch_filters IFNAME... : in the background, samples the filters of every
# host veth's two hooks until $WORK/stop-watch exists. A dump with other than
# exactly one bpf filter on a hook, or a device gone, is written to
# $WORK/filters.bad; a dump tc itself failed (no verdict either way) to
# $WORK/filters.unknown, with tc's words.
watch_filters() {
  rm -f "$WORK/stop-watch" "$WORK/filters.bad" "$WORK/filters.unknown"
  (
    while [ ! -e "$WORK/stop-watch" ]; do
      for ifname in "$@"; do
        for hook in ingress egress; do
          if ! out=$(node_exec tc filter show dev "$ifname" "$hook" 2>&1); then
            if node_exec ip link show dev "$ifname" >/dev/null 2>&1; then
              echo "$(date +%T.%N) $ifname $hook: $out" >>"$WORK/filters.unknown"
            else
              echo "$(date +%T.%N) $ifname $hook: device gone ($out)" >>"$WORK/filters.bad"
            fi
            continue
          fi
          n=$(grep -c ' bpf .* handle .* id [0-9]' <<<"$out") || true
          [ "$n" = 1 ] || echo "$(date +%T.%N) $ifname $hook: $n filters: $out" >>"$WORK/filters.bad"
        done
      done
    done
  ) &
  WATCH_PID=$!
}

# stop_watch: ends watch_filters' sampling.
stop_watch() {
  touch "$WORK/stop-watch"
  wait "$WATCH_PID" 2>/dev/null || true
}

# ping_start NS DST LOG: 100 pings a second from NS to DST, timestamped.
ping_start() {
  ip netns exec "$1" ping -D -n -i 0.01 -W 1 "$2" >"$3" 2>&1 &
  PING_PID=$!
}

# ping_stop LOG: stops the stream; sets LOST (pings unanswered), GAP_MS
# (the longest time between two answers) and MAX_RTT (ms: a gap with a
# short round trip is the sender's scheduling, not the dataplane's).
ping_stop() {
  kill -INT "$PING_PID" 2>/dev/null || true
  wait "$PING_PID" 2>/dev/null || true
  local sent received
  sent=$(sed -nE 's/^([0-9]+) packets transmitted.*/\1/p' "$1")
  received=$(sed -nE 's/.* ([0-9]+) (packets )?received.*/\1/p' "$1")
  [[ -n $sent && -n $received ]] || fail "no ping summary in $1: $(tail -n 3 "$1")"
  LOST=$((sent - received))
  GAP_MS=$(awk -F'[][]' '/bytes from/ { t = $2 + 0; if (p != "" && t - p > g) g = t - p; p = t }
    END { printf "%d", g * 1000 }' "$1")
  PINGS_SENT=$sent
  MAX_RTT=$(sed -nE 's|^rtt min/avg/max/mdev = [0-9.]+/[0-9.]+/([0-9.]+)/.*|\1|p' "$1")
}

# tcp_start NS_SERVER NS_CLIENT IP PORT: an echo server in NS_SERVER and, in
# NS_CLIENT, one connection to it that exchanges a line every 20 ms and
# exits on the first lost or late (>5 s) answer; its round trips are
# counted in $WORK/tcp.count.
tcp_start() {
  ip netns exec "$1" socat "TCP-LISTEN:$4,reuseaddr" PIPE >"$WORK/tcp-server.log" 2>&1 &
  TCP_SERVER_PID=$!
  defer kill "$TCP_SERVER_PID"
  wait_listening "$1" "$4"
  # shellcheck disable=SC2016 # expanded by the inner bash
  ip netns exec "$2" bash -c '
    exec 3<>"/dev/tcp/$0/$1" || exit 2
    n=0
    while :; do
      echo "$n" >&3
      read -r -t 5 answer <&3 || { echo "no answer to $n" >&2; exit 1; }
      [ "$answer" = "$n" ] || { echo "answer $answer to $n" >&2; exit 1; }
      n=$((n + 1))
      echo "$n" >"$2.tmp" && mv -f "$2.tmp" "$2"
      sleep 0.02
    done' "$3" "$4" "$WORK/tcp.count" >"$WORK/tcp-client.log" 2>&1 &
  TCP_CLIENT_PID=$!
  defer kill "$TCP_CLIENT_PID"
}

# tcp_alive WHAT: the connection opened by tcp_start is still up and
# still exchanging lines.
tcp_alive() {
  kill -0 "$TCP_CLIENT_PID" 2>/dev/null ||
    fail "$1: the TCP connection opened before the first swap broke: $(cat "$WORK/tcp-client.log")"
  local before after
  before=$(cat "$WORK/tcp.count" 2>/dev/null || echo 0)
  sleep 0.3
  after=$(cat "$WORK/tcp.count" 2>/dev/null || echo 0)
  [ "$after" -gt "$before" ] || fail "$1: the TCP connection stalled ($before round trips)"
}

# registry: the daemon's endpoints, sorted (what must survive a swap).
registry() {
  sarena_get /endpoints | jq -cS 'sort_by(.owner.container_id)'
}

# daemon_swap TO SIGNAL [KILL_AT]: in the node netns, stops the running daemon with SIGNAL
# (TERM or KILL) and starts release TO's (new with KILL_AT: the fault-injection
# build, FAULT_BIN's, with SARENA_TEST_KILL_AT=KILL_AT: it kills itself there,
# and this returns once it is gone).
daemon_swap() {
  local to=$1 sig=$2 kill_at=${3:-} bin=$OLD_BIN
  [ "$to" = new ] && bin=$NEW_BIN
  kill "-$sig" "$SARENA_PID" 2>/dev/null || true
  wait "$SARENA_PID" 2>/dev/null || true
  rm -f "$SARENA_SOCKET"
  SARENA_DAEMON[0]="$bin/sarena-daemon"
  DAEMON_RELEASE=$to
  echo "==== $to daemon (after SIG$sig${kill_at:+, to be killed at $kill_at})" >>"$WORK/sarena-daemon.log"
  if [ -n "$kill_at" ]; then
    [ "$to" = new ] || fail "only this tree's daemon has fault injection (swap to $to at $kill_at)"
    local kills faulty=("${SARENA_DAEMON[@]}")
    faulty[0]="$FAULT_BIN/sarena-daemon"
    kills=$(grep -c "killing the daemon (fault injection)" "$WORK/sarena-daemon.log") || true
    SARENA_TEST_KILL_AT=$kill_at ip netns exec "$NODE_NS" "${faulty[@]}" >>"$WORK/sarena-daemon.log" 2>&1 &
    SARENA_PID=$!
    wait "$SARENA_PID" 2>/dev/null || true
    [ "$(grep -c "killing the daemon (fault injection)" "$WORK/sarena-daemon.log")" -gt "$kills" ] ||
      fail "the $to daemon did not reach $kill_at"
    return 0
  fi
  sarena_daemon_up
}
