# shellcheck shell=bash
# The control plane: a netns holding the underlay bridge, etcd,
# kube-apiserver, kube-controller-manager and kube-scheduler. Sourced by
# e2e/k8s/lib.sh; runs in a child bash with `set -euo pipefail`.

_k8s_gen_pki() {
  mkdir -p "$PKI"
  (
    cd "$PKI"
    umask 077
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
      -keyout ca.key -out ca.crt -days 3650 -subj "/CN=sarena-k8s-$ID"
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
      -keyout apiserver.key -out apiserver.csr -subj /CN=kube-apiserver
    local san="IP:$K8S_CP_IP,IP:$K8S_SERVICE_IP,IP:127.0.0.1,DNS:localhost,DNS:kubernetes"
    san+=",DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
    printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth\nkeyUsage=critical,digitalSignature,keyEncipherment\n' \
      "$san" >apiserver.ext
    openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
      -extfile apiserver.ext -out apiserver.crt
    openssl ecparam -name prime256v1 -genkey -noout -out sa.key
    openssl ec -in sa.key -pubout -out sa.pub
    # token,user,uid,groups
    echo "$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n'),admin,admin,system:masters" >tokens.csv
  ) >"$LOGS/pki.log" 2>&1 || _k8s_die "openssl failed (log: $LOGS/pki.log)"
}

# _k8s_write_kubeconfig FILE TOKEN USER
_k8s_write_kubeconfig() {
  cat >"$1.tmp" <<EOF
# cluster $D (netns $CP_NS); reachable from the control-plane and node netns
apiVersion: v1
kind: Config
clusters:
- name: sarena-k8s
  cluster:
    server: https://$K8S_CP_IP:6443
    certificate-authority-data: $(base64 -w0 "$PKI/ca.crt")
users:
- name: $3
  user:
    token: $2
contexts:
- name: sarena-k8s
  context: {cluster: sarena-k8s, user: $3}
current-context: sarena-k8s
EOF
  chmod 600 "$1.tmp"
  mv "$1.tmp" "$1"
}

_k8s_cp_netns() {
  ip netns del "$CP_NS" 2>/dev/null || true
  ip netns add "$CP_NS"
  ip -n "$CP_NS" link set lo up
  ip -n "$CP_NS" link add underlay type bridge
  ip -n "$CP_NS" addr add "$K8S_CP_IP/24" dev underlay
  if [ "$K8S_DUAL_STACK" = 1 ]; then ip -n "$CP_NS" addr add "$K8S_CP_IP6/64" dev underlay nodad; fi
  ip -n "$CP_NS" link set underlay up
}

_k8s_has_sa_token() {
  _k8s_kubectl get serviceaccount default -o 'jsonpath={.secrets[0].name}' | grep . >/dev/null
}

_k8s_up() {
  _k8s_dir "${1:-}" create
  _k8s_dir_place "$D"
  _k8s_bin etcd etcdctl kube-apiserver kube-controller-manager kube-scheduler kubectl
  ! _k8s_pid cp.kube-apiserver >/dev/null || _k8s_die "$D is already up (k8s_down it first)"
  if [ -e "$D/state.env" ]; then
    _k8s_log "cleaning up the previous cluster in $D"
    _k8s_down_all
    rm -rf --one-file-system "$D/cp" "$D/nodes" "$RUN" "$LOGS" "$PKI" "$D/kubectl-cache" \
      "$D/kubeconfig" "$D/state.env"
  fi
  mkdir -p "$RUN" "$LOGS" "$D/cp" "$D/nodes"
  # a failed up stops whatever it started
  # shellcheck disable=SC2154 # rc is the trap's own
  trap 'rc=$?; if [ $rc != 0 ]; then _k8s_warn "up failed, tearing down"; _k8s_down_all; fi' EXIT
  _k8s_net_vars # this cluster's, from the environment
  printf 'ID=%s\nCP_NS=%s\nUNDERLAY=%s\nDUAL_STACK=%s\nCLUSTER_DNS=%s\nNODE_MASK=%s\n' "$ID" "$CP_NS" \
    "$K8S_UNDERLAY" "$K8S_DUAL_STACK" "$K8S_CLUSTER_DNS" "$K8S_NODE_MASK" >"$D/state.env"

  local t0=$SECONDS
  _k8s_gen_pki
  _k8s_write_kubeconfig "$D/kubeconfig" "$(cut -d, -f1 "$PKI/tokens.csv")" admin
  _k8s_cp_netns

  _k8s_spawn cp.etcd nsenter --net="/run/netns/$CP_NS" -- "$SARENA_K8S_BIN/etcd" \
    --name cp --data-dir "$D/cp/etcd" \
    --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
    --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
    --initial-cluster cp=http://127.0.0.1:2380 --logger zap --log-outputs stderr
  _k8s_wait 60 cp.etcd _k8s_in_cp "$SARENA_K8S_BIN/etcdctl" --endpoints http://127.0.0.1:2379 endpoint health ||
    _k8s_die "etcd not healthy (log: $LOGS/cp.etcd.log)"

  # The advertise address is the endpoint of the `kubernetes` Service, which
  # pods reach through kube-proxy: it must not be loopback.
  _k8s_spawn cp.kube-apiserver nsenter --net="/run/netns/$CP_NS" -- "$SARENA_K8S_BIN/kube-apiserver" \
    --etcd-servers=http://127.0.0.1:2379 --advertise-address="$K8S_CP_IP" \
    --bind-address=0.0.0.0 --secure-port=6443 --insecure-port=0 \
    --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
    --client-ca-file="$PKI/ca.crt" --token-auth-file="$PKI/tokens.csv" \
    --authorization-mode="${SARENA_K8S_AUTHORIZATION:-RBAC}" \
    --service-account-key-file="$PKI/sa.pub" --service-account-signing-key-file="$PKI/sa.key" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-cluster-ip-range="$K8S_SERVICE_CIDR" --allow-privileged=true ${K8S_FEATURE_GATES[@]+"${K8S_FEATURE_GATES[@]}"} \
    --kubelet-preferred-address-types=InternalIP,Hostname \
    --cert-dir="$D/cp/apiserver" --profiling=false --v=1
  _k8s_wait 120 cp.kube-apiserver _k8s_kubectl get --raw /readyz ||
    _k8s_die "kube-apiserver not ready (log: $LOGS/cp.kube-apiserver.log)"

  # --cert-dir everywhere: the default is /var/run/kubernetes on the host.
  _k8s_spawn cp.kube-controller-manager nsenter --net="/run/netns/$CP_NS" -- \
    "$SARENA_K8S_BIN/kube-controller-manager" --kubeconfig="$D/kubeconfig" \
    --bind-address=127.0.0.1 --secure-port=10257 --port=0 --leader-elect=false \
    --allocate-node-cidrs=true --cluster-cidr="$K8S_CLUSTER_CIDR" "${K8S_NODE_MASK_FLAGS[@]}" \
    ${K8S_FEATURE_GATES[@]+"${K8S_FEATURE_GATES[@]}"} \
    --service-cluster-ip-range="$K8S_SERVICE_CIDR" --service-account-private-key-file="$PKI/sa.key" \
    --root-ca-file="$PKI/ca.crt" --use-service-account-credentials=false \
    --cert-dir="$D/cp/controller-manager" --profiling=false --v=1
  _k8s_spawn cp.kube-scheduler nsenter --net="/run/netns/$CP_NS" -- "$SARENA_K8S_BIN/kube-scheduler" \
    --kubeconfig="$D/kubeconfig" --bind-address=127.0.0.1 --secure-port=10259 --port=0 \
    --leader-elect=false --cert-dir="$D/cp/scheduler" --profiling=false --v=1
  # The controller-manager works once it has given `default` its token.
  _k8s_wait 120 cp.kube-controller-manager _k8s_has_sa_token ||
    _k8s_die "kube-controller-manager made no service account token (log: $LOGS/cp.kube-controller-manager.log)"
  _k8s_pid cp.kube-scheduler >/dev/null || _k8s_die "kube-scheduler exited (log: $LOGS/cp.kube-scheduler.log)"
  trap - EXIT
  _k8s_log "control plane up in $((SECONDS - t0))s: https://$K8S_CP_IP:6443 in netns $CP_NS, kubeconfig $D/kubeconfig"
}

# _k8s_sa_kubeconfig DIR NAMESPACE SERVICEACCOUNT FILE: a kubeconfig with the
# service account's token, to run a component under its RBAC outside a pod.
_k8s_sa_kubeconfig() {
  _k8s_dir "${1:-}"
  local ns=${2:?namespace} sa=${3:?service account} out=${4:?output file} secret="" i
  for ((i = 0; i < 120; i++)); do
    secret=$(_k8s_kubectl -n "$ns" get serviceaccount "$sa" -o 'jsonpath={.secrets[0].name}' 2>/dev/null || true)
    [ -n "$secret" ] && break
    sleep 0.25
  done
  [ -n "$secret" ] || _k8s_die "service account $ns/$sa has no token secret"
  _k8s_write_kubeconfig "$out" \
    "$(_k8s_kubectl -n "$ns" get secret "$secret" -o 'jsonpath={.data.token}' | base64 -d)" "$ns-$sa"
}
