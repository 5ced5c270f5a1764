#!/usr/bin/env bash
# netavark, podman's network stack (2.1.0, from the crate registry: see
# scripts/setup-netavark.sh), runs sarena-netavark as the plugin of a Sarena
# network, driven as podman drives it: `netavark --plugin-directory DIR
# create`, then `setup NETNS` and `teardown NETNS` per container.
# - create completes the network from the daemon's pool (dual-stack: both
#   families) and hands the addresses to the daemon (IPAM driver "sarena");
#   DNS (which README says to disable) is refused;
# - two containers' netns get their addresses and MACs as setup reports
#   them and ping each other and the host (on eBPF: redirected by the
#   programs); a repeated setup keeps the address; a port mapping is refused
#   and leaves nothing;
# - teardown leaves nothing (link, route, endpoint, address) and is
#   idempotent; with the daemon down, setup fails naming the daemon's
#   socket and leaves nothing, and teardown is queued and replayed by the
#   daemon when it is back.
# The plugin is installed where README's "Using Sarena from podman" puts it
# (re-rooted in the work dir), and README's containers.conf must be
# examples/netavark/containers.conf. (Debian's podman, 4.3, predates
# netavark plugins: podman itself is not driven here.)
# Usage: e2e/test-netavark.sh [sarena]   (Sarena's own plugin: other modes skip)
set -euo pipefail
# shellcheck source=e2e/lib.sh
source "$(dirname "$0")/lib.sh"

e2e_init netavark
if [ "${1:-sarena}" != sarena ]; then
  log "skipped: the netavark plugin is Sarena's own (mode ${1})"
  exit 0
fi
require_tools python3 sha256sum
NETAVARK=$(bash "$REPO_DIR/scripts/setup-netavark.sh" | tail -n 1) || fail "scripts/setup-netavark.sh failed"
pick_subnet
[ "${E2E_DUAL_STACK:-1}" = 0 ] || pick_subnet6
mode_setup sarena
host_address
EBPF=0
if [ "${SARENA_DATAPLANE:-ebpf}" = ebpf ] && [ -n "$SARENA_PIN_DIR" ]; then EBPF=1; fi

# --- README's set-up ------------------------------------------------------------
EXAMPLE="$REPO_DIR/examples/netavark/containers.conf"
readme_conf=$(awk '/<!-- netavark-containers-conf -->/ {f = 1; next}
  f && /^```toml/ {g = 1; next} g && /^```/ {exit} g' "$REPO_DIR/README.md")
[ "$readme_conf" = "$(cat "$EXAMPLE")" ] ||
  fail "README's containers.conf (after <!-- netavark-containers-conf -->) is not examples/netavark/containers.conf"
plugin_dir=$(python3 -c 'import sys, tomllib
print(tomllib.load(open(sys.argv[1], "rb"))["network"]["netavark_plugin_dirs"][0])' "$EXAMPLE")
install_line="install -D -m 0755 target/sarena-bin/sarena-netavark $plugin_dir/sarena"
grep -qxF "$install_line" "$REPO_DIR/README.md" || fail "README lacks the install line: $install_line"
PLUGINS="$WORK/root$plugin_dir"
install -D -m 0755 "$(dirname "${SARENA_DAEMON[0]}")/sarena-netavark" "$PLUGINS/sarena"
pass "README's containers.conf is the example's; the plugin installed as $plugin_dir/sarena (under $WORK/root)"
nv() { "$NETAVARK" --plugin-directory "$PLUGINS" --config "$WORK/netavark" "$@"; }
hex64() { head -c 32 /dev/urandom | sha256sum | cut -c1-64; }

# --- create ---------------------------------------------------------------------
# What `podman network create -d sarena --disable-dns -o daemon-endpoint=...`
# hands netavark.
jq -n --arg name "$NET_NAME" --arg id "$(hex64)" --arg sock "$SARENA_SOCKET" \
  --arg queue "$SARENA_STATE/delete-queue" \
  '{network: {name: $name, id: $id, driver: "sarena", ipv6_enabled: false, internal: false,
     dns_enabled: false, options: {"daemon-endpoint": $sock, "delete-queue-dir": $queue}},
    used: {interfaces: [], names: {}, subnets: []},
    options: {subnet_pools: [], default_interface_name: null, check_used_subnets: false}}' \
  >"$WORK/create.json"
out=$(jq '.network.dns_enabled = true' "$WORK/create.json" | nv create) &&
  fail "create with DNS enabled succeeded: $out"
grep -F -- '--disable-dns' <<<"$out" >/dev/null || fail "create with DNS: no word of --disable-dns: $out"
pass "create refuses DNS, naming --disable-dns"
NETWORK=$(nv create <"$WORK/create.json") || fail "netavark create: $NETWORK"
want_subnets=$(jq -cn --arg s4 "$POD_SUBNET" --arg s6 "${POD_SUBNET6:-}" '[$s4] + (if $s6 == "" then [] else [$s6] end)')
[ "$(jq -c '[.subnets[].subnet]' <<<"$NETWORK")" = "$want_subnets" ] ||
  fail "create: subnets are not the daemon's pool $want_subnets: $NETWORK"
[ "$(jq -r '.ipam_options.driver' <<<"$NETWORK")" = sarena ] || fail "create: IPAM driver not sarena: $NETWORK"
[ "$(jq -r '.ipv6_enabled' <<<"$NETWORK")" = "$([ -n "${POD_SUBNET6:-}" ] && echo true || echo false)" ] ||
  fail "create: ipv6_enabled does not follow the pool: $NETWORK"
pass "netavark create: $(jq -c '[.subnets[] | "\(.subnet) gw \(.gateway)"]' <<<"$NETWORK"), IPAM driver sarena"

# container_input NAME ID [PORT_MAPPINGS_JSON [OPTIONS_JSON]]: setup's and
# teardown's stdin; OPTIONS_JSON is merged into the container's options on
# the network (static_ips, static_mac: podman run --ip, --mac-address).
container_input() {
  jq -n --arg name "$NET_NAME" --arg ctr "$1" --arg id "$2" --argjson net "$NETWORK" \
    --argjson ports "${3:-null}" --argjson opts "${4:-"{}"}" \
    '{container_id: $id, container_name: $ctr, port_mappings: $ports, dns_servers: null,
      networks: {($name): ({interface_name: "eth0", aliases: [$ctr]} + $opts)},
      network_info: {($name): $net}}'
}
# setup_ok P: setup of container P; sets IP[P] (IP6[P]), MAC[P], HOSTIF[P].
declare -A NS CID IP IP6 MAC HOSTIF OPTS
SETUP_MS=0
# ctr-b asks for its address and MAC (podman run --ip, --mac-address).
WANT_IP_B="$POD_PREFIX.77" WANT_MAC_B="0a:58:5e:00:00:77"
OPTS[b]=$(jq -cn --arg ip "$WANT_IP_B" --arg mac "$WANT_MAC_B" '{static_ips: [$ip], static_mac: $mac}')
setup_ok() {
  local p=$1 out started
  container_input "ctr-$p" "${CID[$p]}" null "${OPTS[$p]:-"{}"}" >"$WORK/setup-$p.json"
  started=$(date +%s%N)
  out=$(nv setup "/run/netns/${NS[$p]}" <"$WORK/setup-$p.json") || fail "netavark setup ctr-$p: $out"
  SETUP_MS=$((($(date +%s%N) - started) / 1000000))
  local block
  block=$(jq -c --arg n "$NET_NAME" '.[$n].interfaces.eth0' <<<"$out")
  IP[$p]=$(jq -r '[.subnets[].ipnet | select(contains(":") | not)][0] | split("/")[0]' <<<"$block")
  IP6[$p]=$(jq -r '[.subnets[].ipnet | select(contains(":"))][0] // "" | split("/")[0]' <<<"$block")
  MAC[$p]=$(jq -r '.mac_address' <<<"$block")
  [[ ${IP[$p]} == "$POD_PREFIX".* ]] || fail "setup ctr-$p: no address in $POD_SUBNET: $out"
  [ -z "${POD_SUBNET6:-}" ] || [[ ${IP6[$p]} == "$POD_PREFIX6":* ]] || fail "setup ctr-$p: no IPv6 address: $out"
  ip -n "${NS[$p]}" -o addr show dev eth0 | grep -F " ${IP[$p]}/" >/dev/null ||
    fail "ctr-$p: eth0 does not carry ${IP[$p]}"
  [ "$(ip -n "${NS[$p]}" -j link show dev eth0 | jq -r '.[0].address')" = "${MAC[$p]}" ] ||
    fail "ctr-$p: eth0's MAC is not the reported ${MAC[$p]}"
  HOSTIF[$p]=$(host_if_for "${IP[$p]}")
}

# --- setup -----------------------------------------------------------------------
for p in a b c; do
  NS[$p]="nv-$RUN_ID-$p"
  CID[$p]=$(hex64)
  new_netns "${NS[$p]}"
done
for p in a b; do
  setup_ok "$p"
  pass "setup ctr-$p in $SETUP_MS ms (netavark and the plugin): ${IP[$p]} ${IP6[$p]} mac ${MAC[$p]} via host link ${HOSTIF[$p]}"
done
[ "${IP[a]}" != "${IP[b]}" ] || fail "both containers got ${IP[a]}"
[ "${IP[b]} ${MAC[b]}" = "$WANT_IP_B $WANT_MAC_B" ] ||
  fail "ctr-b asked for $WANT_IP_B and $WANT_MAC_B, got ${IP[b]} and ${MAC[b]}"
pass "ctr-b got the address and MAC it asked for (static_ips, static_mac)"
mode_assert_holding 2

[ "$EBPF" = 0 ] || redirected0=$(ebpf_counter "${HOSTIF[a]}" redirected_packets)
ping_ok "ctr-a -> ctr-b" ip netns exec "${NS[a]}" ping -c1 -W3 "${IP[b]}"
ping_ok "ctr-b -> ctr-a" ip netns exec "${NS[b]}" ping -c1 -W3 "${IP[a]}"
ping_ok "ctr-a -> host" ip netns exec "${NS[a]}" ping -c1 -W3 "$HOST_IP"
ping_ok "host -> ctr-b" ping -c1 -W3 "${IP[b]}"
if [ -n "${POD_SUBNET6:-}" ]; then
  ping_ok "ctr-a -> ctr-b over IPv6" ip netns exec "${NS[a]}" ping -c1 -W3 "${IP6[b]}"
  ping_ok "host -> ctr-a over IPv6" ping -c1 -W3 "${IP6[a]}"
fi
if [ "$EBPF" = 1 ]; then
  redirected=$(($(ebpf_counter "${HOSTIF[a]}" redirected_packets) - redirected0))
  [ "$redirected" -ge 1 ] || fail "eBPF: ctr-a's echo to ctr-b was not redirected by the programs"
  [ "$(ebpf_counter "${HOSTIF[a]}" drops)" = 0 ] || fail "eBPF: ctr-a's frames were dropped"
  pass "eBPF: ctr-a -> ctr-b redirected by the programs ($redirected frames)"
fi

before="${IP[a]} ${MAC[a]}"
setup_ok a
[ "${IP[a]} ${MAC[a]}" = "$before" ] || fail "a repeated setup of ctr-a moved it: $before -> ${IP[a]} ${MAC[a]}"
mode_assert_holding 2
ping_ok "ctr-a -> ctr-b after the repeated setup" ip netns exec "${NS[a]}" ping -c1 -W3 "${IP[b]}"
pass "a repeated setup of ctr-a keeps ${IP[a]} and ${MAC[a]}"

links_before=$(ip -o link show | wc -l)
out=$(container_input ctr-c "${CID[c]}" '[{"container_port": 80, "host_ip": "", "host_port": 8080, "protocol": "tcp", "range": 1}]' |
  nv setup "/run/netns/${NS[c]}") && fail "setup with a port mapping succeeded: $out"
grep -F 'port_mappings`: port mappings are not supported' <<<"$out" >/dev/null || fail "setup with a port mapping: the error does not name port_mappings: $out"
! ip -n "${NS[c]}" link show eth0 >/dev/null 2>&1 || fail "the refused setup left eth0 in ctr-c"
[ "$(ip -o link show | wc -l)" = "$links_before" ] || fail "the refused setup left a host link"
mode_assert_holding 2
pass "a port mapping is refused by name and leaves nothing"

# --- teardown ----------------------------------------------------------------------
for p in a b; do
  out=$(container_input "ctr-$p" "${CID[$p]}" | nv teardown "/run/netns/${NS[$p]}") ||
    fail "netavark teardown ctr-$p: $out"
  assert_gone "${IP[$p]}" "${HOSTIF[$p]}"
  [ -z "${IP6[$p]}" ] || assert_gone "${IP6[$p]}" ""
  ! ip -n "${NS[$p]}" link show eth0 >/dev/null 2>&1 || fail "teardown left eth0 in ctr-$p"
done
mode_assert_released
out=$(container_input ctr-a "${CID[a]}" | nv teardown "/run/netns/${NS[a]}") || fail "a second teardown of ctr-a failed: $out"
pass "teardown of both leaves nothing; a second teardown succeeds"

# --- the daemon down -----------------------------------------------------------------
setup_ok a
stop_pid "$SARENA_PID"
links_before=$(ip -o link show | wc -l)
out=$(container_input ctr-c "${CID[c]}" | nv setup "/run/netns/${NS[c]}") && fail "setup with the daemon down succeeded: $out"
grep -F "cannot reach the daemon at $SARENA_SOCKET" <<<"$out" >/dev/null ||
  fail "setup with the daemon down: the error does not name the daemon's socket: $out"
! ip -n "${NS[c]}" link show eth0 >/dev/null 2>&1 || fail "the failed setup left eth0 in ctr-c"
[ "$(ip -o link show | wc -l)" = "$links_before" ] || fail "the failed setup left a host link"
pass "setup with the daemon down fails naming $SARENA_SOCKET, leaving nothing"
out=$(container_input ctr-a "${CID[a]}" | nv teardown "/run/netns/${NS[a]}") ||
  fail "teardown with the daemon down failed (it should be queued): $out"
[ -n "$(ls -A "$SARENA_STATE/delete-queue" 2>/dev/null)" ] || fail "teardown with the daemon down queued nothing"
rm -f "$SARENA_SOCKET"
sarena_daemon_up
assert_gone "${IP[a]}" "${HOSTIF[a]}"
mode_assert_released
pass "teardown with the daemon down was queued, and replayed by the daemon when it came back"
