#!/usr/bin/env bash
# bump-version.sh: one version everywhere. Sets the workspace's version
# ([workspace.package] version in Cargo.toml: every crate's, `sarena-daemon
# --version`, build-image.sh's default tag), rewrites every
# sarena.local/sarena:<version> tag in the files
# sarena-daemon/tests/image_tag.rs checks (deploy/ manifests and Dockerfile,
# README.md, docs/*.md, scripts/*.sh, e2e/**/*.sh), then brings Cargo.lock
# along (`cargo update -w --offline`: no network).
# Usage: scripts/bump-version.sh X.Y.Z[-PRE]
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
die() {
  printf '[bump-version] ERROR: %s\n' "$*" >&2
  exit 1
}

[ $# = 1 ] || die "usage: scripts/bump-version.sh X.Y.Z"
NEW=$1
[[ $NEW =~ ^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] || die "'$NEW' is not a version X.Y.Z[-PRE]"
cd "$REPO"

# the version line of the [workspace.package] section only
OLD=$(awk '/^\[/ {s = ($0 == "[workspace.package]")} s && /^version *=/ {gsub(/[" ]/, "", $0); sub(/version=/, ""); print; exit}' Cargo.toml)
[ -n "$OLD" ] || die "no version in Cargo.toml's [workspace.package]"
awk -v v="$NEW" '
  /^\[/ {s = ($0 == "[workspace.package]")}
  s && /^version *=/ && !done {print "version = \"" v "\""; done = 1; next}
  {print}' Cargo.toml >Cargo.toml.bump
mv Cargo.toml.bump Cargo.toml

# every tag that is a version (placeholders such as :VERSION or :$VERSION stay)
mapfile -t FILES < <({
  find deploy -type f \( -name '*.yaml' -o -name '*.yml' -o -name 'Dockerfile*' \)
  echo README.md
  find docs scripts -maxdepth 1 -type f \( -name '*.md' -o -name '*.sh' \)
  find e2e -type f -name '*.sh'
} | sort -u)
changed=0
for f in "${FILES[@]}"; do
  grep -q 'sarena\.local/sarena:[0-9]' "$f" || continue
  sed -E -i 's#sarena\.local/sarena:[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]*[0-9A-Za-z])?#sarena.local/sarena:'"$NEW"'#g' "$f"
  printf '  %s\n' "$f" >&2
  changed=$((changed + 1))
done

cargo update -w --offline >&2
printf '[bump-version] %s -> %s: Cargo.toml, Cargo.lock and the tags in %d files\n' "$OLD" "$NEW" "$changed" >&2
