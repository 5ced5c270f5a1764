#!/usr/bin/env python3
"""check-daemonset.py: the privileges of Sarena's DaemonSet, read from its
manifest (deploy/kubernetes/20-daemonset.yaml), and of its uninstall
variant (deploy/kubernetes/uninstall/20-daemonset.yaml, the same DaemonSet
whose pod runs `sarena-daemon --uninstall`). Run by scripts/test.sh; the
running pods are checked by e2e/k8s/test-k8s-deploy.sh, which takes the
capability mask from here (--cap-mask).

Asserted, per container (`sarena`, the daemon; `install-cni`, the init
container; `sarena-uninstall`, the uninstall's only container):
- nothing privileged; capabilities: drop [ALL], add exactly CAPS below
  (the daemon, the uninstall) or nothing (the init container);
  allowPrivilegeEscalation false; readOnlyRootFilesystem true; seccomp
  RuntimeDefault (the container's, else the pod's); no hostPID, hostIPC;
- the API token: automountServiceAccountToken false on the pod, the
  projected token + CA + namespace mounted in the daemon (uninstall)
  container only, at the path kube-rs reads;
- the memory request and limit, the CPU request;
- the sysctl directory: the host's /proc/sys/net mounted read-write at
  DIR/net, DIR passed as --sysctl-dir.
The uninstall, against the daemon's manifest:
- the same name, namespace, selector, pod labels, service account and image;
  tolerations exactly [{operator: Exists}]; no init container;
  maxUnavailable "100%";
- `--uninstall --keep-running --clean-marker=FILE --kubernetes`; FILE on an
  emptyDir; a readiness probe `test -e FILE`;
- the same path arguments: --config (the same ConfigMap, optional: true),
  --write-cni-conf, --bpf-pin-dir, --sysctl-dir, --socket, --state-dir, and
  --cni-bin-dir equal to the init container's: each resolved through the
  container's hostPath mounts to the same host path (a default, the
  daemon's, when not given);
- its hostPath mounts are the daemon's, minus DROPPED, plus EXTRA (both
  listed below, with why); the parents in EXTRA are of type Directory
  (never created) and HostToContainer.

Usage: scripts/check-daemonset.py                  both shipped manifests
       scripts/check-daemonset.py DAEMON [UNINSTALL]  exit 1 listing every failure
       scripts/check-daemonset.py --cap-mask       the daemon's CapEff, as
                                                   /proc/PID/status prints it
"""
import sys
from pathlib import Path

import yaml

# The daemon's capabilities (why each: the manifest's header), with their
# numbers from linux/capability.h.
CAPS = {"NET_ADMIN": 12, "SYS_ADMIN": 21}
DAEMON = "sarena"
INIT = "install-cni"
UNINSTALL = "sarena-uninstall"
TOKEN_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
DEPLOY = Path(__file__).resolve().parent.parent / "deploy/kubernetes"
DEFAULT = DEPLOY / "20-daemonset.yaml"
DEFAULT_UNINSTALL = DEPLOY / "uninstall/20-daemonset.yaml"
# sarena-daemon's defaults (sarena_plugin::api::client::DEFAULT_SOCKET,
# sarena-daemon's cli::DEFAULT_STATE_DIR) for the path arguments not given.
DAEMON_DEFAULTS = {"--socket": "/run/sarena/sarena.sock", "--state-dir": "/var/lib/sarena"}
# The path arguments the uninstall must resolve to the same host paths as
# the daemon's (--config is compared by its ConfigMap).
PATH_ARGS = ["--write-cni-conf", "--bpf-pin-dir", "--sysctl-dir", "--socket", "--state-dir"]
# Host paths the daemon container mounts and the uninstall does not:
# /run/sarena and /var/lib/sarena are reached through their parents (EXTRA),
# so that they can be removed (a mount point cannot be, from inside) and are
# never re-created by a DirectoryOrCreate volume; the pods' netns files are
# not needed (an interface's pod side goes with its host side).
DROPPED = {"/run/sarena", "/var/lib/sarena", "/var/run/netns"}
# Host path -> mount path of the uninstall's own hostPath mounts: the parents
# above, the plugin's directory (the init container's, in the daemon's pod)
# and the plugin's log directory.
EXTRA = {"/run": "/host/run", "/var/lib": "/host/var/lib", "/opt/cni/bin": "/opt/cni/bin", "/var/log": "/var/log"}
PARENTS = {"/run", "/var/lib"}


def cap_mask():
    """CapEff of the daemon: 16 hex digits."""
    mask = 0
    for bit in CAPS.values():
        mask |= 1 << bit
    return f"{mask:016x}"


def check(doc, main=DAEMON, others=(INIT,)):
    """Every failure of the DaemonSet `doc`, as sentences: `main` is the
    container holding the capabilities and the token, `others` the rest."""
    failures = []

    def expect(ok, what):
        if not ok:
            failures.append(what)

    pod = doc["spec"]["template"]["spec"]
    containers = {c["name"]: c for c in pod.get("initContainers", []) + pod["containers"]}
    want = {main, *others}
    expect(set(containers) == want, f"containers are {sorted(containers)}, not {sorted(want)}")
    expect(pod.get("hostNetwork") is True, "the pod is not hostNetwork")
    expect(not pod.get("hostPID") and not pod.get("hostIPC"), "the pod shares the host's PID or IPC namespace")
    expect(pod.get("automountServiceAccountToken") is False, "automountServiceAccountToken is not false on the pod")
    pod_seccomp = (pod.get("securityContext") or {}).get("seccompProfile") or {}

    for name, c in containers.items():
        sc = c.get("securityContext") or {}
        caps = sc.get("capabilities") or {}
        want_add = sorted(CAPS) if name == main else []
        expect(not sc.get("privileged"), f"{name}: privileged")
        expect(caps.get("drop") == ["ALL"], f"{name}: capabilities.drop is {caps.get('drop')}, not [ALL]")
        expect(sorted(caps.get("add") or []) == want_add, f"{name}: capabilities.add is {caps.get('add')}, not {want_add}")
        expect(sc.get("allowPrivilegeEscalation") is False, f"{name}: allowPrivilegeEscalation is not false")
        expect(sc.get("readOnlyRootFilesystem") is True, f"{name}: readOnlyRootFilesystem is not true")
        seccomp = sc.get("seccompProfile") or pod_seccomp
        expect(seccomp.get("type") == "RuntimeDefault", f"{name}: seccomp profile is {seccomp or 'none'}, not RuntimeDefault")
        token_mounts = [m for m in c.get("volumeMounts", []) if m["mountPath"].rstrip("/") == TOKEN_DIR]
        if name == main:
            expect(len(token_mounts) == 1 and token_mounts[0].get("readOnly") is True,
                   f"{name}: no read-only volume at {TOKEN_DIR}")
        else:
            expect(not token_mounts, f"{name}: a volume at {TOKEN_DIR}")

    daemon = containers.get(main, {})
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    resources = daemon.get("resources") or {}
    requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
    expect("memory" in requests and "cpu" in requests, f"{main}: no memory and CPU requests")
    expect("memory" in limits, f"{main}: no memory limit")

    token_mount = next((m for m in daemon.get("volumeMounts", []) if m["mountPath"].rstrip("/") == TOKEN_DIR), None)
    sources = (volumes.get(token_mount["name"], {}) if token_mount else {}).get("projected", {}).get("sources", [])
    kinds = sorted(k for s in sources for k in s)
    expect(kinds == ["configMap", "downwardAPI", "serviceAccountToken"],
           f"{main}: the volume at {TOKEN_DIR} is not a projected token + CA + namespace ({kinds})")

    args = daemon.get("args", [])
    sysctl_dirs = [a.split("=", 1)[1] for a in args if a.startswith("--sysctl-dir=")]
    expect(len(sysctl_dirs) == 1, f"{main}: no --sysctl-dir=DIR argument")
    if sysctl_dirs:
        net = sysctl_dirs[0].rstrip("/") + "/net"
        mount = next((m for m in daemon.get("volumeMounts", []) if m["mountPath"].rstrip("/") == net), None)
        host = (volumes.get(mount["name"], {}) if mount else {}).get("hostPath", {}).get("path")
        expect(host == "/proc/sys/net" and not mount.get("readOnly"),
               f"{main}: the host's /proc/sys/net is not mounted read-write at {net}")
    return failures

def host_path(pod, container, path):
    """The host path `path` in `container` is, through the container's
    hostPath mounts (the deepest mount holding it); None when it is on no
    hostPath volume."""
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    best = None
    for m in container.get("volumeMounts", []):
        mp = m["mountPath"].rstrip("/") or "/"
        host = volumes.get(m["name"], {}).get("hostPath", {}).get("path")
        if host is None or not (path == mp or path.startswith(mp + "/")):
            continue
        if best is None or len(mp) > len(best[0]):
            best = (mp, host.rstrip("/") + path[len(mp):])
    return best[1] if best else None


def arg_values(container):
    """`--flag=value` and `--flag value` arguments of `container`, as a dict
    (the last one wins); flags without a value map to True."""
    args = list(container.get("command", [])[1:]) + list(container.get("args", []))
    out = {}
    i = 0
    while i < len(args):
        a = args[i]
        if a.startswith("--") and "=" in a:
            k, v = a.split("=", 1)
            out[k] = v
        elif a.startswith("--") and i + 1 < len(args) and not args[i + 1].startswith("--"):
            out[a] = args[i + 1]
            i += 1
        elif a.startswith("--"):
            out[a] = True
        i += 1
    return out


def host_mounts(pod, container):
    """host path -> (mount path, volume, mount) of `container`'s hostPath mounts."""
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    out = {}
    for m in container.get("volumeMounts", []):
        hp = volumes.get(m["name"], {}).get("hostPath")
        if hp:
            out[hp["path"].rstrip("/")] = (m["mountPath"].rstrip("/"), volumes[m["name"]], m)
    return out


def check_uninstall(doc, daemon_doc):
    """Every failure of the uninstall DaemonSet `doc` against the daemon's
    `daemon_doc`: its own privileges (check) and its agreement with the
    daemon's (the module's docstring)."""
    failures = check(doc, main=UNINSTALL, others=())

    def expect(ok, what):
        if not ok:
            failures.append(what)

    for key in ("name", "namespace"):
        expect(doc["metadata"].get(key) == daemon_doc["metadata"].get(key),
               f"metadata.{key} is {doc['metadata'].get(key)}, the daemon's is {daemon_doc['metadata'].get(key)}")
    spec, dspec = doc["spec"], daemon_doc["spec"]
    expect(spec.get("selector") == dspec.get("selector"), f"selector {spec.get('selector')} is not the daemon's")
    tmpl, dtmpl = spec["template"], dspec["template"]
    expect(tmpl["metadata"].get("labels") == dtmpl["metadata"].get("labels"), "the pod labels are not the daemon's")
    pod, dpod = tmpl["spec"], dtmpl["spec"]
    expect(pod.get("serviceAccountName") == dpod.get("serviceAccountName"),
           f"serviceAccountName {pod.get('serviceAccountName')} is not the daemon's {dpod.get('serviceAccountName')}")
    expect(pod.get("tolerations") == [{"operator": "Exists"}],
           f"tolerations are {pod.get('tolerations')}, not [{{operator: Exists}}]")
    expect(not pod.get("initContainers"), "an init container")
    rolling = (spec.get("updateStrategy") or {}).get("rollingUpdate") or {}
    expect(str(rolling.get("maxUnavailable")) == "100%",
           f"rollingUpdate.maxUnavailable is {rolling.get('maxUnavailable')}, not \"100%\"")

    dcontainers = {c["name"]: c for c in dpod.get("initContainers", []) + dpod["containers"]}
    daemon, init = dcontainers.get(DAEMON, {}), dcontainers.get(INIT, {})
    un = next((c for c in pod["containers"] if c["name"] == UNINSTALL), {})
    expect(un.get("image") == daemon.get("image"), f"image {un.get('image')} is not the daemon's {daemon.get('image')}")
    expect(un.get("command") == daemon.get("command"),
           f"command {un.get('command')} is not the daemon's {daemon.get('command')}")

    args, dargs, iargs = arg_values(un), arg_values(daemon), arg_values(init)
    for flag in ("--uninstall", "--keep-running", "--kubernetes"):
        expect(args.get(flag) is True, f"{UNINSTALL}: no {flag}")
    marker = args.get("--clean-marker")
    expect(isinstance(marker, str), f"{UNINSTALL}: no --clean-marker=FILE")
    if isinstance(marker, str):
        volumes = {v["name"]: v for v in pod.get("volumes", [])}
        on = [m for m in un.get("volumeMounts", []) if marker.startswith(m["mountPath"].rstrip("/") + "/")]
        expect(any("emptyDir" in volumes.get(m["name"], {}) for m in on),
               f"{UNINSTALL}: the clean marker {marker} is not on an emptyDir")
        probe = ((un.get("readinessProbe") or {}).get("exec") or {}).get("command")
        expect(probe in (["/usr/bin/test", "-e", marker], ["test", "-e", marker]),
               f"{UNINSTALL}: the readiness probe is {probe}, not test -e {marker}")

    # --config: the same file name in the same ConfigMap, mounted optional
    def config_source(p, c, a):
        path = a.get("--config")
        if not isinstance(path, str):
            return None, None
        volumes = {v["name"]: v for v in p.get("volumes", [])}
        m = next((m for m in c.get("volumeMounts", []) if path.startswith(m["mountPath"].rstrip("/") + "/")), None)
        cm = volumes.get(m["name"], {}).get("configMap") if m else None
        return (cm or {}).get("name"), path[len(m["mountPath"].rstrip("/")):] if m else None, cm

    want = config_source(dpod, daemon, dargs)
    got = config_source(pod, un, args)
    expect(want[:2] == got[:2], f"{UNINSTALL}: --config is {got[:2]} (ConfigMap, file), the daemon's {want[:2]}")
    expect(len(got) == 3 and (got[2] or {}).get("optional") is True,
           f"{UNINSTALL}: the ConfigMap of --config is not mounted optional: true")

    # the path arguments: the same host paths
    for flag in PATH_ARGS:
        d, u = dargs.get(flag, DAEMON_DEFAULTS.get(flag)), args.get(flag, DAEMON_DEFAULTS.get(flag))
        if not isinstance(d, str) or not isinstance(u, str):
            expect(d == u, f"{UNINSTALL}: {flag} is {u}, the daemon's {d}")
            continue
        dh, uh = host_path(dpod, daemon, d), host_path(pod, un, u)
        if flag == "--sysctl-dir":  # only its net/ is mounted
            dh, uh = host_path(dpod, daemon, d + "/net"), host_path(pod, un, u + "/net")
        expect(dh is not None and dh == uh,
               f"{UNINSTALL}: {flag}={u} is the host's {uh}, the daemon's {flag}={d} is the host's {dh}")
    d, u = iargs.get("--cni-bin-dir"), args.get("--cni-bin-dir")
    dh = host_path(dpod, init, d) if isinstance(d, str) else None
    uh = host_path(pod, un, u) if isinstance(u, str) else None
    expect(dh is not None and dh == uh,
           f"{UNINSTALL}: --cni-bin-dir={u} is the host's {uh}, {INIT}'s --cni-bin-dir={d} the host's {dh}")

    # the hostPath mounts: the daemon's, minus DROPPED, plus EXTRA
    mine, theirs = host_mounts(pod, un), host_mounts(dpod, daemon)
    want_paths = {h: mp for h, (mp, _, _) in theirs.items() if h not in DROPPED} | EXTRA
    got_paths = {h: mp for h, (mp, _, _) in mine.items()}
    expect(got_paths == want_paths,
           f"{UNINSTALL}: hostPath mounts (host -> container) {sorted(got_paths.items())}, "
           f"wanted the daemon's minus {sorted(DROPPED)} plus {sorted(EXTRA.items())}: {sorted(want_paths.items())}")
    for h in PARENTS:
        if h in mine:
            _, vol, m = mine[h]
            expect(vol["hostPath"].get("type") == "Directory",
                   f"{UNINSTALL}: the host's {h} is mounted with type {vol['hostPath'].get('type')}, not Directory")
            expect(m.get("mountPropagation") == "HostToContainer",
                   f"{UNINSTALL}: the host's {h} is not mounted HostToContainer")
    for h in DROPPED & {"/run/sarena", "/var/lib/sarena"}:
        expect(h not in mine, f"{UNINSTALL}: the host's {h} is mounted itself (it could not be removed)")
    return failures


def load(path):
    """The one DaemonSet of the manifest at `path` (None after printing why)."""
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d and d.get("kind") == "DaemonSet"]
    if len(docs) != 1:
        print(f"{path}: {len(docs)} DaemonSets, not 1", file=sys.stderr)
        return None
    return docs[0]


def main(argv):
    if argv[1:] == ["--cap-mask"]:
        print(cap_mask())
        return 0
    if len(argv) > 1:
        path, upath = Path(argv[1]), (Path(argv[2]) if len(argv) > 2 else None)
    else:
        path, upath = DEFAULT, DEFAULT_UNINSTALL
    doc = load(path)
    if doc is None:
        return 1
    failed = False
    checks = [(path, check(doc))]
    if upath is not None:
        udoc = load(upath)
        if udoc is None:
            return 1
        checks.append((upath, check_uninstall(udoc, doc)))
    for p, failures in checks:
        for f in failures:
            print(f"{p}: {f}", file=sys.stderr)
        if failures:
            failed = True
        else:
            print(f"{p}: privileges as expected (capabilities {', '.join(sorted(CAPS))})"
                  + (", agrees with the daemon's" if p != path else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
