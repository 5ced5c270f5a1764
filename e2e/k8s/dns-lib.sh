# shellcheck shell=bash
# The test cluster's DNS (sarena-test-dns, e2e/k8s-dns: test infrastructure
# for the upstream Kubernetes e2e tests, never shipped). Sourced by test
# scripts after e2e/k8s/lib.sh.
#
#   dns_image OUT_TAR   build the image tar sarena.local/test-dns:1 from
#                       ${SARENA_BIN_DIR:-$REPO/target/release}/sarena-test-dns
#                       (without SARENA_BIN_DIR: `cargo build --release -p
#                       sarena-test-dns` first)
#   dns_deploy DIR      apply e2e/k8s/dns/test-dns.yaml to the cluster DIR and
#                       wait (DNS_DEPLOY_TIMEOUT, default 120s) for the
#                       Deployment to be available: Service kube-dns,
#                       10.96.0.10:53 UDP/TCP
#
# Importing the image into the nodes is the caller's job:
#   dns_image /tmp/test-dns.tar && k8s_import "$DIR" node1 /tmp/test-dns.tar
#   dns_deploy "$DIR"
# and the kubelets need --cluster-dns 10.96.0.10 --cluster-domain cluster.local
# for pods to use it.

DNS_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
DNS_REPO=$(cd "$DNS_LIB_DIR/../.." && pwd)
DNS_IMAGE_TAG=sarena.local/test-dns:1
DNS_MANIFEST=$DNS_LIB_DIR/dns/test-dns.yaml

dns_image() (
  set -euo pipefail
  local out=${1:?usage: dns_image OUT_TAR} bin_dir
  if [ -n "${SARENA_BIN_DIR:-}" ]; then
    bin_dir=$SARENA_BIN_DIR
  else
    bin_dir=$DNS_REPO/target/release
    (cd "$DNS_REPO" && cargo build --release -p sarena-test-dns)
  fi
  [ -x "$bin_dir/sarena-test-dns" ] || {
    echo "dns_image: no $bin_dir/sarena-test-dns" >&2
    return 1
  }
  python3 "$DNS_REPO/scripts/mkimage.py" -o "$out" -t "$DNS_IMAGE_TAG" \
    --bin /usr/bin/sarena-test-dns "$bin_dir/sarena-test-dns" \
    --user 65534:65534 --entrypoint /usr/bin/sarena-test-dns
)

dns_deploy() (
  set -euo pipefail
  local dir=${1:?usage: dns_deploy DIR}
  k8s_kubectl "$dir" apply -f "$DNS_MANIFEST" >/dev/null
  if ! k8s_kubectl "$dir" -n kube-system rollout status deployment/sarena-test-dns \
    --timeout "${DNS_DEPLOY_TIMEOUT:-120s}" >/dev/null; then
    echo "dns_deploy: the DNS Deployment is not available" >&2
    k8s_kubectl "$dir" -n kube-system get pods -l k8s-app=kube-dns -o wide >&2 || true
    k8s_kubectl "$dir" -n kube-system logs -l k8s-app=kube-dns --tail 30 >&2 || true
    return 1
  fi
  k8s_kubectl "$dir" -n kube-system wait --for condition=Available \
    deployment/sarena-test-dns --timeout 30s >/dev/null
)
