# shellcheck shell=bash
# Sourced by the set-up scripts: ensure_packages PKG... installs whichever of
# the Debian packages are missing (apt-get update first, waiting for the apt
# lock). Requires a `log` function.
ensure_packages() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep "install ok installed" >/dev/null || missing+=("$p")
  done
  [ "${#missing[@]}" -gt 0 ] || return 0
  log "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get -o DPkg::Lock::Timeout=600 update -qq
  apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}
