#!/usr/bin/env python3
"""Helpers of e2e/k8s/bench-node-scale.sh (python3 stdlib only).

  level --kubeconfig K --to N --nodes NAME=NETNS... --underlay PREFIX
        --routing native|vxlan --samples S --out FILE [--workers W]
      Run in the control-plane netns. Grows the cluster's "ghost" Node
      objects (no kubelet) to N, created in parallel with a kubelet's
      status (addresses, capacity, conditions, node info, 30 images); one
      thread watches the Node objects through the API server (the time a
      podCIDR is first seen, and a deletion), one per real node follows
      `ip -ts monitor route` in its netns. Measures:
        grow:   for every new ghost, podCIDR seen -> its route on each real
                node; the time until every real node routes every ghost;
        exact:  each real node's Sarena routes (proto 91) are exactly the
                peers' podCIDRs via their InternalIPs (native) or via the
                overlay (vxlan: plus one FDB entry per peer);
        probes: S times, one at a time: one more ghost created (podCIDR seen
                -> route on every real node) then deleted (deletion seen ->
                route gone on every real node).
      Writes the level's JSON to FILE; fails when a node is not exact or a
      route never came.
  steady --kubeconfig K --pids NAME=PID... --nodes NAME=NETNS... --seconds W
         --heartbeats R [--idle-seconds I] [--quiet-seconds Q] --out FILE
      Once no Node object changed for Q seconds (5; the controller-manager
      updates new Nodes for a while), I seconds (10) with nothing happening:
      each daemon's CPU (its floor) and the bytes reaching it;
      then W seconds while every ghost's status is patched R times a second
      in all (a kubelet's heartbeat: the conditions' lastHeartbeatTime):
      each daemon's CPU (utime + stime) and VmRSS / VmHWM, and the bytes
      and packets of each real node's eth0 (only the daemon talks on it).
  pods --kubeconfig K --count M --pids NAME=PID... --out FILE
      M Pod objects in 20 namespaces, bound round-robin to the ghosts, each
      Running at an address of its ghost's podCIDR (status subresource),
      tolerating the ghosts' taints forever; then the time until both
      daemons settle (under 3 % of a CPU over 3 s: the policy watch holds
      every pod), their VmRSS / VmHWM and idle CPU.
  join --socket S --netns NS --routes N --t0 EPOCH --out FILE
      After a daemon was started at EPOCH (seconds): the time until its
      health says ready and until its netns holds N Sarena routes.
The run's JSON (bench-node-scale.sh --json) is rendered by
`sarena-bench report` (benches/src/report/k8s_scale.rs).
"""

import argparse
import concurrent.futures
import json
import random
import re
import subprocess
import sys
import threading
import time

from kapi import Api, UnixHTTPConnection, pct

GHOST_TAINT = {"key": "sarena.bench/ghost", "effect": "NoSchedule"}


def ghost_name(g):
    return f"ghost-{g:04d}"


def ghost_ip(underlay, g):
    """The ghost's InternalIP in UNDERLAY (a /20 as 'a.b' + third octet base)."""
    n = g + 1
    return f"{underlay}.{n // 250}.{n % 250 + 1}"


def stamp():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def ghost_obj(name, ip, g):
    """A Node as a kubelet registers it: the same fields, the same size."""
    images = [{"names": [f"registry.example/team-{i % 7}/app-{i}@sha256:{(g * 131 + i):064x}",
                         f"registry.example/team-{i % 7}/app-{i}:v1.{i}.{g % 10}"],
               "sizeBytes": 10_000_000 + i * 1_234_567} for i in range(30)]
    conditions = [{"type": t, "status": s, "reason": r, "message": m,
                   "lastHeartbeatTime": stamp(), "lastTransitionTime": stamp()}
                  for t, s, r, m in [
                      ("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
                      ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                      ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available")]]
    resources = {"cpu": "8", "memory": "32856012Ki", "pods": "110", "ephemeral-storage": "101445540Ki",
                 "hugepages-1Gi": "0", "hugepages-2Mi": "0"}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name,
                         "labels": {"sarena.bench/ghost": "yes", "kubernetes.io/hostname": name,
                                    "kubernetes.io/arch": "amd64", "beta.kubernetes.io/arch": "amd64",
                                    "node.kubernetes.io/instance-type": "m5.2xlarge",
                                    "topology.kubernetes.io/zone": f"zone-{g % 3}"},
                         "annotations": {"node.alpha.kubernetes.io/ttl": "0",
                                         "volumes.kubernetes.io/controller-managed-attach-detach": "true"}},
            "spec": {"unschedulable": True, "taints": [GHOST_TAINT]},
            # a Node's status is kept on create
            "status": {"addresses": [{"type": "InternalIP", "address": ip},
                                     {"type": "Hostname", "address": name}],
                       "capacity": resources, "allocatable": resources, "conditions": conditions,
                       "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                       "nodeInfo": {"machineID": f"{g:032x}", "systemUUID": f"{g:08x}-0000-0000-0000-000000000000",
                                    "bootID": f"{g:08x}-1111-1111-1111-111111111111",
                                    "kernelVersion": "6.1.0-13-amd64", "osImage": "Debian GNU/Linux 12 (bookworm)",
                                    "containerRuntimeVersion": "containerd://1.6.20",
                                    "kubeletVersion": "v1.20.2", "kubeProxyVersion": "v1.20.2",
                                    "operatingSystem": "linux", "architecture": "amd64"},
                       "images": images}}


# --- observing: the Node objects and the real nodes' routes -------------------------


class Observer:
    """Times (epoch seconds) of what the API server and the kernels said."""

    def __init__(self, api, nodes):
        self.api = api
        self.nodes = nodes  # name -> netns
        self.lock = threading.Lock()
        self.cond = threading.Condition(self.lock)
        self.cidr_seen = {}  # node name -> (podCIDR, t)
        self.ips = {}  # node name -> InternalIP
        self.gone = {}  # node name -> t
        self.route_add = {n: {} for n in nodes}  # real node -> dst -> t (last add)
        self.route_del = {n: {} for n in nodes}  # real node -> dst -> t (last delete)
        self.procs = []
        self.errors = []

    def start(self):
        status, body = self.api.request("GET", "/api/v1/nodes")
        if status != 200:
            raise RuntimeError(f"list nodes: {status}")
        now = time.time()
        for n in body["items"]:
            self._node(n, now)
        threading.Thread(target=self._watch, args=(body["metadata"]["resourceVersion"],), daemon=True).start()
        for name, ns in self.nodes.items():
            p = subprocess.Popen(["nsenter", f"--net=/run/netns/{ns}", "ip", "-ts", "monitor", "route"],
                                 stdout=subprocess.PIPE, text=True)
            self.procs.append(p)
            threading.Thread(target=self._routes, args=(name, p), daemon=True).start()
        time.sleep(0.3)  # the monitors are listening

    def stop(self):
        for p in self.procs:
            p.terminate()

    def _node(self, n, t):
        name = n["metadata"]["name"]
        cidr = n.get("spec", {}).get("podCIDR")
        ips = [a["address"] for a in n.get("status", {}).get("addresses", []) if a["type"] == "InternalIP"]
        with self.cond:
            if ips:
                self.ips[name] = ips[0]
            if cidr and self.cidr_seen.get(name, (None,))[0] != cidr:
                self.cidr_seen[name] = (cidr, t)
                self.cond.notify_all()

    def _watch(self, rv):
        while True:
            try:
                for kind, obj in self.api.watch("/api/v1/nodes", rv):
                    t = time.time()
                    if kind == "ERROR":
                        raise RuntimeError(f"watch error: {obj}")
                    rv = obj["metadata"]["resourceVersion"]
                    if kind == "DELETED":
                        with self.cond:
                            name = obj["metadata"]["name"]
                            self.gone[name] = t
                            self.cidr_seen.pop(name, None)
                            self.cond.notify_all()
                    else:
                        self._node(obj, t)
            except Exception as e:  # noqa: BLE001 - a broken watch is re-listed
                self.errors.append(str(e))
                status, body = self.api.request("GET", "/api/v1/nodes")
                rv = body["metadata"]["resourceVersion"]
                now = time.time()
                for n in body["items"]:
                    self._node(n, now)

    LINE = re.compile(r"^\[(\S+)\] (Deleted )?(\S+) .*proto 91")

    def _routes(self, name, proc):
        for line in proc.stdout:
            m = self.LINE.match(line)
            if not m:
                continue
            ts, deleted, dst = m.groups()
            t = parse_ts(ts)
            with self.cond:
                (self.route_del if deleted else self.route_add)[name][dst] = t
                self.cond.notify_all()

    def wait(self, pred, timeout):
        with self.cond:
            return self.cond.wait_for(pred, timeout)


def parse_ts(ts):
    """ip -ts's local time with microseconds -> epoch seconds."""
    base, _, frac = ts.partition(".")
    return time.mktime(time.strptime(base, "%Y-%m-%dT%H:%M:%S")) + float("0." + (frac or "0"))


def ms(a, b):
    return round((b - a) * 1000, 1)


# --- the kernel's state ----------------------------------------------------------------


def in_ns(ns, *cmd):
    return subprocess.run(["nsenter", f"--net=/run/netns/{ns}", *cmd], check=True,
                          capture_output=True, text=True).stdout


def sarena_routes(ns):
    """dst -> (gateway, dev) of the netns's Sarena routes (proto 91)."""
    routes = json.loads(in_ns(ns, "ip", "-j", "-4", "route", "show", "proto", "91") or "[]")
    return {r["dst"]: (r.get("gateway"), r.get("dev")) for r in routes}


def fdb_count(ns):
    out = in_ns(ns, "bridge", "-j", "fdb", "show", "dev", "sarena.vxlan")
    return len([e for e in json.loads(out or "[]") if e.get("dst")])


def exact(obs, real, routing):
    """Per real node: its routes equal the expected set ("" when so, else what differs)."""
    with obs.lock:
        peers = {n: (c, obs.ips.get(n)) for n, (c, _) in obs.cidr_seen.items()}
    verdict = {}
    for name, ns in real.items():
        want = {}
        for peer, (cidr, ip) in peers.items():
            if peer == name:
                continue
            want[cidr] = (ip, "eth0") if routing == "native" else (cidr.split("/")[0], "sarena.vxlan")
        have = sarena_routes(ns)
        missing = sorted(set(want) - set(have))
        extra = sorted(set(have) - set(want))
        wrong = sorted(d for d in set(want) & set(have) if want[d] != have[d])
        problems = []
        if missing:
            problems.append(f"{len(missing)} missing (e.g. {missing[0]})")
        if extra:
            problems.append(f"{len(extra)} extra (e.g. {extra[0]})")
        if wrong:
            problems.append(f"{len(wrong)} wrong (e.g. {wrong[0]}: {have[wrong[0]]} not {want[wrong[0]]})")
        if routing == "vxlan":
            fdb = fdb_count(ns)
            if fdb != len(want):
                problems.append(f"{fdb} FDB entries for {len(want)} peers")
        verdict[name] = {"routes": len(have), "expected": len(want), "problems": "; ".join(problems)}
    return verdict


# --- the commands -----------------------------------------------------------------------


def create_ghosts(api, names, underlay, workers):
    def one(item):
        g, name = item
        api.create("/api/v1/nodes", ghost_obj(name, ghost_ip(underlay, g), g))

    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        list(pool.map(one, names))


def routed_everywhere(obs, real, names, since):
    """A predicate: every real node added a route to each of NAMES' podCIDRs after SINCE."""
    def pred():
        for n in names:
            seen = obs.cidr_seen.get(n)
            if seen is None:
                return False
            if any(obs.route_add[r].get(seen[0], 0) < since for r in real):
                return False
        return True

    return pred


def latencies(obs, real, names):
    """Per ghost: podCIDR seen -> route on each real node (ms), and the max."""
    out = []
    with obs.lock:
        for n in names:
            cidr, t0 = obs.cidr_seen[n]
            per = {r: ms(t0, obs.route_add[r][cidr]) for r in real if cidr in obs.route_add[r]}
            out.append({"node": n, "per_node_ms": per, "ms": max(per.values()) if per else None})
    return out


def summary(samples):
    vals = [s["ms"] for s in samples if s.get("ms") is not None]
    return {"n": len(vals), "p50_ms": pct(vals, 50), "p99_ms": pct(vals, 99),
            "max_ms": round(max(vals), 1) if vals else None}


def cmd_level(a):
    api = Api(a.kubeconfig)
    real = dict(kv.split("=", 1) for kv in a.nodes)
    obs = Observer(api, real)
    obs.start()
    try:
        status, body = api.request("GET", "/api/v1/nodes?labelSelector=sarena.bench%2Fghost%3Dyes")
        have = {n["metadata"]["name"] for n in body["items"]}
        todo = [(g, ghost_name(g)) for g in range(a.to) if ghost_name(g) not in have]
        result = {"nodes": a.to + len(real), "ghosts": a.to, "routing": a.routing, "new_ghosts": len(todo)}
        t0 = time.time()
        create_ghosts(api, todo, a.underlay, a.workers)
        result["create_s"] = round(time.time() - t0, 2)
        names = [n for _, n in todo]
        ok = obs.wait(routed_everywhere(obs, real, names, t0), a.timeout)
        result["converged_s"] = round(time.time() - t0, 2)
        if not ok:
            raise SystemExit(f"not every real node routes the {len(names)} new ghosts after {a.timeout} s")
        grow = latencies(obs, real, names)
        result["grow"] = summary(grow)
        result["grow_last_route_s"] = round(max(max(s["per_node_ms"].values()) for s in grow) / 1000, 2) if grow else 0
        time.sleep(1)
        result["exact"] = exact(obs, real, a.routing)
        probes_add, probes_del = [], []
        rng = random.Random(7)
        for s in range(a.samples):
            name, g = f"probe-{s:03d}", 1000 + s  # an address in the ghosts' /20
            since = time.time()
            api.create("/api/v1/nodes", ghost_obj(name, ghost_ip(a.underlay, g), g))
            if not obs.wait(routed_everywhere(obs, real, [name], since), 30):
                raise SystemExit(f"{name}: not routed everywhere after 30 s")
            probes_add += latencies(obs, real, [name])
            cidr = obs.cidr_seen[name][0]
            since = time.time()
            api.delete(f"/api/v1/nodes/{name}")
            if not obs.wait(lambda: obs.gone.get(name, 0) >= since and all(
                    obs.route_del[r].get(cidr, 0) >= since for r in real), 30):
                raise SystemExit(f"{name}: route to {cidr} not removed everywhere after 30 s")
            with obs.lock:
                per = {r: ms(obs.gone[name], obs.route_del[r][cidr]) for r in real}
            probes_del.append({"node": name, "per_node_ms": per, "ms": max(per.values())})
            time.sleep(rng.uniform(0.2, 0.5))
        result["probe_add"] = summary(probes_add)
        result["probe_delete"] = summary(probes_del)
        result["watch_errors"] = obs.errors
    finally:
        obs.stop()
    with open(a.out, "w") as f:
        json.dump(result, f, indent=1)
    bad = {n: v["problems"] for n, v in result["exact"].items() if v["problems"]}
    print(f"{result['nodes']} nodes: {json.dumps({k: v for k, v in result.items() if k != 'exact'})}", file=sys.stderr)
    if bad:
        raise SystemExit(f"routes not exact at {a.to} ghosts: {bad}")


def proc_cpu(pid):
    """utime + stime of PID in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100  # USER_HZ


def proc_mem(pid):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM"):
                out[k] = round(int(v.split()[0]) / 1024, 1)
    return out


def link_stats(ns):
    s = json.loads(in_ns(ns, "ip", "-j", "-s", "link", "show", "eth0"))[0]["stats64"]
    return {"rx_bytes": s["rx"]["bytes"], "tx_bytes": s["tx"]["bytes"],
            "rx_packets": s["rx"]["packets"], "tx_packets": s["tx"]["packets"]}


def nodes_quiet(api, rv, quiet, timeout=600):
    """Seconds until no Node changed for QUIET seconds (the controller-manager
    updates a thousand new Nodes for minutes: conditions, taints)."""
    last = [time.time()]

    def follow():
        for _ in api.watch("/api/v1/nodes", rv):
            last[0] = time.time()

    threading.Thread(target=follow, daemon=True).start()
    t0 = time.time()
    while time.time() - last[0] < quiet:
        if time.time() - t0 > timeout:
            raise SystemExit(f"the Node objects still change after {timeout} s")
        time.sleep(0.5)
    return round(time.time() - t0, 1)


def cmd_steady(a):
    api = Api(a.kubeconfig)
    pids = dict(kv.split("=", 1) for kv in a.pids)
    real = dict(kv.split("=", 1) for kv in a.nodes)
    status, body = api.request("GET", "/api/v1/nodes?labelSelector=sarena.bench%2Fghost%3Dyes")
    ghosts = [n["metadata"]["name"] for n in body["items"]]
    quiet_after = nodes_quiet(api, body["metadata"]["resourceVersion"], a.quiet_seconds)
    # first a window without heartbeats: the daemons' floor
    idle0 = {n: proc_cpu(p) for n, p in pids.items()}
    idle_net0 = {n: link_stats(ns) for n, ns in real.items()}
    time.sleep(a.idle_seconds)
    idle = {n: round((proc_cpu(p) - idle0[n]) / a.idle_seconds * 100, 2) if a.idle_seconds else None
            for n, p in pids.items()}
    idle_rx = {n: round((link_stats(ns)["rx_bytes"] - idle_net0[n]["rx_bytes"]) / a.idle_seconds)
               if a.idle_seconds else None for n, ns in real.items()}
    cpu0 = {n: proc_cpu(p) for n, p in pids.items()}
    net0 = {n: link_stats(ns) for n, ns in real.items()}
    t0 = time.time()
    beats = 0
    interval = 1 / a.heartbeats if a.heartbeats > 0 else None
    i = 0
    while time.time() - t0 < a.seconds:
        if interval is None or not ghosts:
            time.sleep(0.5)
            continue
        name = ghosts[i % len(ghosts)]
        i += 1
        patch = {"status": {"conditions": [{"type": "MemoryPressure", "lastHeartbeatTime": stamp()}]}}
        st, _ = api.request("PATCH", f"/api/v1/nodes/{name}/status", patch,
                            ctype="application/strategic-merge-patch+json")
        if st < 300:
            beats += 1
        time.sleep(max(0.0, t0 + i * interval - time.time()))
    secs = time.time() - t0
    out = {"seconds": round(secs, 1), "heartbeats_per_s": round(beats / secs, 1),
           "quiet_after_s": quiet_after, "daemons": {}}
    for n, p in pids.items():
        net1 = link_stats(real[n])
        out["daemons"][n] = {
            "cpu_percent": round((proc_cpu(p) - cpu0[n]) / secs * 100, 2), "idle_cpu_percent": idle[n],
            "idle_rx_bytes_per_s": idle_rx[n],
            **proc_mem(p),
            "rx_bytes_per_s": round((net1["rx_bytes"] - net0[n]["rx_bytes"]) / secs),
            "tx_bytes_per_s": round((net1["tx_bytes"] - net0[n]["tx_bytes"]) / secs),
            "packets_per_s": round((net1["rx_packets"] + net1["tx_packets"]
                                    - net0[n]["rx_packets"] - net0[n]["tx_packets"]) / secs, 1)}
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)
    print(f"steady: {json.dumps(out)}", file=sys.stderr)

POD_TOLERATIONS = [
    # no tolerationSeconds: never evicted from the kubelet-less nodes
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
    {"key": "sarena.bench/ghost", "operator": "Exists", "effect": "NoSchedule"},
]


def ghost_pod(i, node, ip, namespaces):
    """Pod i, bound to NODE, and its status (Running at IP, in NODE's podCIDR)."""
    ns = f"scale-{i % namespaces:02d}"
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": f"p-{i:05d}", "namespace": ns,
                        "labels": {"app": f"app-{i % 40}", "tier": ["web", "api", "db"][i % 3]}},
           "spec": {"nodeName": node, "tolerations": POD_TOLERATIONS,
                    "automountServiceAccountToken": False, "enableServiceLinks": False,
                    "terminationGracePeriodSeconds": 0,
                    "containers": [{"name": "app", "image": "sarena.local/ghost:1",
                                    "ports": [{"name": "http", "containerPort": 8080}]}]}}
    status = {"status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
                         "startTime": "2026-01-01T00:00:00Z"}}
    return ns, pod, status


def settled(pids, quiet_percent=3.0, window=3.0, timeout=900):
    """Seconds until every daemon spent under QUIET_PERCENT of a CPU over WINDOW."""
    t0 = time.time()
    while time.time() - t0 < timeout:
        before = {n: proc_cpu(p) for n, p in pids.items()}
        time.sleep(window)
        if all((proc_cpu(p) - before[n]) / window * 100 < quiet_percent for n, p in pids.items()):
            return round(time.time() - t0 - window, 1)
    raise SystemExit(f"the daemons did not settle within {timeout} s")


def cmd_pods(a):
    api = Api(a.kubeconfig)
    pids = dict(kv.split("=", 1) for kv in a.pids)
    status, body = api.request("GET", "/api/v1/nodes?labelSelector=sarena.bench%2Fghost%3Dyes")
    ghosts = sorted((n["metadata"]["name"], n["spec"]["podCIDR"]) for n in body["items"]
                    if n.get("spec", {}).get("podCIDR"))
    if not ghosts:
        raise SystemExit("no ghost Node has a podCIDR")
    per = -(-a.count // len(ghosts))

    def address(i):
        name, cidr = ghosts[i % len(ghosts)]
        base = [int(o) for o in cidr.split("/")[0].split(".")]
        host = base[3] + 1 + i // len(ghosts)
        return name, f"{base[0]}.{base[1]}.{base[2]}.{host}"

    if per > 60:
        raise SystemExit(f"{a.count} pods on {len(ghosts)} /26s: {per} a node, at most 60")
    t0 = time.time()
    with concurrent.futures.ThreadPoolExecutor(a.workers) as pool:
        list(pool.map(lambda j: api.create("/api/v1/namespaces",
                                           {"apiVersion": "v1", "kind": "Namespace",
                                            "metadata": {"name": f"scale-{j:02d}"}}), range(a.namespaces)))

        def one(i):
            node, ip = address(i)
            ns, pod, st = ghost_pod(i, node, ip, a.namespaces)
            api.create(f"/api/v1/namespaces/{ns}/pods", pod)
            code, out = api.request("PATCH", f"/api/v1/namespaces/{ns}/pods/{pod['metadata']['name']}/status",
                                    st, ctype="application/merge-patch+json")
            if code >= 300:
                raise RuntimeError(f"status of {ns}/{pod['metadata']['name']}: {code} {out}")

        list(pool.map(one, range(a.count)))
    create_s = round(time.time() - t0, 1)
    settle_s = settled(pids)
    cpu0 = {n: proc_cpu(p) for n, p in pids.items()}
    time.sleep(a.idle_seconds)
    out = {"pods": a.count, "create_s": create_s, "settle_s": settle_s, "daemons": {
        n: {"idle_cpu_percent": round((proc_cpu(p) - cpu0[n]) / a.idle_seconds * 100, 2), **proc_mem(p)}
        for n, p in pids.items()}}
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)
    print(f"pods: {json.dumps(out)}", file=sys.stderr)


def health_ready(sock):
    try:
        c = UnixHTTPConnection(sock)
        c.request("GET", "/v1/daemon/health")
        r = c.getresponse()
        return r.status == 200 and json.loads(r.read()).get("ready") is True
    except (OSError, ValueError):
        return False


def cmd_join(a):
    ready = routed = None
    deadline = time.time() + a.timeout
    while time.time() < deadline and (ready is None or routed is None):
        now = time.time()
        if ready is None and health_ready(a.socket):
            ready = now
        if routed is None and len(sarena_routes(a.netns)) >= a.routes:
            routed = now
        time.sleep(0.02)
    out = {"ready_s": round(ready - a.t0, 2) if ready else None,
           "routes_s": round(routed - a.t0, 2) if routed else None, "routes": a.routes}
    with open(a.out, "w") as f:
        json.dump(out, f)
    print(f"join: {json.dumps(out)}", file=sys.stderr)
    if ready is None or routed is None:
        raise SystemExit(f"the daemon did not join within {a.timeout} s: {out}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("level")
    s.add_argument("--kubeconfig", required=True)
    s.add_argument("--to", type=int, required=True)
    s.add_argument("--nodes", nargs="+", required=True)
    s.add_argument("--underlay", required=True)
    s.add_argument("--routing", choices=["native", "vxlan"], required=True)
    s.add_argument("--samples", type=int, default=20)
    s.add_argument("--workers", type=int, default=8)
    s.add_argument("--timeout", type=float, default=600)
    s.add_argument("--out", required=True)
    s = sub.add_parser("steady")
    s.add_argument("--kubeconfig", required=True)
    s.add_argument("--pids", nargs="+", required=True)
    s.add_argument("--nodes", nargs="+", required=True)
    s.add_argument("--seconds", type=float, default=30)
    s.add_argument("--heartbeats", type=float, default=0)
    s.add_argument("--idle-seconds", type=float, default=10)
    s.add_argument("--quiet-seconds", type=float, default=5)
    s.add_argument("--out", required=True)
    s = sub.add_parser("pods")
    s.add_argument("--kubeconfig", required=True)
    s.add_argument("--count", type=int, required=True)
    s.add_argument("--namespaces", type=int, default=20)
    s.add_argument("--pids", nargs="+", required=True)
    s.add_argument("--workers", type=int, default=8)
    s.add_argument("--idle-seconds", type=float, default=10)
    s.add_argument("--out", required=True)
    s = sub.add_parser("join")
    s.add_argument("--socket", required=True)
    s.add_argument("--netns", required=True)
    s.add_argument("--routes", type=int, required=True)
    s.add_argument("--t0", type=float, required=True)
    s.add_argument("--timeout", type=float, default=120)
    s.add_argument("--out", required=True)
    a = p.parse_args()
    {"level": cmd_level, "steady": cmd_steady, "join": cmd_join, "pods": cmd_pods}[a.cmd](a)


if __name__ == "__main__":
    main()
