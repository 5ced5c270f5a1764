# shellcheck shell=bash disable=SC2034 # its globals are read by lib.sh and the tests
# Address helpers of the end-to-end tests, both families: the run's pod
# subnets, the host's own addresses, the host link a pod address is routed
# through, and what must be gone after DEL. Sourced by e2e/lib.sh, never run.

# pick_subnet: a random 10.X.Y.0/24 no route or address on this host uses.
# Sets POD_SUBNET, POD_PREFIX (10.X.Y) and POD_GATEWAY.
pick_subnet() {
  local a b tries=0 used
  used=$(ip -4 route show table all; ip -4 -o addr show)
  while :; do
    a=$((100 + $(od -An -N1 -tu1 /dev/urandom) % 100))
    b=$(($(od -An -N1 -tu1 /dev/urandom)))
    # 10.200/16 is Sarena's default pool, 10.88/16 podman's.
    if [ "$a" != 200 ] && ! grep -q "10\.$a\.$b\." <<<"$used"; then break; fi
    tries=$((tries + 1))
    [ "$tries" -lt 50 ] || fail "no free 10.X.Y.0/24 found"
  done
  POD_PREFIX="10.$a.$b"
  POD_SUBNET="$POD_PREFIX.0/24"
  POD_GATEWAY="$POD_PREFIX.1"
}

# pick_subnet6: a random fd00:X:Y::/64 no route or address on this host uses
# (the IPv6 half of a dual-stack pool). Sets POD_SUBNET6, POD_PREFIX6
# (fd00:X:Y) and POD_GATEWAY6 (its ::1, the host's; pods route via fe80::1).
pick_subnet6() {
  local a b tries=0 used
  used=$(ip -6 route show table all; ip -6 -o addr show)
  while :; do
    a=$(printf '%x' $((0x$(od -An -N2 -tx2 /dev/urandom | tr -d ' ') | 1)))
    b=$(printf '%x' $((0x$(od -An -N2 -tx2 /dev/urandom | tr -d ' ') | 1)))
    if ! grep -q "fd00:$a:$b:" <<<"$used"; then break; fi
    tries=$((tries + 1))
    [ "$tries" -lt 50 ] || fail "no free fd00:X:Y::/64 found"
  done
  POD_PREFIX6="fd00:$a:$b"
  POD_SUBNET6="$POD_PREFIX6::/64"
  POD_GATEWAY6="$POD_PREFIX6::1"
  # The plugins turn IPv6 forwarding on; it goes back at exit.
  local forwarding
  forwarding=$(sysctl -n net.ipv6.conf.all.forwarding)
  defer sysctl -qw "net.ipv6.conf.all.forwarding=$forwarding"
}

# host_address: a unique /32 in the host netns, on a dummy link of this run
# (or on lo if the kernel has no dummy driver): the "host" address pods must
# reach (traffic stays inside this machine).
# Sets HOST_IP and HOST_DUMMY.
host_address() {
  HOST_IP="198.18.$(($(od -An -N1 -tu1 /dev/urandom))).$((1 + $(od -An -N1 -tu1 /dev/urandom) % 254))"
  HOST_DUMMY="sed$RUN_ID"
  if ip link add "$HOST_DUMMY" type dummy 2>/dev/null; then
    defer ip link del "$HOST_DUMMY"
    ip link set "$HOST_DUMMY" up
  else
    # Kernel without the dummy driver: the address goes on lo.
    HOST_DUMMY=lo
  fi
  ip addr add "$HOST_IP/32" dev "$HOST_DUMMY"
  defer ip addr del "$HOST_IP/32" dev "$HOST_DUMMY"
  # With a dual-stack pool (pick_subnet6), an IPv6 one too: HOST_IP6.
  if [ -n "${POD_SUBNET6:-}" ]; then
    HOST_IP6="fd5a:e2e:$(od -An -N2 -tx2 /dev/urandom | tr -d ' ')::$(($(od -An -N1 -tu1 /dev/urandom) + 1))"
    ip addr add "$HOST_IP6/128" dev "$HOST_DUMMY" nodad
    defer ip addr del "$HOST_IP6/128" dev "$HOST_DUMMY"
  fi
}

# remove_host_address IP: deletes IP/32 (IPv6: IP/128) from whichever host
# link carries it.
remove_host_address() {
  local dev host=32 family=-4
  if [[ "$1" == *:* ]]; then
    host=128
    family=-6
  fi
  for dev in $(ip -o "$family" addr show | awk -v a="$1/$host" '$4 == a {print $2}'); do
    ip addr del "$1/$host" dev "${dev%%@*}"
  done
  return 0
}

# host_if_for IP: the host link the host routes IP (either family) through,
# directly (not via a gateway: that would be the default route, not the
# pod's own link).
host_if_for() {
  local r family=-4
  [[ "$1" != *:* ]] || family=-6
  r=$(ip -o "$family" route get "$1") || fail "no host route to $1"
  if [[ "$r" == *" via "* ]]; then
    fail "the host routes pod address $1 via a gateway, not through the pod's link: $r"
  fi
  sed -n 's/.* dev \([^ ]*\).*/\1/p' <<<"$r"
}

# assert_gone IP HOSTIF: no host link HOSTIF, no route to IP. Sarena's
# daemon removes the veth right after answering DEL, so the link gets up to
# 2 s to go.
assert_gone() {
  local ip=$1 hostif=$2 i
  if [ -n "$hostif" ]; then
    for ((i = 0; i < 40; i++)); do
      ip link show "$hostif" >/dev/null 2>&1 || break
      sleep 0.05
    done
    ! ip link show "$hostif" >/dev/null 2>&1 || fail "host link $hostif of $ip still exists"
  fi
  if [[ "$ip" == *:* ]]; then
    if ip -6 route show table all | grep -E "(^|[^0-9a-f:])$ip(/128)?( |$)" >/dev/null; then
      fail "a route to $ip is still there: $(ip -6 route show table all | grep -F "$ip")"
    fi
  elif ip -4 route show table all | grep -E "(^|[^0-9.])${ip//./\\.}(/32)?( |$)" >/dev/null; then
    fail "a route to $ip is still there: $(ip -4 route show table all | grep -F "$ip")"
  fi
  pass "no link $hostif, no route to $ip"
}
