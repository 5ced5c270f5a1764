#!/usr/bin/env bash
# snapshot-node.sh NODE: the network state of the node this runs in (its
# network and mount namespaces), as normalised sorted text; run by
# k8s_node_snapshot (harness/snapshot.sh), which says what is left out and why.
set -uo pipefail
node=${1:?NODE}
# A tool missing or failing would leave its section empty before and after:
# equal, and blind. So each must be there and answer.
fail() { echo "snapshot-node.sh: $*: the snapshot would be blind to it" >&2; exit 1; }
for tool in ip bridge tc nft sysctl bpftool jq sha256sum; do
  command -v "$tool" >/dev/null || fail "$tool is missing"
done
tables=$(nft -j list tables) || fail "nft list tables failed"
progs=$(bpftool -j prog show) || fail "bpftool prog show failed"
maps=$(bpftool -j map show) || fail "bpftool map show failed"
# counters, times, reference counts and ids, wherever they are
strip='walk(if type == "object" then del(.stats, .stats64, .installed, .last_used, .first_used,
  .expires, .used, .cache, .refcnt, .ref, .bind, .ifindex, .link_index, .link_netnsid, .id,
  .jited, .not_in_hw, .in_hw, .in_hw_count, .valid_life_time, .preferred_life_time) else . end)'
# json SECTION: each element of the JSON array on stdin, stripped, one line each
json() { jq -c -S ".[] | $strip" | sed "s|^|$1 |"; }

ip -j -d link show | jq -r '.[] | "link \(.ifname) kind=\(.linkinfo.info_kind // "-") group=\(.group // "-")"
  + " mtu=\(.mtu) flags=\(.flags | sort | join(",")) master=\(.master // "-") address=\(.address // "-")"'
# (the flags but `tentative`: duplicate address detection takes a second)
ip -j addr show | jq -r '.[] | .ifname as $l | .addr_info[] | "addr \($l) \(.family) \(.local)/\(.prefixlen)"
  + " scope=\(.scope) \([to_entries[] | select(.value == true and .key != "tentative") | .key] | sort | join(","))"'
for f in 4 6; do
  ip -j -d -$f route show table all | json "route$f"
  ip -j -$f rule show | json "rule$f"
  ip -j -$f neigh show nud permanent | json "neigh$f"
done
bridge -j fdb show | jq -c -S ".[] | select(.state == \"permanent\") | $strip" | sed 's/^/fdb /'
tc -j qdisc show | json qdisc
for l in $(ip -j link show | jq -r '.[].ifname'); do
  for hook in ingress egress root; do
    tc -j filter show dev "$l" "$hook" 2>/dev/null | json "filter $l $hook"
  done
done
echo "$tables" | jq -r '.nftables[] | select(.table) | .table | "\(.family) \(.name)"' |
  while read -r fam name; do
    echo "nft-table $fam $name"
    case "$fam:$name" in
      ip:filter | ip:nat | ip:mangle | ip:raw | ip:security) continue ;;
      ip6:filter | ip6:nat | ip6:mangle | ip6:raw | ip6:security) continue ;;
    esac
    nft list table "$fam" "$name" | sed -E "s/counter packets [0-9]+ bytes [0-9]+/counter/; s/^/nft $fam $name | /"
  done
sysctl -a 2>/dev/null | grep -E '^net\.ipv4\.ip_forward |^net\.ipv[46]\.conf\.(all|default|lo|eth0)\.' |
  grep -v stable_secret | sed 's/^/sysctl /'
for d in /sys/fs/bpf/sarena "/sys/fs/bpf/sarena-node/$node"; do
  if [ -e "$d" ]; then find "$d" -printf 'bpffs %p %y\n'; else echo "bpffs $d absent"; fi
done
if [ -d /sys/fs/bpf/sarena-node ]; then echo "bpffs /sys/fs/bpf/sarena-node present"; else echo "bpffs /sys/fs/bpf/sarena-node absent"; fi
echo "$progs" | jq -r '.[].name // empty' |
  grep -xE 'from_container|to_container.*|pod_egress|to_network|from_network' | sort | uniq -c |
  awk '{print "bpf-prog " $2 " " $1}'
echo "bpf-maps SARENA_* $(echo "$maps" | jq '[.[] | select(.name // "" | startswith("SARENA_"))] | length')"
for d in /etc/cni/net.d /opt/cni/bin /run/sarena /var/lib/sarena; do
  if [ -e "$d" ]; then
    find "$d" -printf 'file %p %y %m %s\n'
    find "$d" -type f -exec sha256sum {} + | awk '{print "sha256 " $2 " " $1}'
  else
    echo "file $d absent"
  fi
done
find /var/log -maxdepth 1 -name 'sarena*' -printf 'file %p %y %m\n'
