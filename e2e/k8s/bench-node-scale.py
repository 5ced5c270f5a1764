#!/usr/bin/env python3
"""Helpers of e2e/k8s/bench-node-scale.sh (python3 stdlib only).

  level --kubeconfig K --to N --nodes NAME=NETNS... --underlay PREFIX
        --routing native|vxlan --samples S --out FILE [--workers W]
      Run in the control-plane netns. Grows the cluster's "ghost" Node
      objects (no kubelet) to N, created in parallel by a process of its
      own (`create`) with a kubelet's status (addresses, capacity,
      conditions, node info, 30 images); one thread watches the Node
      objects through the API server (the time a podCIDR is first seen,
      and a deletion), one per real node follows `ip -ts monitor route` in
      its netns (scale_observe.py). Measures:
        grow:   for every new ghost, podCIDR seen -> its route on each real
                node; the time until every real node routes every ghost;
        exact:  each real node's Sarena routes (proto 91) are exactly the
                peers' podCIDRs via their InternalIPs (native) or via the
                overlay (vxlan: plus one FDB entry per peer);
        probes: S times (100), one at a time: one more ghost created (podCIDR seen
                -> route on every real node) then deleted (deletion seen ->
                route gone on every real node).
      Writes the level's JSON to FILE (percentiles nearest-rank; `early`:
      samples whose route came before the harness's watch saw the podCIDR);
      fails when a node is not exact or a route never came.
  create --kubeconfig K --to N --underlay PREFIX
      Ghosts 0..N-1 (existing ones kept), for `level`.
  steady --kubeconfig K --pids NAME=PID... --nodes NAME=NETNS... --seconds W
         --heartbeats R [--idle-seconds I] [--quiet-seconds Q] --out FILE
      Once no Node object changed for Q seconds (15: three of the
      controller-manager's node-monitor periods; it updates new Nodes for
      minutes), I seconds (10) with nothing happening:
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
import ipaddress
import json
import os
import random
import subprocess
import sys
import time

from kapi import GHOST_TAINT, TOLERATIONS, Api, UnixHTTPConnection, pct
from scale_observe import (Observer, exact, link_stats, list_nodes, ms, nodes_quiet, proc_cpu, proc_mem,
                           sarena_routes)

GHOSTS = "sarena.bench%2Fghost%3Dyes"



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


# --- the commands -----------------------------------------------------------------------


def cmd_create(a):
    """Ghosts 0..TO-1 (existing ones kept), in parallel: run as a process of
    its own, so the observer's watch is not starved while it creates."""
    api = Api(a.kubeconfig)

    def one(g):
        api.create("/api/v1/nodes", ghost_obj(ghost_name(g), ghost_ip(a.underlay, g), g))

    with concurrent.futures.ThreadPoolExecutor(a.workers) as pool:
        list(pool.map(one, range(a.to)))


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
    """Nearest-rank percentiles; `early`: samples at or below 0 (the route
    seen before the harness's own watch saw the podCIDR)."""
    vals = [s["ms"] for s in samples if s.get("ms") is not None]
    return {"n": len(vals), "p50_ms": pct(vals, 50), "p99_ms": pct(vals, 99),
            "max_ms": round(max(vals), 1) if vals else None, "early": sum(1 for v in vals if v <= 0)}


def cmd_level(a):
    api = Api(a.kubeconfig)
    real = dict(kv.split("=", 1) for kv in a.nodes)
    obs = Observer(api, real)
    obs.start()
    try:
        body = list_nodes(api, GHOSTS)
        have = {n["metadata"]["name"] for n in body["items"]}
        todo = [(g, ghost_name(g)) for g in range(a.to) if ghost_name(g) not in have]
        result = {"nodes": a.to + len(real), "ghosts": a.to, "routing": a.routing, "new_ghosts": len(todo)}
        t0 = time.time()
        subprocess.run([sys.executable, os.path.abspath(__file__), "create", "--kubeconfig", a.kubeconfig,
                        "--to", str(a.to), "--underlay", a.underlay, "--workers", str(a.workers)], check=True)
        result["create_s"] = round(time.time() - t0, 2)
        names = [n for _, n in todo]
        ok = obs.wait(routed_everywhere(obs, real, names, t0), a.timeout)
        result["converged_s"] = round(time.time() - t0, 2)
        if not ok:
            raise SystemExit(f"not every real node routes the {len(names)} new ghosts after {a.timeout} s")
        grow = latencies(obs, real, names)
        result["grow"] = summary(grow)
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


def cmd_steady(a):
    api = Api(a.kubeconfig)
    pids = dict(kv.split("=", 1) for kv in a.pids)
    real = dict(kv.split("=", 1) for kv in a.nodes)
    body = list_nodes(api, GHOSTS)
    ghosts = [n["metadata"]["name"] for n in body["items"]]
    quiet_after = nodes_quiet(api, a.quiet_seconds)
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
        st, out = api.request("PATCH", f"/api/v1/nodes/{name}/status", patch,
                              ctype="application/strategic-merge-patch+json")
        if st >= 300:
            raise SystemExit(f"heartbeat of {name}: {st} {str(out)[:200]}")
        else:
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



def ghost_pod(i, node, ip, namespaces):
    """Pod i, bound to NODE, and its status (Running at IP, in NODE's podCIDR)."""
    ns = f"scale-{i % namespaces:02d}"
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": f"p-{i:05d}", "namespace": ns,
                        "labels": {"app": f"app-{i % 40}", "tier": ["web", "api", "db"][i % 3]}},
           "spec": {"nodeName": node, "tolerations": TOLERATIONS,
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
    body = list_nodes(api, GHOSTS)
    ghosts = sorted((n["metadata"]["name"], ipaddress.ip_network(n["spec"]["podCIDR"])) for n in body["items"]
                    if n.get("spec", {}).get("podCIDR"))
    if not ghosts:
        raise SystemExit("no ghost Node has a podCIDR")
    per = -(-a.count // len(ghosts))
    room = min(net.num_addresses for _, net in ghosts) - 3  # network, gateway, broadcast
    if per > room:
        raise SystemExit(f"{a.count} pods on {len(ghosts)} Nodes: {per} a node, their podCIDRs hold {room}")

    def address(i):
        name, net = ghosts[i % len(ghosts)]
        return name, str(net.network_address + 2 + i // len(ghosts))  # after the gateway
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
    s.add_argument("--samples", type=int, default=100)
    s.add_argument("--workers", type=int, default=8)
    s.add_argument("--timeout", type=float, default=600)
    s.add_argument("--out", required=True)
    s = sub.add_parser("create")
    s.add_argument("--kubeconfig", required=True)
    s.add_argument("--to", type=int, required=True)
    s.add_argument("--underlay", required=True)
    s.add_argument("--workers", type=int, default=8)
    s = sub.add_parser("steady")
    s.add_argument("--kubeconfig", required=True)
    s.add_argument("--pids", nargs="+", required=True)
    s.add_argument("--nodes", nargs="+", required=True)
    s.add_argument("--seconds", type=float, default=30)
    s.add_argument("--heartbeats", type=float, default=0)
    s.add_argument("--idle-seconds", type=float, default=10)
    s.add_argument("--quiet-seconds", type=float, default=15)
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
    {"level": cmd_level, "steady": cmd_steady, "join": cmd_join, "create": cmd_create, "pods": cmd_pods}[a.cmd](a)


if __name__ == "__main__":
    main()
