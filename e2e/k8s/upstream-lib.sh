# shellcheck shell=bash
# Helpers of e2e/k8s/test-upstream.sh: one cluster per pass (the control's
# bridge plugin, or Sarena by its DaemonSet in a routing mode), the upstream
# suite run on it with ginkgo, its JUnit reports turned into a TSV. Sourced
# after e2e/k8s/lib.sh and e2e/k8s/dns-lib.sh with REPO, WORK, OUT, RID, SUITE,
# SUITE_FOCUS and DIR (the pass's cluster directory) set.

log() { printf '[upstream] %s\n' "$*" >&2; }
fail() {
  log "FAIL: $*"
  exit 1
}
ks() { k8s_kubectl "$DIR" -n kube-system "$@"; }

UPSTREAM_DIR=$SARENA_K8S_CACHE/upstream
UPSTREAM_NODES=${SARENA_UPSTREAM_NODES:-2}
# the kubelets' clusterDNS and the kube-dns Service's ClusterIP
CLUSTER_DNS=10.96.0.10
# Never run here (e2e/README.md lists them): a cloud load
# balancer; tests that stop or restart nodes ([Disruptive]) or need the
# cluster to themselves ([Serial]); SCTP traffic (CONFIG_IP_SCTP is not set
# in this kernel).
UPSTREAM_SKIP='LoadBalancer|\[Disruptive\]|\[Serial\]|\[Feature:SCTPConnectivity\]'

# build_images WORK: Sarena's image (scripts/build-image.sh) and the DNS
# server's; sets SARENA_IMAGE and DNS_IMAGE (the tars).
build_images() {
  local tag bad
  read -r tag SARENA_IMAGE < <(bash "$REPO/scripts/build-image.sh" -o "$1/sarena-image.tar")
  bad=$(image_mismatch "$tag" "$REPO/deploy/kubernetes") || fail "build-image.sh tagged $tag, but $bad"
  DNS_IMAGE=$1/dns-image.tar
  dns_image "$DNS_IMAGE"
  local img
  for img in agnhost.tar jessie-dnsutils.tar; do
    [ -s "$SARENA_K8S_IMAGES/$img" ] || fail "$SARENA_K8S_IMAGES/$img missing: run scripts/setup-k8s.sh"
  done
}

node_names() { echo "s$RID-n1 s$RID-n2"; }

# cluster_up PASS: control plane with cluster DNS, two kubelet nodes with
# the test images (scripts/cluster.sh up), the pass's CNI, every node Ready,
# the DNS serving.
cluster_up() {
  local pass=$1 n
  SARENA_K8S_CLUSTER_DNS=$CLUSTER_DNS bash "$REPO/scripts/cluster.sh" up --no-install --dir "$DIR" \
    --node-prefix "s$RID-n" --image "$SARENA_IMAGE" --import "$SARENA_K8S_IMAGES/agnhost.tar" \
    --import "$SARENA_K8S_IMAGES/jessie-dnsutils.tar" --import "$DNS_IMAGE" >/dev/null ||
    fail "$pass: scripts/cluster.sh up failed"
  if [ "$pass" = control ]; then control_cni; else sarena_cni "$pass"; fi
  for n in $(node_names); do
    wait_until 90 node_is_ready "$n" || fail "$pass: $n not Ready"
  done
  dns_deploy "$DIR" || fail "$pass: the cluster DNS did not come up"
}

node_is_ready() {
  [ "$(k get node "$1" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}')" = True ]
}

# control_cni: the reference bridge + host-local on each node (hairpin on,
# no masquerade: pods are routed), each node routing the other's podCIDR.
control_cni() {
  local n m cidr
  for n in $(node_names); do
    cidr=$(cat "$DIR/nodes/$n/podcidrs")
    cat >"$DIR/nodes/$n/net.d/10-bridge.conflist" <<EOF
{"cniVersion": "1.0.0", "name": "control", "plugins": [
  {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "$cidr"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
  {"type": "portmap", "capabilities": {"portMappings": true}}]}
EOF
    for m in $(node_names); do
      [ "$m" = "$n" ] || k8s_exec "$DIR" "$n" ip route replace "$(cat "$DIR/nodes/$m/podcidrs")" \
        via "$(k8s_node_ip "$DIR" "$m")"
    done
  done
}

# sarena_cni native|vxlan|kernel: deploy/kubernetes/ (uninstall/ included,
# not applied) copied to $WORK/deploy-MODE with the ConfigMap's routing set
# to the pass's mode (kernel: the kernel dataplane, native routing; lib.sh's
# sarena_manifests) and the daemon given SARENA_DAEMON_EXTRA_ARGS
# (space-separated, e.g. --metrics-listen=127.0.0.1:9464);
# SARENA_DEPLOY_EDIT, when set, is a command run with the copy's directory
# (further edits); installed by scripts/cluster.sh install (applied, rolled
# out, every node Ready).
sarena_cni() {
  local d=$WORK/deploy-$1 routing=$1 dataplane=ebpf
  if [ "$1" = kernel ]; then routing=native dataplane=kernel; fi
  sarena_manifests "$d" "$routing" "$dataplane" || fail "$1: could not edit the manifests"
  local arg
  for arg in ${SARENA_DAEMON_EXTRA_ARGS:-}; do
    sed -i "s|^\(        - --sysctl-dir=/host/proc/sys\)\$|\1\n        - $arg|" "$d/20-daemonset.yaml"
    grep -qF -- "- $arg" "$d/20-daemonset.yaml" || fail "could not add $arg to the DaemonSet"
  done
  if [ -n "${SARENA_DEPLOY_EDIT:-}" ]; then $SARENA_DEPLOY_EDIT "$d"; fi
  bash "$REPO/scripts/cluster.sh" install --dir "$DIR" --manifests "$d" || fail "$1: scripts/cluster.sh install failed"
}

# clear_pins: the daemons' bpffs pins of this run's nodes.
clear_pins() {
  local n
  for n in $(node_names); do rm -rf "/sys/fs/bpf/sarena-node/$n"; done
  rmdir /sys/fs/bpf/sarena-node 2>/dev/null || true
}

# run_suite PASS TSV: the suite on $DIR's cluster (ginkgo in the
# control-plane netns, where the apiserver and every node are reachable);
# the results as "result<TAB>seconds<TAB>name" lines in TSV.
run_suite() {
  local pass=$1 tsv=$2 rep=$DIR/report rc=0 t=$SECONDS
  mkdir -p "$rep" "$DIR/e2e-out"
  local focus=$SUITE_FOCUS
  [ -z "${SARENA_UPSTREAM_FOCUS:-}" ] ||
    focus="$SUITE_FOCUS.*$SARENA_UPSTREAM_FOCUS|$SARENA_UPSTREAM_FOCUS.*$SUITE_FOCUS"
  k8s_exec "$DIR" cp env KUBE_TEST_REPO_LIST="$UPSTREAM_DIR/repo-list.yaml" \
    PATH="$SARENA_K8S_BIN:$PATH" HOME="$DIR" \
    timeout 3000 "$UPSTREAM_DIR/ginkgo" -nodes="$UPSTREAM_NODES" -noColor \
    -focus="$focus" -skip="$UPSTREAM_SKIP" "$UPSTREAM_DIR/e2e.test" -- \
    --kubeconfig="$DIR/kubeconfig" --provider=skeleton --num-nodes=2 \
    --kubectl-path="$SARENA_K8S_BIN/kubectl" --dns-domain=cluster.local \
    --report-dir="$rep" --e2e-output-dir="$DIR/e2e-out" --disable-log-dump \
    >"$DIR/ginkgo.log" 2>&1 &
  # waited for in the background, so an INT or TERM trap runs at once (and
  # stop_suite ends ginkgo and its processes)
  wait "$!" || rc=$?
  cp "$DIR/ginkgo.log" "$OUT/$pass.ginkgo.log"
  mkdir -p "$OUT/$pass.junit"
  cp "$rep"/*.xml "$OUT/$pass.junit/" 2>/dev/null || true
  python3 "$HERE/upstream-table.py" junit --focus "$focus" --skip "$UPSTREAM_SKIP" "$rep" >"$tsv" || {
    tail -n 40 "$DIR/ginkgo.log" >&2
    fail "$pass: no JUnit results from the suite (ginkgo exit $rc; log above)"
  }
  log "$pass: $(cut -f1 "$tsv" | sort | uniq -c | awk '{printf "%s %s, ", $1, $2}')in $((SECONDS - t)) s (ginkgo exit $rc)"
}

# finish_run RC [WHY]: the EXIT trap of a script of passes: the current
# pass's suite stopped and its cluster down (its state printed first when
# failing), WORK removed (kept with SARENA_K8S_KEEP=1), the phase table, the
# verdict (WHY appended to a failure's); exits with RC.
finish_run() {
  local rc=$1 why=${2:-}
  set +e
  trap - EXIT
  if [ -n "$DIR" ] && [ -e "$DIR/state.env" ]; then
    stop_suite
    [ "$rc" = 0 ] || pass_state >&2 2>&1
    k8s_down "$DIR" >/dev/null 2>&1
    clear_pins
  fi
  if [ "${SARENA_K8S_KEEP:-0}" = 1 ]; then log "keeping $WORK"; else rm -rf --one-file-system "$WORK"; fi
  phase_report
  if [ "$rc" = 0 ]; then log "PASS (${SECONDS}s)"; else log "FAILED (exit $rc$why)"; fi
  exit "$rc"
}

# stop_suite: ends the suite's processes on $DIR's cluster, if any run.
stop_suite() {
  pkill -TERM -f -- "--kubeconfig=$DIR/kubeconfig" 2>/dev/null || true
}

# pass_state: what a failure report needs from the pass's cluster.
pass_state() {
  k get nodes -o wide
  k get pods -A -o wide
  local n p
  for n in $(node_names); do
    p=$(ks get pods -l app.kubernetes.io/name=sarena --field-selector "spec.nodeName=$n" -o name 2>/dev/null | head -n 1)
    [ -z "$p" ] || { echo "---- logs $p" && ks logs "$p" -c sarena --tail=30; }
  done
  echo "---- cluster DNS" && ks logs deployment/sarena-test-dns --tail=20
  [ ! -s "$DIR/ginkgo.log" ] || { echo "---- ginkgo (tail)" && tail -n 30 "$DIR/ginkgo.log"; }
}

# --- the control's results, cached by their inputs -------------------------------

# control_key: a hash of everything the control pass's results depend on
# (paths of this checkout excluded, so another clone of the same tree hits).
control_key() {
  {
    # the DNS server by its sources (its binary holds the checkout's path)
    find "$REPO/e2e/k8s-dns" -type f \( -name '*.rs' -o -name Cargo.toml \) | LC_ALL=C sort |
      xargs cat "$REPO/Cargo.lock" | sha256sum | cut -d' ' -f1
    sha256sum "$UPSTREAM_DIR/e2e.test" "$SARENA_K8S_IMAGES/agnhost.tar" \
      "$SARENA_K8S_IMAGES/jessie-dnsutils.tar" "$SARENA_K8S_BIN/kubelet" \
      "$K8S_HARNESS"/lib.sh "$K8S_HARNESS"/harness/*.sh "$HERE/upstream-lib.sh" "$HERE/dns-lib.sh" \
      "$HERE/dns/"* | cut -d' ' -f1
    dpkg-query -W -f='${Version}\n' containernetworking-plugins containerd
    printf '%s\n' "$SUITE" "$SUITE_FOCUS" "${SARENA_UPSTREAM_FOCUS:-}" "$UPSTREAM_SKIP" "$UPSTREAM_NODES"
  } | sha256sum | cut -c1-32
}
control_file() { echo "$UPSTREAM_DIR/control-$SUITE-$(control_key).tsv"; }

# control_cached TSV: with SARENA_UPSTREAM_CONTROL_CACHE=1, copy the cached
# results of the same inputs to TSV; fails when there are none.
control_cached() {
  [ "${SARENA_UPSTREAM_CONTROL_CACHE:-0}" = 1 ] && [ -s "$(control_file)" ] && cp "$(control_file)" "$1"
}
control_store() { cp "$1" "$(control_file).tmp" && mv "$(control_file).tmp" "$(control_file)"; }
