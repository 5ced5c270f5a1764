#!/usr/bin/env bash
# Builds a real Kubernetes (v1.20.2) and etcd offline, for the Kubernetes
# end-to-end tests (e2e/k8s/). Run as root; idempotent: each step leaves a
# stamp and is skipped when its inputs are unchanged, so a second run takes
# seconds.
#
# Why Kubernetes 1.20.2: these machines reach no Go module proxy, and Debian
# bookworm's `kubernetes` source package is the one complete tree (vendored
# dependencies) that Debian's Go 1.19 builds in GOPATH mode.
#
# Output ($SARENA_K8S_CACHE, default /var/cache/sarena-k8s):
#   bin/     kube-apiserver kube-controller-manager kube-scheduler kubelet
#            kube-proxy kubectl etcd etcdctl pause
#   images/  pause.tar (sarena.local/pause:3.4) busybox.tar (sarena.local/busybox:1.35),
#            agnhost.tar, jessie-dnsutils.tar (the upstream tests' images),
#            docker-archive tars for `ctr images import`
#   upstream/ e2e.test, ginkgo, agnhost: Kubernetes' own e2e tests, built from
#            the same tree (scripts/setup-k8s-upstream.sh)
#   VERSIONS what was built from what
# Work files: src/ gopath/ gocache/ debs/ apt/ logs/ stamps/ (delete a stamp to redo a step).
#
# Usage: scripts/setup-k8s.sh [--prune]   (--prune: then drop everything but
# bin/, images/, upstream/ and the stamps, ~2 GB)
# Environment: SARENA_K8S_CACHE, SARENA_K8S_DEB_VERSION (default: the newest
# 1.20.2 source in the system's Debian suites), SARENA_K8S_NICE (19),
# SARENA_K8S_JOBS (go build -p, 2).
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)

# shellcheck source=scripts/apt.sh
. "$REPO/scripts/apt.sh"

log() { printf '[setup-k8s] %s\n' "$*" >&2; }
die() {
  log "ERROR: $*"
  exit 1
}
[ "$(id -u)" = 0 ] || die "run as root (apt-get, dpkg)"

CACHE=${SARENA_K8S_CACHE:-/var/cache/sarena-k8s}
mkdir -p "$CACHE"
CACHE=$(cd "$CACHE" && pwd)
BIN=$CACHE/bin IMAGES=$CACHE/images STAMPS=$CACHE/stamps LOGS=$CACHE/logs
SRC=$CACHE/src DEBS=$CACHE/debs APTDIR=$CACHE/apt GOPATH_DIR=$CACHE/gopath
NICE=(nice -n "${SARENA_K8S_NICE:-19}")
JOBS=${SARENA_K8S_JOBS:-2}
K8S_VERSION=v1.20.2
GO_ROOT=/usr/lib/go-1.19
KUBE_BINS=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl)
# built from the same source tree: bin/pause, the pause image's binary
SOURCE_BINS=("${KUBE_BINS[@]}" pause)

# Build tools, then what e2e/k8s/ runs: containerd + runc on the nodes,
# the reference CNI plugins, iptables for kube-proxy, unshare/nsenter.
PACKAGES=(
  golang-1.19-go dpkg-dev gcc libc6-dev python3 openssl  # build
  golang-github-modern-go-reflect2-dev                   # reflect2 1.0.2 (see step_patch)
  busybox-static                                         # the busybox image
  containerd runc containernetworking-plugins            # kubelet nodes
  iptables iproute2 util-linux conntrack curl jq
  netcat-openbsd bind9-dnsutils iperf bash libc-bin      # the upstream tests' images
)

mkdir -p "$BIN" "$IMAGES" "$STAMPS" "$LOGS" "$SRC" "$DEBS"
exec 9>"$CACHE/.lock"
# A second run waits for the first (scripts/test.sh starts the build in the
# background; the Kubernetes tests run this again, to wait for it and to
# check the cache) instead of failing.
if ! flock -n 9; then
  log "waiting for another setup-k8s.sh (it holds $CACHE/.lock)"
  waited=$SECONDS
  flock 9
  log "waited $((SECONDS - waited)) s for the other setup-k8s.sh"
fi
START=$(date +%s)

# --- stamps: a step is done when its stamp holds the same key ----------------
# (the key names the step's inputs, so changing one redoes the step)
is_done() { [ "$(cat "$STAMPS/$1" 2>/dev/null)" = "$2" ]; }
mark_done() { printf '%s\n' "$2" >"$STAMPS/$1"; }
since() { echo "$(($(date +%s) - $1))s"; }
# run LOGNAME CMD...: run CMD with its output in logs/LOGNAME.log; on failure show its tail
run() {
  local name=$1
  shift
  if ! "$@" >"$LOGS/$name.log" 2>&1; then
    tail -n 25 "$LOGS/$name.log" >&2
    die "$name failed (full log: $LOGS/$name.log)"
  fi
}

# shellcheck source=scripts/setup-k8s-upstream.sh
. "$REPO/scripts/setup-k8s-upstream.sh"

# --- 1. packages -------------------------------------------------------------
ensure_packages "${PACKAGES[@]}"

# --- 2. the source package, through a private APT configuration --------------
# Its deb-src entries copy the system's own Debian 'deb' entries (same mirror,
# same keyring); nothing under /etc/apt or /var/lib/apt is written.
write_src_sources() {
  python3 - "$1" <<'PY'
import glob, os, re, sys

codename = ""
with open("/etc/os-release") as f:
    for line in f:
        if line.startswith("VERSION_CODENAME="):
            codename = line.split("=", 1)[1].strip().strip('"')
suite_ok = re.compile(r"^%s(-updates|-security)?$" % re.escape(codename))
found = {}  # (uri, suite) -> keyring

def keep(uri, suite, keyring):
    if codename and suite_ok.match(suite):
        found.setdefault((uri.rstrip("/"), suite), keyring or "/usr/share/keyrings/debian-archive-keyring.gpg")

# one-line format: deb [opt=val ...] URI SUITE COMPONENT...
for path in ["/etc/apt/sources.list"] + sorted(glob.glob("/etc/apt/sources.list.d/*.list")):
    if not os.path.exists(path):
        continue
    for line in open(path):
        words = line.split("#", 1)[0].split()
        if not words or words[0] != "deb":
            continue
        opts = ""
        if len(words) > 1 and words[1].startswith("["):
            end = next(i for i, w in enumerate(words) if w.endswith("]"))
            opts, words = " ".join(words[1:end + 1]), [words[0]] + words[end + 1:]
        if len(words) >= 3:
            m = re.search(r"signed-by=([^\s\]]+)", opts)
            keep(words[1], words[2], m and m.group(1))

# deb822 format
for path in sorted(glob.glob("/etc/apt/sources.list.d/*.sources")):
    for stanza in re.split(r"\n[ \t]*\n", open(path).read()):
        fields = {}
        for line in stanza.splitlines():
            if line.startswith("#") or line[:1].isspace() or ":" not in line:
                continue
            key, value = line.split(":", 1)
            fields[key.strip().lower()] = value.strip()
        if "deb" not in fields.get("types", "").split() or fields.get("enabled", "yes").lower() == "no":
            continue
        for uri in fields.get("uris", "").split():
            for suite in fields.get("suites", "").split():
                keep(uri, suite, fields.get("signed-by"))

if not found:
    sys.exit(f"no 'deb' entry for Debian {codename or '(unknown release)'} in /etc/apt")
with open(sys.argv[1], "w") as out:
    for (uri, suite), keyring in sorted(found.items()):
        out.write(f"Types: deb-src\nURIs: {uri}\nSuites: {suite}\nComponents: main\nSigned-By: {keyring}\n\n")
print(len(found))
PY
}

# apt_src apt-get|apt-cache ARGS...: with the private deb-src configuration
apt_src() {
  local tool=$1
  shift
  "$tool" -o Dir::Etc::SourceList="$APTDIR/sources.list" \
    -o Dir::Etc::SourceParts="$APTDIR/sources.list.d" \
    -o Dir::State::Lists="$APTDIR/lists" -o Dir::Cache="$APTDIR/cache" \
    -o APT::Sandbox::User=root "$@"
}

step_fetch() {
  # the version: as asked, else the one downloaded before, else the newest
  local want=${SARENA_K8S_DEB_VERSION:-$(cat "$STAMPS/fetch" 2>/dev/null || true)}
  if [ -n "$want" ] && is_done fetch "$want" && [ -f "$SRC/kubernetes_$want.dsc" ]; then
    DEB_VERSION=$want
    log "fetch: kubernetes $DEB_VERSION already downloaded"
    return
  fi
  mkdir -p "$SRC"
  mkdir -p "$APTDIR/sources.list.d" "$APTDIR/lists/partial" "$APTDIR/cache/archives/partial"
  : >"$APTDIR/sources.list"
  local n
  n=$(write_src_sources "$APTDIR/sources.list.d/debian-src.sources") || die "cannot derive deb-src entries"
  log "fetch: apt-get update of $n deb-src suite(s) (private lists in $APTDIR)"
  run apt-src-update apt_src apt-get update
  DEB_VERSION=${want:-$(apt_src apt-cache showsrc kubernetes 2>/dev/null |
    awk '/^Version: / && $2 ~ /1\.20\.2/ {print $2}' | sort -V | tail -n 1)}
  [ -n "$DEB_VERSION" ] || die "no kubernetes 1.20.2 source package in the Debian suites"
  log "fetch: apt-get source --download-only kubernetes=$DEB_VERSION"
  rm -f "$SRC"/kubernetes_*
  (cd "$SRC" && run apt-source apt_src apt-get source --download-only "kubernetes=$DEB_VERSION")
  [ -f "$SRC/kubernetes_$DEB_VERSION.dsc" ] || die "no kubernetes_$DEB_VERSION.dsc in $SRC after apt-get source"
  mark_done fetch "$DEB_VERSION"
}

# --- 3. unpack (dpkg-source applies Debian's patches) ------------------------
step_unpack() {
  TREE=$SRC/kubernetes
  if is_done unpack "$DEB_VERSION" && [ -d "$TREE/vendor" ]; then
    log "unpack: done"
    return
  fi
  log "unpack: dpkg-source -x"
  rm -rf "$TREE"
  rm -f "$STAMPS/patch" "$STAMPS/openapi"
  run dpkg-source "${NICE[@]}" dpkg-source -x "$SRC/kubernetes_$DEB_VERSION.dsc" "$TREE"
  # GOPATH mode: the tree is the package k8s.io/kubernetes
  mkdir -p "$GOPATH_DIR/src/k8s.io"
  ln -sfn "$TREE" "$GOPATH_DIR/src/k8s.io/kubernetes"
  mark_done unpack "$DEB_VERSION"
}

# --- 4. patch: reflect2 1.0.1 -> 1.0.2 -----------------------------------------
# The vendored github.com/modern-go/reflect2 1.0.1 crashes at run time with
# Go >= 1.18 (it links to runtime internals that changed); 1.0.2 is API
# compatible and Debian ships it as source.
step_patch() {
  local new=/usr/share/gocode/src/github.com/modern-go/reflect2 ver
  ver=$(dpkg-query -W -f='${Version}' golang-github-modern-go-reflect2-dev)
  case $ver in 1.0.2*) ;; *) die "golang-github-modern-go-reflect2-dev is $ver, want 1.0.2" ;; esac
  if is_done patch "$DEB_VERSION reflect2 $ver"; then
    log "patch: done"
    return
  fi
  local old=$TREE/vendor/github.com/modern-go/reflect2
  [ -d "$old" ] || die "$old missing"
  find "$old" -maxdepth 1 -type f \( -name '*.go' -o -name '*.s' \) -delete
  find "$new" -maxdepth 1 -type f \( -name '*.go' -o -name '*.s' \) ! -name '*_test.go' \
    -exec cp {} "$old/" \;
  log "patch: vendored reflect2 replaced by $ver"
  mark_done patch "$DEB_VERSION reflect2 $ver"
}

# go_env: GOPATH mode, no network, no cgo, polite parallelism
go_env() {
  export GOROOT=$GO_ROOT PATH=$GO_ROOT/bin:$PATH GOPATH=$GOPATH_DIR GOCACHE=$CACHE/gocache \
    GO111MODULE=off GOPROXY=off GOFLAGS=-p=$JOBS CGO_ENABLED=0 GOTOOLCHAIN=local
}

# --- 5. pkg/generated/openapi --------------------------------------------------
# Generated at build time upstream (hack/make-rules), so not in the tarball;
# kube-apiserver needs it. Input: every package whose doc tags ask for it.
step_openapi() {
  local out=$TREE/pkg/generated/openapi/zz_generated.openapi.go
  if is_done openapi "$DEB_VERSION" && [ -s "$out" ]; then
    log "openapi: done"
    return
  fi
  local t
  t=$(date +%s)
  log "openapi: building openapi-gen and generating pkg/generated/openapi"
  (
    go_env
    cd "$GOPATH_DIR/src/k8s.io/kubernetes"
    "${NICE[@]}" go build -o "$CACHE/openapi-gen" ./vendor/k8s.io/kube-openapi/cmd/openapi-gen
    # packages (as import paths) with a "+k8s:openapi-gen=" tag in a non-test
    # file; staging code is seen through vendor/, like the upstream Makefile
    grep -rlE --include='*.go' --exclude='*_test.go' '^// *\+k8s:openapi-gen=' \
      cmd pkg plugin staging/src |
      grep -vE '^staging/src/k8s.io/(code-generator|sample-apiserver)/' |
      sed 's|^staging/src/|vendor/|' | xargs -n1 dirname | LC_ALL=C sort -u |
      sed 's|^|k8s.io/kubernetes/|' >"$CACHE/openapi-packages.txt"
    "${NICE[@]}" "$CACHE/openapi-gen" --logtostderr \
      --input-dirs "$(paste -sd, "$CACHE/openapi-packages.txt")" \
      --output-package k8s.io/kubernetes/pkg/generated/openapi \
      --output-file-base zz_generated.openapi \
      --go-header-file vendor/k8s.io/code-generator/hack/boilerplate.go.txt \
      --report-filename "$LOGS/openapi-rule-violations.txt"
  ) >"$LOGS/openapi.log" 2>&1 || {
    tail -n 25 "$LOGS/openapi.log" >&2
    die "openapi generation failed (full log: $LOGS/openapi.log)"
  }
  [ -s "$out" ] || die "openapi-gen wrote no $out"
  log "openapi: $(wc -l <"$CACHE/openapi-packages.txt") packages in $(since "$t")"
  mark_done openapi "$DEB_VERSION"
}

# --- 6. the Kubernetes binaries ----------------------------------------------
have_bins() {
  local b
  for b in "$@"; do [ -x "$BIN/$b" ] || return 1; done
}

build_key() {
  echo "$DEB_VERSION reflect2 $(dpkg-query -W -f='${Version}' golang-github-modern-go-reflect2-dev)" \
    "$("$GO_ROOT/bin/go" version) ${KUBE_BINS[*]}"
}

step_build() {
  local key b ld="-s -w" p
  key=$(build_key)
  if is_done build "$key" && have_bins "${SOURCE_BINS[@]}"; then
    log "build: done"
    return
  fi
  # No git metadata in the tarball: stamp the version the way hack/lib/version.sh does.
  for p in component-base/version client-go/pkg/version; do
    p=k8s.io/kubernetes/vendor/k8s.io/$p
    ld+=" -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=20"
    ld+=" -X $p.gitTreeState=clean -X $p.gitCommit=debian-$DEB_VERSION"
    ld+=" -X $p.buildDate=1970-01-01T00:00:00Z"
  done
  local t pkgs=()
  t=$(date +%s)
  for b in "${KUBE_BINS[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$b"); done
  log "build: go build ${KUBE_BINS[*]} (-p $JOBS; ~6 min on 2 idle cores with a cold Go cache)"
  (
    go_env
    cd "$GOPATH_DIR/src/k8s.io/kubernetes"
    go version
    "${NICE[@]}" go build -trimpath -ldflags "$ld" -o "$BIN/" "${pkgs[@]}"
  ) >"$LOGS/go-build.log" 2>&1 || {
    tail -n 25 "$LOGS/go-build.log" >&2
    die "go build failed (full log: $LOGS/go-build.log)"
  }
  "$BIN/kubectl" version --client --short 2>/dev/null | grep "$K8S_VERSION" >/dev/null ||
    die "kubectl does not report $K8S_VERSION"
  # pause: Kubernetes' own, static
  run pause-gcc gcc -Os -static -DVERSION=3.4 -o "$BIN/pause" "$TREE/build/pause/linux/pause.c"
  strip "$BIN/pause"
  log "build: done in $(since "$t")"
  mark_done build "$key"
}

# --- 7. etcd (3.4, Debian's) -------------------------------------------------
# Downloaded and unpacked, not installed: the package would start a service.
step_etcd() {
  local ver
  ver=$(apt-cache policy etcd-server | awk '/Candidate:/ {print $2}')
  if [ -z "$ver" ] || [ "$ver" = "(none)" ]; then # no package lists yet
    run apt-update apt-get -o DPkg::Lock::Timeout=600 update
    ver=$(apt-cache policy etcd-server | awk '/Candidate:/ {print $2}')
  fi
  if [ -z "$ver" ] || [ "$ver" = "(none)" ]; then die "no etcd-server package in the Debian suites"; fi
  if is_done etcd "$ver" && [ -x "$BIN/etcd" ] && [ -x "$BIN/etcdctl" ]; then
    log "etcd: done"
    return
  fi
  rm -rf "$DEBS/etcd"
  mkdir -p "$DEBS/etcd"
  (cd "$DEBS" && rm -f etcd-*.deb && run apt-download apt-get download -o APT::Sandbox::User=root \
    "etcd-server=$ver" "etcd-client=$ver")
  local deb
  for deb in "$DEBS"/etcd-server_*.deb "$DEBS"/etcd-client_*.deb; do dpkg-deb -x "$deb" "$DEBS/etcd"; done
  install -m 0755 "$DEBS/etcd/usr/bin/etcd" "$BIN/etcd"
  install -m 0755 "$DEBS/etcd/usr/bin/etcdctl" "$BIN/etcdctl"
  log "etcd: $ver"
  mark_done etcd "$ver"
}

# --- 8. images: pause and busybox ------------------------------------------
images_key() {
  echo "pause $(sha256sum "$BIN/pause" | cut -c1-16) busybox $(dpkg-query -W -f='${Version}' busybox-static)" \
    "mkimage $(sha256sum "$REPO/scripts/mkimage.py" | cut -c1-16) tags 2"
}

step_images() {
  local bb=/bin/busybox bbver key
  bbver=$(dpkg-query -W -f='${Version}' busybox-static)
  key=$(images_key)
  if is_done images "$key" && [ -s "$IMAGES/pause.tar" ] && [ -s "$IMAGES/busybox.tar" ]; then
    log "images: done"
    return
  fi
  local w=$CACHE/image-work
  rm -rf "$w"
  mkdir -p "$w"
  run mkimage-pause python3 "$REPO/scripts/mkimage.py" -o "$IMAGES/pause.tar" \
    -t sarena.local/pause:3.4 -t k8s.gcr.io/pause:3.2 -t sarena.local/pause:3.2 \
    --file /pause "$BIN/pause" --chmod 0755 /pause --entrypoint /pause --user 65535:65535
  # busybox: the static binary, a link per applet, passwd/group, /tmp
  printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$w/passwd"
  printf 'root:x:0:\nnobody:x:65534:\n' >"$w/group"
  local args=() applet
  for applet in $("$bb" --list-full); do
    [ "$applet" = bin/busybox ] || args+=(--symlink "/$applet" /bin/busybox)
  done
  run mkimage-busybox python3 "$REPO/scripts/mkimage.py" -o "$IMAGES/busybox.tar" \
    -t sarena.local/busybox:1.35 -t sarena.local/library/busybox:1.29 \
    --file /bin/busybox "$bb" --file /etc/passwd "$w/passwd" --file /etc/group "$w/group" \
    --dir /tmp --dir /root "${args[@]}" --chmod 0755 /bin/busybox --chmod 0644 /etc/passwd \
    --chmod 0644 /etc/group --chmod 1777 /tmp --chmod 0700 /root \
    --env PATH=/bin:/sbin:/usr/bin:/usr/sbin --cmd /bin/sh
  log "images: pause.tar, busybox.tar ($bbver)"
  mark_done images "$key"
}

write_versions() {
  {
    echo "kubernetes $K8S_VERSION (Debian source kubernetes $DEB_VERSION; reflect2 $(dpkg-query -W -f='${Version}' golang-github-modern-go-reflect2-dev))"
    "$GO_ROOT/bin/go" version
    echo "etcd $(cat "$STAMPS/etcd")"
    echo "containerd $(dpkg-query -W -f='${Version}' containerd), runc $(dpkg-query -W -f='${Version}' runc)"
    echo "containernetworking-plugins $(dpkg-query -W -f='${Version}' containernetworking-plugins) (/usr/lib/cni)"
    echo "images: sarena.local/pause:3.4 (also k8s.gcr.io/pause:3.2, sarena.local/pause:3.2)," \
      "sarena.local/busybox:1.35 (also sarena.local/library/busybox:1.29)," \
      "sarena.local/e2e-test-images/agnhost:2.21 (agnhost of this tree: 2.25)," \
      "sarena.local/kubernetes-e2e-test-images/jessie-dnsutils:1.0 (Debian $(dpkg-query -W -f='${Version}' bind9-dnsutils) dig)"
    echo "upstream: e2e.test, ginkgo, agnhost in upstream/ (KUBE_TEST_REPO_LIST=upstream/repo-list.yaml)"
  } >"$CACHE/VERSIONS"
}

# Everything built from the source is current: the source steps can be
# skipped (they may have been pruned).
built_from_source() {
  [ -s "$STAMPS/fetch" ] || return 1
  DEB_VERSION=${SARENA_K8S_DEB_VERSION:-$(cat "$STAMPS/fetch")}
  is_done fetch "$DEB_VERSION" && is_done build "$(build_key)" && have_bins "${SOURCE_BINS[@]}"
}

# --prune: keep bin/, images/, upstream/ and the stamps; drop the source, Go cache and
# downloads (about 2 GB). A later run rebuilds only if an input changed.
prune() {
  rm -rf --one-file-system "$SRC" "$GOPATH_DIR" "$CACHE/gocache" "$DEBS" "$APTDIR" \
    "$CACHE/image-work" "$CACHE/openapi-gen" "$CACHE/openapi-packages.txt" "$CACHE/go-bindata"
  rm -f "$STAMPS/unpack" "$STAMPS/patch" "$STAMPS/openapi"
  log "pruned the source, Go cache and downloads: $(du -sh "$CACHE" | cut -f1) left in $CACHE"
}

if built_from_source && upstream_built; then
  log "kubernetes $K8S_VERSION (Debian $DEB_VERSION) binaries and upstream tests are current"
else
  step_fetch
  step_unpack
  step_patch
  step_openapi
  step_build
  step_upstream_build
fi
step_images
step_upstream_images
step_etcd
write_versions
if [ "${1:-}" = --prune ]; then prune; fi
log "done in $(since "$START"); binaries in $BIN, images in $IMAGES"
echo "$BIN"
