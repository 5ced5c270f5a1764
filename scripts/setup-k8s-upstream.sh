# shellcheck shell=bash
# Sourced by scripts/setup-k8s.sh: Kubernetes' own end-to-end tests, built
# from the same Debian source tree as the cluster, and the container images
# the network tests run, built here from that tree and from Debian packages.
#
# Output ($CACHE = SARENA_K8S_CACHE):
#   upstream/e2e.test   `go test -c ./test/e2e` (v1.20.2)
#   upstream/ginkgo     the vendored ginkgo v1 CLI (parallel runs)
#   upstream/agnhost    test/images/agnhost (the tree holds agnhost 2.25)
#   upstream/repo-list.yaml  KUBE_TEST_REPO_LIST: re-points the framework's
#                       registries to sarena.local/... (nothing is pulled)
#   images/agnhost.tar        sarena.local/e2e-test-images/agnhost:2.21
#   images/jessie-dnsutils.tar  sarena.local/kubernetes-e2e-test-images/jessie-dnsutils:1.0
#   (busybox.tar and pause.tar also carry sarena.local/library/busybox:1.29
#   and sarena.local/pause:3.2: see setup-k8s.sh's step_images)
#
# The images hold the programs the tests call under the names the v1.20
# framework asks for (test/utils/image/manifest.go), built from this tree
# (agnhost) or taken from Debian (dig, curl, nc, ip, ss, iperf, bash,
# getent, with their libraries) on busybox, as upstream's alpine base. Not
# included: the CoreDNS binary upstream's agnhost image carries (no Go module
# proxy here); the tests that run it are listed as not run by
# e2e/k8s/test-upstream.sh.
# Needs: CACHE, GOPATH_DIR, GO_ROOT, STAMPS, LOGS, IMAGES, REPO, DEB_VERSION, NICE, and the
# functions is_done, mark_done, run, log, die, since, go_env.

UPSTREAM=$CACHE/upstream
# the Debian packages whose programs go into the test images
UPSTREAM_PACKAGES=(busybox-static bash curl netcat-openbsd bind9-dnsutils iproute2 iperf libc-bin)
# registries of test/utils/image/manifest.go, re-pointed (KUBE_TEST_REPO_LIST)
UPSTREAM_REPO_LIST="promoterE2eRegistry: sarena.local/e2e-test-images
e2eRegistry: sarena.local/kubernetes-e2e-test-images
dockerLibraryRegistry: sarena.local/library
gcRegistry: sarena.local"

upstream_build_key() {
  echo "$DEB_VERSION reflect2 $(dpkg-query -W -f='${Version}' golang-github-modern-go-reflect2-dev)" \
    "$("$GO_ROOT/bin/go" version) e2e.test ginkgo agnhost bindata"
}

upstream_built() {
  is_done upstream-build "$(upstream_build_key)" &&
    [ -x "$UPSTREAM/e2e.test" ] && [ -x "$UPSTREAM/ginkgo" ] && [ -x "$UPSTREAM/agnhost" ] &&
    [ -s "$UPSTREAM/localhost.key" ]
}

# test/e2e embeds its manifests and fixtures with go-bindata (generated at
# build time upstream, so missing from the tarball), then the three builds.
step_upstream_build() {
  if upstream_built; then
    log "upstream tests: done"
    return
  fi
  local t
  t=$(date +%s)
  mkdir -p "$UPSTREAM"
  log "upstream tests: go-bindata, go test -c ./test/e2e, ginkgo, agnhost (~2 min warm, ~8 cold)"
  (
    go_env
    cd "$GOPATH_DIR/src/k8s.io/kubernetes"
    "${NICE[@]}" go build -o "$CACHE/go-bindata" ./vendor/github.com/go-bindata/go-bindata/go-bindata
    # the arguments of hack/generate-bindata.sh
    "$CACHE/go-bindata" -nometadata -o test/e2e/generated/bindata.go -pkg generated \
      -ignore .jpg -ignore .png -ignore .md -ignore 'BUILD(\.bazel)?' \
      "test/conformance/testdata/..." "test/e2e/testing-manifests/..." \
      "test/e2e_node/testing-manifests/..." "test/images/..." "test/fixtures/..."
    "${NICE[@]}" go build -trimpath -o "$UPSTREAM/ginkgo" ./vendor/github.com/onsi/ginkgo/ginkgo
    "${NICE[@]}" go build -trimpath -ldflags "-s -w" -o "$UPSTREAM/agnhost" ./test/images/agnhost
    "${NICE[@]}" go test -c -trimpath -ldflags "-s -w" -o "$UPSTREAM/e2e.test" ./test/e2e
    # agnhost's porter serves TLS with these (kept: the tree may be pruned)
    cp test/images/agnhost/porter/localhost.crt test/images/agnhost/porter/localhost.key "$UPSTREAM/"
  ) >"$LOGS/upstream-build.log" 2>&1 || {
    tail -n 25 "$LOGS/upstream-build.log" >&2
    die "building the upstream tests failed (full log: $LOGS/upstream-build.log)"
  }
  "$UPSTREAM/e2e.test" --ginkgo.dryRun --ginkgo.focus='\[sig-network\].*\[Conformance\]' >/dev/null 2>&1 ||
    die "e2e.test does not run (see $LOGS/upstream-build.log)"
  log "upstream tests: built in $(since "$t")"
  mark_done upstream-build "$(upstream_build_key)"
}

upstream_images_key() {
  local p versions=""
  for p in "${UPSTREAM_PACKAGES[@]}"; do versions+=" $p=$(dpkg-query -W -f='${Version}' "$p")"; done
  echo "agnhost $(sha256sum "$UPSTREAM/agnhost" | cut -c1-16)$versions" \
    "mkimage $(sha256sum "$REPO/scripts/mkimage.py" | cut -c1-16) recipe 2"
}

# busybox_base: mkimage.py arguments for busybox's applets (as alpine, the
# base of upstream's images), /etc/passwd, /etc/group, nsswitch.conf, /tmp.
busybox_base() {
  local w=$1 applet
  printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$w/passwd"
  printf 'root:x:0:\nnobody:x:65534:\n' >"$w/group"
  printf 'hosts: files dns\n' >"$w/nsswitch.conf"
  BASE=(--file /bin/busybox /bin/busybox --chmod 0755 /bin/busybox)
  for applet in $(/bin/busybox --list-full); do
    [ "$applet" = bin/busybox ] || BASE+=(--symlink "/$applet" /bin/busybox)
  done
  BASE+=(--file /etc/passwd "$w/passwd" --file /etc/group "$w/group"
    --file /etc/nsswitch.conf "$w/nsswitch.conf" --dir /tmp --dir /root
    --chmod 0644 /etc/passwd --chmod 0644 /etc/group --chmod 0644 /etc/nsswitch.conf
    --chmod 1777 /tmp --chmod 0700 /root
    --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin)
}

# debian_bins DEST=SRC...: --bin arguments (the later entries replace
# busybox's applets of the same path), and /bin/sh as bash: Debian's busybox
# shell runs its own applets before searching PATH (nc, ip, getent would be
# busybox's whatever /usr/bin holds), alpine's does not.
debian_bins() {
  local pair
  DEB_BINS=()
  for pair in "$@"; do DEB_BINS+=(--bin "${pair%%=*}" "$(readlink -f "${pair#*=}")"); done
  DEB_BINS+=(--symlink /bin/sh bash)
}

step_upstream_images() {
  local key w=$CACHE/image-work/upstream
  key=$(upstream_images_key)
  if is_done upstream-images "$key" && [ -s "$IMAGES/agnhost.tar" ] && [ -s "$IMAGES/jessie-dnsutils.tar" ] &&
    [ -s "$UPSTREAM/repo-list.yaml" ]; then
    log "upstream images: done"
    return
  fi
  rm -rf "$w"
  mkdir -p "$w"
  busybox_base "$w"
  # agnhost: test/images/agnhost/Dockerfile's tools (bind-tools, curl,
  # netcat-openbsd, iproute2, iperf, bash) from Debian; getent as alpine has it
  debian_bins /usr/bin/dig=/usr/bin/dig /usr/bin/nslookup=/usr/bin/nslookup /usr/bin/curl=/usr/bin/curl \
    /usr/bin/nc=/usr/bin/nc /sbin/ip=/bin/ip /usr/bin/ss=/usr/bin/ss /usr/bin/iperf=/usr/bin/iperf \
    /bin/bash=/bin/bash /usr/bin/getent=/usr/bin/getent
  run mkimage-agnhost python3 "$REPO/scripts/mkimage.py" -o "$IMAGES/agnhost.tar" \
    -t sarena.local/e2e-test-images/agnhost:2.21 "${BASE[@]}" "${DEB_BINS[@]}" \
    --file /agnhost "$UPSTREAM/agnhost" --chmod 0755 /agnhost --symlink /agnhost-2 agnhost \
    --symlink /usr/local/bin/iperf /usr/bin/iperf \
    --file /localhost.crt "$UPSTREAM/localhost.crt" --file /localhost.key "$UPSTREAM/localhost.key" \
    --dir /uploads --entrypoint /agnhost --cmd pause
  # jessie-dnsutils: upstream's is Debian jessie + dnsutils; this is
  # bookworm's dig, host, nslookup and getent on busybox
  debian_bins /usr/bin/dig=/usr/bin/dig /usr/bin/host=/usr/bin/host /usr/bin/nslookup=/usr/bin/nslookup \
    /bin/bash=/bin/bash /usr/bin/getent=/usr/bin/getent
  run mkimage-jessie-dnsutils python3 "$REPO/scripts/mkimage.py" -o "$IMAGES/jessie-dnsutils.tar" \
    -t sarena.local/kubernetes-e2e-test-images/jessie-dnsutils:1.0 "${BASE[@]}" "${DEB_BINS[@]}" \
    --cmd /bin/sh
  printf '%s\n' "$UPSTREAM_REPO_LIST" >"$UPSTREAM/repo-list.yaml"
  log "upstream images: agnhost.tar $(du -h "$IMAGES/agnhost.tar" | cut -f1), jessie-dnsutils.tar $(du -h "$IMAGES/jessie-dnsutils.tar" | cut -f1)"
  mark_done upstream-images "$key"
}
