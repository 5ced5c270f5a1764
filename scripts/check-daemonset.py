#!/usr/bin/env python3
"""check-daemonset.py: the privileges of Sarena's DaemonSet, read from its
manifest (deploy/kubernetes/20-daemonset.yaml). Run by scripts/test.sh; the
running pods are checked by e2e/k8s/test-k8s-deploy.sh, which takes the
capability mask from here (--cap-mask).

Asserted, per container (`sarena`, the daemon; `install-cni`, the init
container):
- nothing privileged; capabilities: drop [ALL], add exactly CAPS below
  (the daemon) or nothing (the init container); allowPrivilegeEscalation
  false; readOnlyRootFilesystem true; seccomp RuntimeDefault (the
  container's, else the pod's); no hostPID, hostIPC;
- the API token: automountServiceAccountToken false on the pod, the
  projected token + CA + namespace mounted in the daemon container only, at
  the path kube-rs reads;
- the daemon's memory request and limit, its CPU request;
- the sysctl directory: the host's /proc/sys/net mounted read-write at
  DIR/net, DIR passed as --sysctl-dir.

Usage: scripts/check-daemonset.py [MANIFEST]      exit 1 listing every failure
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
TOKEN_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
DEFAULT = Path(__file__).resolve().parent.parent / "deploy/kubernetes/20-daemonset.yaml"


def cap_mask():
    """CapEff of the daemon: 16 hex digits."""
    mask = 0
    for bit in CAPS.values():
        mask |= 1 << bit
    return f"{mask:016x}"


def check(doc):
    """Every failure of the DaemonSet `doc`, as sentences."""
    failures = []

    def expect(ok, what):
        if not ok:
            failures.append(what)

    pod = doc["spec"]["template"]["spec"]
    containers = {c["name"]: c for c in pod.get("initContainers", []) + pod["containers"]}
    expect(set(containers) == {DAEMON, INIT}, f"containers are {sorted(containers)}, not {DAEMON} and {INIT}")
    expect(pod.get("hostNetwork") is True, "the pod is not hostNetwork")
    expect(not pod.get("hostPID") and not pod.get("hostIPC"), "the pod shares the host's PID or IPC namespace")
    expect(pod.get("automountServiceAccountToken") is False, "automountServiceAccountToken is not false on the pod")
    pod_seccomp = (pod.get("securityContext") or {}).get("seccompProfile") or {}

    for name, c in containers.items():
        sc = c.get("securityContext") or {}
        caps = sc.get("capabilities") or {}
        want_add = sorted(CAPS) if name == DAEMON else []
        expect(not sc.get("privileged"), f"{name}: privileged")
        expect(caps.get("drop") == ["ALL"], f"{name}: capabilities.drop is {caps.get('drop')}, not [ALL]")
        expect(sorted(caps.get("add") or []) == want_add, f"{name}: capabilities.add is {caps.get('add')}, not {want_add}")
        expect(sc.get("allowPrivilegeEscalation") is False, f"{name}: allowPrivilegeEscalation is not false")
        expect(sc.get("readOnlyRootFilesystem") is True, f"{name}: readOnlyRootFilesystem is not true")
        seccomp = sc.get("seccompProfile") or pod_seccomp
        expect(seccomp.get("type") == "RuntimeDefault", f"{name}: seccomp profile is {seccomp or 'none'}, not RuntimeDefault")
        token_mounts = [m for m in c.get("volumeMounts", []) if m["mountPath"].rstrip("/") == TOKEN_DIR]
        if name == DAEMON:
            expect(len(token_mounts) == 1 and token_mounts[0].get("readOnly") is True,
                   f"{name}: no read-only volume at {TOKEN_DIR}")
        else:
            expect(not token_mounts, f"{name}: a volume at {TOKEN_DIR}")

    daemon = containers.get(DAEMON, {})
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    resources = daemon.get("resources") or {}
    requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
    expect("memory" in requests and "cpu" in requests, f"{DAEMON}: no memory and CPU requests")
    expect("memory" in limits, f"{DAEMON}: no memory limit")

    token_mount = next((m for m in daemon.get("volumeMounts", []) if m["mountPath"].rstrip("/") == TOKEN_DIR), None)
    sources = (volumes.get(token_mount["name"], {}) if token_mount else {}).get("projected", {}).get("sources", [])
    kinds = sorted(k for s in sources for k in s)
    expect(kinds == ["configMap", "downwardAPI", "serviceAccountToken"],
           f"{DAEMON}: the volume at {TOKEN_DIR} is not a projected token + CA + namespace ({kinds})")

    args = daemon.get("args", [])
    sysctl_dirs = [a.split("=", 1)[1] for a in args if a.startswith("--sysctl-dir=")]
    expect(len(sysctl_dirs) == 1, f"{DAEMON}: no --sysctl-dir=DIR argument")
    if sysctl_dirs:
        net = sysctl_dirs[0].rstrip("/") + "/net"
        mount = next((m for m in daemon.get("volumeMounts", []) if m["mountPath"].rstrip("/") == net), None)
        host = (volumes.get(mount["name"], {}) if mount else {}).get("hostPath", {}).get("path")
        expect(host == "/proc/sys/net" and not mount.get("readOnly"),
               f"{DAEMON}: the host's /proc/sys/net is not mounted read-write at {net}")
    return failures


def main(argv):
    if argv[1:] == ["--cap-mask"]:
        print(cap_mask())
        return 0
    path = Path(argv[1]) if len(argv) > 1 else DEFAULT
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d and d.get("kind") == "DaemonSet"]
    if len(docs) != 1:
        print(f"{path}: {len(docs)} DaemonSets, not 1", file=sys.stderr)
        return 1
    failures = check(docs[0])
    for f in failures:
        print(f"{path}: {f}", file=sys.stderr)
    if failures:
        return 1
    print(f"{path}: privileges as expected (capabilities {', '.join(sorted(CAPS))})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
