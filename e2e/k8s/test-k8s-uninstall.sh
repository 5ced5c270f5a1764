#!/usr/bin/env bash
# Sarena removed from a real cluster, every node left exactly as it was
# before the install (README.md, "Removing Sarena"). Per pass (a routing
# mode; kernel: the kernel dataplane, native routing), a fresh control plane
# (e2e/k8s, Kubernetes 1.20.2) and two kubelet nodes (`scripts/cluster.sh up
# --no-install`, the user's command):
#   decoys planted before the install, on n1: an unmarked veth pair
#   lxc0123456789ab with a proto 90 route, an nft table `inet sarenax`, a
#   clsact on eth0 with a foreign filter at prio 5 egress (matchall, or u32
#   where the kernel has no matchall), a proto 91 route in table 100; n2 gets
#   none (so n1 tests "keep the clsact that was there", n2 "remove the one
#   Sarena added");
#   each node's snapshot (harness/snapshot.sh: links, addresses, routes of
#   every table, rules, permanent neighbours and FDB, qdiscs, tc filters of
#   every link and hook, nft tables, the net sysctls, bpffs, Sarena's
#   programs and maps, the CNI and Sarena files, the Node's conditions);
#   the install (upstream-lib.sh sarena_cni MODE: `scripts/cluster.sh
#   install` of the manifests with the pass's mode and the conflist with the
#   bandwidth capability): nodes Ready, NetworkUnavailable False/SarenaIsUp;
#   pods on both nodes talk across nodes, one with an egress bandwidth limit,
#   one under an egress-isolating NetworkPolicy; Sarena's objects exist (the
#   network hooks on eth0 or sarena.vxlan in eBPF mode, proto 91 routes,
#   sarena.vxlan in vxlan, its nft tables) and the snapshots differ;
#   the workloads of n1 deleted; on n2 a pod `stay` left on Sarena's network
#   and a hostNetwork httpd probed from outside every 0.2 s;
#   scripts/uninstall.sh (apply uninstall/, rollout status, the reports,
#   delete -f deploy/kubernetes/): every report ends clean with nothing left
#   or failed; the nodes NotReady for the CNI's reason ("NetworkReady=false"),
#   NetworkUnavailable gone; `stay` has no eth0;
#   the snapshots equal the ones before, on both nodes (decoys kept, n1's
#   clsact and filter kept, n2 without clsact, no bpffs dir, the same
#   program and map counts); the hostNetwork pod never failed a probe, nor
#   restarted;
#   uninstall/ applied again: Ready at once, nothing removed, the snapshots
#   unchanged after its deletion;
#   the way out for `stay`: the reference bridge conflist on n2, n2 Ready,
#   `kubectl delete pod stay` completes;
#   (native pass) a reinstall: nodes Ready, a pod on each node, ping across;
#   `scripts/cluster.sh down`: nothing left.
# Usage (root): e2e/k8s/test-k8s-uninstall.sh [native|vxlan|kernel]...   (default: native vxlan)
#   SARENA_BIN_DIR=DIR  sarena-daemon, sarena-cni and sarena (default:
#                       build-image.sh runs cargo build --release)
#   SARENA_K8S_KEEP=1   keep the work directory
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
# shellcheck source=e2e/k8s/lib.sh
. "$HERE/lib.sh"
# shellcheck source=e2e/k8s/deploy-lib.sh
. "$HERE/deploy-lib.sh"
# shellcheck source=e2e/k8s/upstream-lib.sh
. "$HERE/upstream-lib.sh"
log() { printf '[k8s-uninstall] %s\n' "$*" >&2; }
fail() {
  log "FAIL: $*"
  exit 1
}

[ "$(id -u)" = 0 ] || fail "needs root"
case "${1:-}" in sarena) shift ;; ref | custom) log "mode $1: the DaemonSet is Sarena's; nothing to do" && exit 0 ;; esac
PASSES=("$@")
[ "${#PASSES[@]}" -gt 0 ] || PASSES=(native vxlan)
for p in "${PASSES[@]}"; do case $p in native | vxlan | kernel) ;; *) fail "unknown pass '$p' (native, vxlan, kernel)" ;; esac; done

PHASE_WIDTH=66
# failures found on the way that do not stop the pass (the objects are put
# back, so that what follows still tests the uninstall); the run fails at
# the end when there is any
DEFERRED=()
defer_fail() {
  log "FAIL (the run goes on, fails at the end): $*"
  DEFERRED+=("$*")
}
RID=$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
N1=s$RID-n1 N2=s$RID-n2 # upstream-lib.sh's node_names
WORK=$(mktemp -d /tmp/sarena-k8s-uninstall.XXXXXX)
DIR=""
finish() {
  local rc=$?
  set +e
  trap - EXIT
  if [ -s "$WORK/watchers" ]; then while read -r w; do kill -- "-$w" 2>/dev/null; done <"$WORK/watchers"; fi
  if [ -n "$DIR" ] && [ -e "$DIR/state.env" ]; then
    if [ "$rc" != 0 ]; then
      log "failed; state and log tails:"
      {
        k get nodes -o wide
        k get pods -A -o wide
        for p in $(ks get pods -l app.kubernetes.io/name=sarena -o name 2>/dev/null); do
          echo "---- logs $p" && ks logs "$p" --all-containers --tail=40
        done
        for n in "$N1" "$N2"; do
          echo "---- $n plugin log" && k8s_exec "$DIR" "$n" tail -n 10 /var/log/sarena-cni.log
        done
      } >&2 2>&1
    fi
    k8s_down "$DIR" >/dev/null 2>&1
  fi
  # a fallback: the uninstall removes them, asserted above
  clear_pins
  phase_report
  if [ "${SARENA_K8S_KEEP:-0}" = 1 ]; then log "keeping $WORK"; else rm -rf --one-file-system "$WORK"; fi
  if [ "${#DEFERRED[@]}" -gt 0 ]; then
    log "failures found on the way:"
    printf '  %s\n' "${DEFERRED[@]}" >&2
    [ "$rc" != 0 ] || rc=1
  fi
  if [ "$rc" = 0 ]; then log "PASS (${SECONDS}s)"; else log "FAILED (exit $rc)"; fi
  exit "$rc"
}
trap finish EXIT
trap 'exit 130' INT TERM

# --- helpers -------------------------------------------------------------------

# snap NODE FILE: NODE's snapshot into FILE.
snap() { k8s_node_snapshot "$DIR" "$1" >"$2" || fail "$1: the snapshot failed"; }
# same_as NODE FILE: NODE's snapshot now equals FILE (the current one in FILE.now).
same_as() { snap "$1" "$2.now" && cmp -s "$2" "$2.now"; }
# assert_same NODE FILE WHAT: same_as, given 20 s (programs are freed after
# an RCU grace period, kubelet updates the conditions every 10 s); else the diff.
assert_same() {
  if ! wait_until 20 same_as "$1" "$2"; then
    k8s_snapshot_diff "$2" "$2.now" >&2 || true
    fail "$1: $3: the node differs from its snapshot before the install (diff above)"
  fi
}
# pod_json NAME NODE [EXTRA]: a busybox pod pinned to NODE serving its name
# on :8080 (EXTRA: more top-level spec JSON, with a leading comma).
pod_json() {
  cat <<EOF
{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "$1", "namespace": "default", "labels": {"t": "uninstall", "pod": "$1"}, "annotations": {${4:-}}},
 "spec": {"nodeName": "$2", "terminationGracePeriodSeconds": 0 ${3:-},
  "containers": [{"name": "c", "image": "sarena.local/busybox:1.35", "imagePullPolicy": "Never",
    "command": ["sh", "-c", "mkdir -p /www && echo $1 >/www/index.html && exec httpd -f -p 8080 -h /www"]}]}}
EOF
}
pod_ip() { k get pod "$1" -o 'jsonpath={.status.podIP}'; }
# fetch FROM IP: FROM's answer from http://IP:8080/
fetch() { k exec "$1" -- timeout 3 wget -qO- "http://$2:8080/"; }
answers() { [ "$(fetch "$1" "$2")" = "$3" ]; } # FROM IP NAME
network_unavailable() {
  k get node "$1" -o json | jq -r '.status.conditions[] | select(.type == "NetworkUnavailable") | "\(.status) \(.reason)"'
}
ready_message() { k get node "$1" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].message}'; }
no_sarena_pods() { [ -z "$(ks get pods -l app.kubernetes.io/name=sarena -o name)" ]; }
# prog_on NODE DEV HOOK NAME: a tc filter running program NAME on DEV's HOOK.
prog_on() {
  k8s_exec "$DIR" "$1" tc -j filter show dev "$2" "$3" 2>/dev/null |
    jq -e --arg n "$4" '[.. | objects | select(.name? == $n or .bpf_name? == $n)] | length > 0' >/dev/null
}
# summaries FILE: the JSON summary lines of the uninstall reports in FILE.
summaries() { grep -E '^\{"removed":' "$1" || true; }
# bandwidth_capability DIR: the ConfigMap's conflist in DIR with the
# bandwidth capability on sarena-cni (kubelet then passes the pods' limits).
bandwidth_capability() {
  sed -i 's|{"type": "sarena-cni", "log-file": "/var/log/sarena-cni.log"}|{"type": "sarena-cni", "log-file": "/var/log/sarena-cni.log", "capabilities": {"bandwidth": true}}|' "$1/10-config.yaml"
  grep -q '"capabilities": {"bandwidth": true}' "$1/10-config.yaml" || fail "could not add the bandwidth capability to the conflist"
}

# no_tentative NODE: no IPv6 address of NODE still in duplicate address
# detection (their local routes appear when it ends).
no_tentative() { [ -z "$(k8s_exec "$DIR" "$1" ip -6 addr show tentative)" ]; }
DECOY_ROUTE=(10.99.0.1/32 dev lxc0123456789ab proto 90)
# decoy_route_kept WHEN: n1's foreign proto 90 route is still there; if not,
# a deferred failure, and the route is put back.
decoy_route_kept() {
  [ -z "$(k8s_exec "$DIR" "$N1" ip route show "${DECOY_ROUTE[@]}")" ] || return 0
  defer_fail "$MODE: $N1's foreign route '${DECOY_ROUTE[*]}' (on an unmarked veth) was removed $1"
  k8s_exec "$DIR" "$N1" ip route add "${DECOY_ROUTE[@]}"
}

# decoys NODE: the foreign objects of n1 (see the header).
decoys() {
  # shellcheck disable=SC2016 # expanded in the node
  k8s_exec "$DIR" "$1" sh -c '
    set -e
    ip link add lxc0123456789ab type veth peer name decoy-peer
    ip link set lxc0123456789ab up && ip link set decoy-peer up
    ip route add 10.99.0.1/32 dev lxc0123456789ab proto 90
    nft add table inet sarenax
    tc qdisc add dev eth0 clsact
    tc filter add dev eth0 egress prio 5 matchall action pass 2>/dev/null ||
      tc filter add dev eth0 egress prio 5 u32 match u32 0 0 classid 1:1
    ip route add 10.98.0.0/24 via "$0" dev eth0 table 100 proto 91' "$(sed -n 's/^UNDERLAY=//p' "$DIR/state.env").1"
}

phase "build: setup-k8s.sh (cached), the image (scripts/build-image.sh)"
bash "$REPO/scripts/setup-k8s.sh" >/dev/null
read -r TAG IMAGE < <(bash "$REPO/scripts/build-image.sh" -o "$WORK/sarena-image.tar")
bad=$(image_mismatch "$TAG" "$REPO/deploy/kubernetes") || fail "build-image.sh tagged $TAG, but $bad"

for MODE in "${PASSES[@]}"; do
  DIR=$WORK/$MODE
  D=$WORK/deploy-$MODE # sarena_cni's copy of deploy/kubernetes
  S=$WORK/snap-$MODE
  mkdir -p "$S"

  phase "$MODE: control plane, two kubelet nodes (NotReady), decoys on n1"
  bash "$REPO/scripts/cluster.sh" up --no-install --dir "$DIR" --node-prefix "s$RID-n" --image "$IMAGE" >/dev/null ||
    fail "scripts/cluster.sh up failed"
  for n in "$N1" "$N2"; do [ "$(node_ready "$n")" != True ] || fail "$n Ready before any CNI config"; done
  decoys "$N1"
  wait_until 10 no_tentative "$N1" || fail "$N1: IPv6 addresses still tentative after 10 s"
  N2_IP=$(k8s_node_ip "$DIR" "$N2")

  phase "$MODE: snapshots before the install"
  for n in "$N1" "$N2"; do snap "$n" "$S/$n.before"; done
  grep -q '^link lxc0123456789ab ' "$S/$N1.before" || fail "the snapshot does not see the decoy veth"
  grep -q '^filter eth0 egress .*"pref":5' "$S/$N1.before" || fail "the snapshot does not see the decoy filter on eth0"
  ! grep -q '^qdisc .*"clsact"' "$S/$N2.before" || fail "$N2 has a clsact before the install"
  [ -z "$(network_unavailable "$N1")" ] || fail "$N1 has a NetworkUnavailable condition before the install"

  phase "$MODE: install (sarena_cni $MODE): nodes Ready"
  SARENA_DEPLOY_EDIT=bandwidth_capability sarena_cni "$MODE"
  for n in "$N1" "$N2"; do
    wait_until 90 is_ready "$n" || fail "$n not Ready after the install"
    [ "$(network_unavailable "$n")" = "False SarenaIsUp" ] || fail "$n: NetworkUnavailable is '$(network_unavailable "$n")'"
  done
  decoy_route_kept "by the install (the daemon's start)"

  phase "$MODE: pods on both nodes (an egress limit, an egress policy), across nodes"
  {
    pod_json a "$N1"
    pod_json bw "$N1" "" '"kubernetes.io/egress-bandwidth": "10M"'
    pod_json stay "$N2"
  } | k apply -f - >/dev/null
  k apply -f - >/dev/null <<'EOF'
{"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": "bw-egress", "namespace": "default"},
 "spec": {"podSelector": {"matchLabels": {"pod": "bw"}}, "policyTypes": ["Egress"], "egress": [{}]}}
EOF
  wait_until 120 all_ready t=uninstall 3 || fail "the pods are not Ready: $(pod_table t=uninstall | tr '\n' ';')"
  wait_until 20 answers a "$(pod_ip stay)" stay || fail "a ($N1) does not reach stay ($N2)"
  answers stay "$(pod_ip a)" a || fail "stay ($N2) does not reach a ($N1)"
  answers bw "$(pod_ip stay)" stay || fail "bw ($N1, egress-limited, isolated) does not reach stay ($N2)"
  k exec a -- ping -c 2 -W 3 "$(pod_ip stay)" >/dev/null || fail "a cannot ping stay across nodes"

  phase "$MODE: Sarena's objects exist; the snapshots differ"
  for n in "$N1" "$N2"; do
    [ -n "$(k8s_exec "$DIR" "$n" ip route show table main proto 91)" ] || fail "$n: no proto 91 peer route"
    nft=$(k8s_exec "$DIR" "$n" nft list tables)
    grep -qx 'table ip sarena' <<<"$nft" || fail "$n: no table ip sarena: $nft"
    case $MODE in
      vxlan)
        k8s_exec "$DIR" "$n" ip link show sarena.vxlan >/dev/null || fail "$n: no sarena.vxlan"
        grep -qx 'table inet sarena_vxlan' <<<"$nft" || fail "$n: no table inet sarena_vxlan"
        ;;
      kernel)
        grep -qx 'table inet sarena' <<<"$nft" || fail "$n: no table inet sarena (anti-spoofing)"
        ;;
    esac
    if [ "$MODE" != kernel ]; then
      dev=eth0
      [ "$MODE" = native ] || dev=sarena.vxlan
      prog_on "$n" "$dev" egress to_network || fail "$n: no to_network on $dev egress"
      prog_on "$n" "$dev" ingress from_network || fail "$n: no from_network on $dev ingress"
    fi
    snap "$n" "$S/$n.installed"
    ! cmp -s "$S/$n.before" "$S/$n.installed" || fail "$n: the snapshot does not see the install"
  done
  if [ "$MODE" != kernel ]; then
    grep -q '^bpf-prog to_container_bw ' "$S/$N1.installed" || fail "$N1: no to_container_bw (the egress limit)"
  fi
  grep -q '^qdisc .*"dev":"eth0".*"clsact"' "$S/$N2.installed" || [ "$MODE" != native ] ||
    fail "$N2: no clsact on eth0 after the install (the hooks)"

  phase "$MODE: n1's workloads deleted; on n2 'stay' and a probed hostNetwork pod"
  k delete pod a bw --wait=false >/dev/null
  k delete networkpolicy bw-egress >/dev/null
  wait_until 60 no_endpoints "$N1" || fail "$N1 still has endpoints: $(endpoints_json "$N1")"
  k apply -f - >/dev/null <<EOF
{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "hostweb", "namespace": "default"},
 "spec": {"nodeName": "$N2", "hostNetwork": true, "terminationGracePeriodSeconds": 0,
  "tolerations": [{"operator": "Exists"}],
  "containers": [{"name": "c", "image": "sarena.local/busybox:1.35", "imagePullPolicy": "Never",
    "command": ["sh", "-c", "mkdir -p /www && echo hostweb >/www/index.html && exec httpd -f -p 18080 -h /www"]}]}}
EOF
  hostweb_ready() { [ "$(k get pod hostweb -o 'jsonpath={.status.containerStatuses[0].ready}')" = true ]; }
  wait_until 60 hostweb_ready || fail "the hostNetwork pod is not Ready"
  HOSTWEB_ID=$(k get pod hostweb -o 'jsonpath={.status.containerStatuses[0].containerID} {.status.containerStatuses[0].restartCount}')
  : >"$WORK/probe.tries"
  : >"$WORK/probe.failed"
  # shellcheck disable=SC2016 # expanded by the inner bash
  setsid bash -c '. "$0/lib.sh"
    while :; do
      echo >>"$3.tries"
      k8s_exec "$1" cp curl -s --max-time 1 "http://$2:18080/" | grep -qx hostweb || date +%T.%N >>"$3.failed"
      sleep 0.2
    done' "$K8S_HARNESS" "$DIR" "$N2_IP" "$WORK/probe" >/dev/null 2>&1 &
  echo "$!" >>"$WORK/watchers"
  PROBER=$!

  decoy_route_kept "while the daemon ran"

  phase "$MODE: scripts/uninstall.sh: reports clean, nodes NotReady (CNI)"
  k8s_exec "$DIR" cp env PATH="$SARENA_K8S_BIN:$PATH" HOME="$DIR" bash "$REPO/scripts/uninstall.sh" \
    --kubeconfig "$DIR/kubeconfig" -f "$D" --timeout 180s >"$WORK/report-$MODE" 2>"$WORK/uninstall-$MODE.err" ||
    fail "scripts/uninstall.sh failed: $(tail -n 5 "$WORK/uninstall-$MODE.err"); reports: $(cat "$WORK/report-$MODE")"
  sed 's/^/  /' "$WORK/report-$MODE" >&2
  for n in "$N1" "$N2"; do
    grep -q "^---- node $n " "$WORK/report-$MODE" || fail "no report of $n"
    last=$(awk -v n="$n" '/^---- node / {on = ($3 == n)} on && /^\{"removed":/ {l = $0} END {print l}' "$WORK/report-$MODE")
    jq -e '.clean == true and .left == 0 and .failed == 0 and .removed > 0' <<<"$last" >/dev/null ||
      fail "$n's report does not end clean after removing something: '$last'"
    if awk -v n="$n" '/^---- node / {on = ($3 == n)} on && /^(left|failed) /' "$WORK/report-$MODE" | grep -q .; then
      fail "$n's report lists objects left or failed"
    fi
  done
  wait_until 60 no_sarena_pods || fail "Sarena pods still there after the delete: $(ks get pods -o name)"
  for n in "$N1" "$N2"; do
    wait_until 60 is_not_ready "$n" || fail "$n still Ready without Sarena"
    [[ $(ready_message "$n") == *NetworkReady=false* ]] || fail "$n NotReady for another reason: $(ready_message "$n")"
    [ -z "$(network_unavailable "$n")" ] || fail "$n: NetworkUnavailable still there: $(network_unavailable "$n")"
  done
  links=$(k exec stay -- ip -o link show | awk -F': ' '{print $2}' | sed 's/@.*//' | tr '\n' ' ')
  [ "$links" = "lo " ] || fail "stay still has interfaces: $links"

  phase "$MODE: each node as before the install; the hostNetwork pod untouched"
  for n in "$N1" "$N2"; do assert_same "$n" "$S/$n.before" "after the uninstall"; done
  kill -- "-$PROBER" 2>/dev/null || true
  tries=$(wc -l <"$WORK/probe.tries") failed=$(wc -l <"$WORK/probe.failed")
  log "hostNetwork pod: $failed of $tries probes failed"
  [ "$tries" -ge 20 ] || fail "the prober made only $tries probes"
  [ "$failed" = 0 ] || fail "$failed of $tries probes of the hostNetwork pod failed: $(head -n 3 "$WORK/probe.failed" | tr '\n' ' ')"
  [ "$(k get pod hostweb -o 'jsonpath={.status.containerStatuses[0].containerID} {.status.containerStatuses[0].restartCount}')" = "$HOSTWEB_ID" ] ||
    fail "the hostNetwork pod was restarted"

  phase "$MODE: uninstall/ again on a clean cluster: Ready, nothing removed"
  k apply -f "$D/00-rbac.yaml" -f "$D/uninstall/" >/dev/null
  ks rollout status daemonset/sarena --timeout=60s >/dev/null || fail "the second uninstall did not become Ready in 60 s"
  for p in $(ks get pods -l app.kubernetes.io/name=sarena -o name); do
    ks logs "$p" >"$WORK/again.log"
    last=$(summaries "$WORK/again.log" | tail -n 1)
    jq -e '.clean == true and .removed == 0 and .left == 0 and .failed == 0' <<<"$last" >/dev/null ||
      fail "$p on a clean node: '$last' ($(head -n 5 "$WORK/again.log" | tr '\n' ' '))"
    ! grep -q '^removed ' "$WORK/again.log" || fail "$p removed something on a clean node: $(grep '^removed ' "$WORK/again.log")"
  done
  k delete --ignore-not-found -f "$D/" >/dev/null
  wait_until 60 no_sarena_pods || fail "Sarena pods still there after the second delete"
  for n in "$N1" "$N2"; do assert_same "$n" "$S/$n.before" "after a second uninstall"; done

  phase "$MODE: the way out for 'stay': the next CNI on n2, then its deletion"
  cat >"$DIR/nodes/$N2/net.d/10-bridge.conflist" <<EOF
{"cniVersion": "0.4.0", "name": "next", "plugins": [
  {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "$(cut -d' ' -f1 "$DIR/nodes/$N2/podcidrs")"}]]}}]}
EOF
  wait_until 60 is_ready "$N2" || fail "$N2 not Ready with the next CNI's config"
  k delete pod stay --timeout=60s >/dev/null || fail "stay was not deleted within 60 s under the next CNI"
  k delete pod hostweb >/dev/null
  rm -f "$DIR/nodes/$N2/net.d/10-bridge.conflist"

  if [ "$MODE" = native ]; then
    phase "$MODE: reinstall: nodes Ready, ping across nodes"
    k apply -f "$D/" >/dev/null
    ks rollout status daemonset/sarena --timeout=180s >/dev/null || fail "the reinstall did not roll out"
    for n in "$N1" "$N2"; do wait_until 90 is_ready "$n" || fail "$n not Ready after the reinstall"; done
    { pod_json r1 "$N1" && pod_json r2 "$N2"; } | k apply -f - >/dev/null
    wait_until 120 all_ready t=uninstall 2 || fail "the pods of the reinstall are not Ready: $(pod_table t=uninstall | tr '\n' ';')"
    k exec r1 -- ping -c 2 -W 3 "$(pod_ip r2)" >/dev/null || fail "r1 cannot ping r2 after the reinstall"
  fi

  phase "$MODE: down"
  # it removes the nodes' pins and fails on anything left (k8s_leftovers)
  keep=()
  [ "${SARENA_K8S_KEEP:-0}" != 1 ] || keep=(--keep)
  bash "$REPO/scripts/cluster.sh" down --dir "$DIR" ${keep[@]+"${keep[@]}"} || fail "scripts/cluster.sh down: something left"
  [ "${SARENA_K8S_KEEP:-0}" = 1 ] || [ ! -e "$DIR" ] || fail "$DIR still there after down"
  DIR=""
done
