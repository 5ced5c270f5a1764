#!/usr/bin/env python3
"""Helpers of e2e/k8s/bench-policy-cluster.sh (python3 stdlib only).

  populate --kubeconfig K --pods N --policies P [--first-pod N0] [--first-policy P0]
      Background objects straight through the API server (run in the
      control-plane netns): the namespaces bg-00.., the "ghost" Node objects
      (no kubelet), pods bg-NNNNN 0..N-1 bound to them with their status
      (Running, a podIP in 10.250.0.0/16) set through the status
      subresource, and policies np-NNNNN 0..P-1 (a mix: podSelector,
      namespaceSelector, matchExpressions, ipBlock with except, ports by
      number and by name); objects that already exist are kept, so a second
      call grows the set. Parallel requests, one keep-alive connection per
      worker. Prints {"seconds": .., "created": ..} as JSON.
  poll --socket S --stop FILE [--interval 0.005]
      In a node (its mount namespace): GET /v1/policy/endpoints on the
      daemon's socket in a loop; prints "+NS/NAME<TAB>epoch-ns" when a policy
      first selects a local endpoint, "-NS/NAME<TAB>epoch-ns" when it no
      longer selects any; "ready<TAB>epoch-ns" after the first answer. Ends
      when FILE exists.
  measure --kubeconfig K --samples S --namespace NS --poll NODE=FILE...
      One NetworkPolicy at a time selecting bench-target=yes in NS: T0 just
      before the create request, then the time each node's poller saw it;
      then deleted, and its removal waited for. Prints the samples as JSON.
  latency --samples FILE --label TEXT
      One line of percentiles of measure's samples, on stderr.
  summary ...
      The JSON report of the run (see bench-policy-cluster.sh).
"""

import argparse
import concurrent.futures
import datetime
import http.client
import json
import os
import random
import sys
import threading
import time

from kapi import GHOST_TAINT, TOLERATIONS, Api, UnixHTTPConnection, pct

# --- the background objects ---------------------------------------------------------

TIERS = ["web", "api", "db"]


def ns_name(i):
    return f"bg-{i:02d}"


def ghost_name(g):
    return f"ghost-{g:02d}"


def pod_ip(i):
    n = i + 1  # 10.250.0.1 ..
    return f"10.250.{n // 256}.{n % 256}"


def namespace_obj(i):
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": ns_name(i), "labels": {"team": f"t{i % 4}", "env": "prod" if i % 2 else "dev"}}}


def ghost_obj(g, underlay):
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": ghost_name(g), "labels": {"sarena.bench/ghost": "yes"}},
            "spec": {"unschedulable": True, "taints": [GHOST_TAINT]},
            # a Node's status is kept on create
            "status": {"addresses": [{"type": "InternalIP", "address": f"{underlay}.{200 + g}"},
                                     {"type": "Hostname", "address": ghost_name(g)}]}}


def pod_obj(i, namespaces, ghosts):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"bg-{i:05d}", "namespace": ns_name(i % namespaces),
                         "labels": {"app": f"app-{(i // namespaces) % 12}", "tier": TIERS[(i // 7) % 3],
                                    "team": f"t{(i % namespaces) % 4}"}},
            "spec": {"nodeName": ghost_name(i % ghosts), "tolerations": TOLERATIONS,
                     "automountServiceAccountToken": False, "enableServiceLinks": False,
                     "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "app", "image": "sarena.local/ghost:1",
                                     "ports": [{"name": "http", "containerPort": 8080},
                                               {"name": "metrics", "containerPort": 9090},
                                               {"name": "dns", "containerPort": 53, "protocol": "UDP"}]}]}}


def pod_status(i, underlay, ghosts):
    ip = pod_ip(i)
    # no conditions: the node lifecycle controller only rewrites a Ready one
    return {"status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
                       "hostIP": f"{underlay}.{200 + i % ghosts}", "startTime": "2026-01-01T00:00:00Z"}}


def policy_obj(j, namespaces, bench_ns):
    """A mix of shapes; every 25th selects the bench namespace's measured pods."""
    k = j % 12
    if j % 25 == 0:
        ns = bench_ns
        spec = {"podSelector": {"matchLabels": {"bench-target": "yes"}}, "policyTypes": ["Ingress"],
                "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {"team": f"t{j % 4}"}},
                                       "podSelector": {"matchLabels": {"app": f"app-{k}"}}}],
                             "ports": [{"protocol": "TCP", "port": 8080}]}]}
        return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
                "metadata": {"name": f"np-{j:05d}", "namespace": ns}, "spec": spec}
    ns = ns_name(j % namespaces)
    shape = j % 6
    if shape == 0:
        spec = {"podSelector": {"matchLabels": {"app": f"app-{k}"}},
                "ingress": [{"from": [{"podSelector": {"matchLabels": {"app": f"app-{(k + 1) % 12}"}}}],
                             "ports": [{"protocol": "TCP", "port": 8080}]}]}
    elif shape == 1:
        spec = {"podSelector": {"matchLabels": {"tier": "db"}},
                "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {"team": f"t{j % 4}"}},
                                       "podSelector": {"matchLabels": {"tier": "api"}}}],
                             "ports": [{"port": "http"}]}]}
    elif shape == 2:
        spec = {"podSelector": {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["web", "api"]}]},
                "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {"env": "prod"}}}],
                             "ports": [{"port": "metrics"}]}]}
    elif shape == 3:
        spec = {"podSelector": {"matchLabels": {"app": f"app-{k}"}}, "policyTypes": ["Egress"],
                "egress": [{"to": [{"ipBlock": {"cidr": "10.250.0.0/16", "except": [f"10.250.{j % 40}.0/24"]}}],
                            "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 443}]},
                           {"to": [{"podSelector": {"matchLabels": {"tier": "db"}}}],
                            "ports": [{"protocol": "TCP", "port": 5432}]}]}
    elif shape == 4:
        spec = {"podSelector": {"matchLabels": {"tier": TIERS[j % 3], "app": f"app-{k}"}},
                "policyTypes": ["Ingress"],
                "ingress": [{"from": [{"podSelector": {}}]}]}
    else:
        spec = {"podSelector": {"matchLabels": {"app": f"app-{k}"}}, "policyTypes": ["Ingress", "Egress"],
                "ingress": [{"from": [{"ipBlock": {"cidr": "10.0.0.0/8", "except": [f"10.250.{j % 40}.0/24"]}},
                                      {"podSelector": {"matchLabels": {"app": f"app-{(k + 5) % 12}"}}}],
                             "ports": [{"protocol": "TCP", "port": 8080}, {"port": "dns", "protocol": "UDP"}]}],
                "egress": [{"to": [{"namespaceSelector": {"matchLabels": {"team": f"t{k % 4}"}}}]}]}
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": f"np-{j:05d}", "namespace": ns}, "spec": spec}


def cmd_populate(a):
    api = Api(a.kubeconfig)
    t0 = time.monotonic()
    created = {"namespaces": 0, "nodes": 0, "pods": 0, "policies": 0}
    lock = threading.Lock()

    def count(kind, yes):
        if yes:
            with lock:
                created[kind] += 1

    with concurrent.futures.ThreadPoolExecutor(a.workers) as pool:
        for f in [pool.submit(lambda i=i: count("namespaces", api.create("/api/v1/namespaces", namespace_obj(i))))
                  for i in range(a.namespaces)] + \
                 [pool.submit(lambda g=g: count("nodes", api.create("/api/v1/nodes", ghost_obj(g, a.underlay))))
                  for g in range(a.ghost_nodes)]:
            f.result()

        def one_pod(i):
            obj = pod_obj(i, a.namespaces, a.ghost_nodes)
            ns, name = obj["metadata"]["namespace"], obj["metadata"]["name"]
            yes = api.create(f"/api/v1/namespaces/{ns}/pods", obj)
            status, body = api.request("PATCH", f"/api/v1/namespaces/{ns}/pods/{name}/status",
                                       pod_status(i, a.underlay, a.ghost_nodes),
                                       ctype="application/merge-patch+json")
            if status >= 300:
                raise RuntimeError(f"status of {ns}/{name}: {status} {body}")
            count("pods", yes)

        def one_policy(j):
            obj = policy_obj(j, a.namespaces, a.bench_namespace)
            ns = obj["metadata"]["namespace"]
            count("policies", api.create(f"/apis/networking.k8s.io/v1/namespaces/{ns}/networkpolicies", obj))

        futures = [pool.submit(one_pod, i) for i in range(a.first_pod, a.pods)]
        futures += [pool.submit(one_policy, j) for j in range(a.first_policy, a.policies)]
        for f in futures:
            f.result()
    print(json.dumps({"seconds": round(time.monotonic() - t0, 1), "created": created}))


# --- the pollers ---------------------------------------------------------------------


def cmd_poll(a):
    conn = None
    seen = set()
    ready = False
    last_stop_check = 0.0
    errors = 0
    while True:
        now = time.monotonic()
        if now - last_stop_check > 0.5:
            last_stop_check = now
            if os.path.exists(a.stop):
                return
        try:
            if conn is None:
                conn = UnixHTTPConnection(a.socket)
            conn.request("GET", "/v1/policy/endpoints")
            r = conn.getresponse()
            raw = r.read()
            t = time.time_ns()
            if r.status != 200:
                time.sleep(a.interval)
                continue
            eps = json.loads(raw)
        except (OSError, http.client.HTTPException, ValueError):
            errors += 1
            if conn is not None:
                conn.close()
            conn = None
            time.sleep(0.1)
            continue
        if not ready:
            ready = True
            print(f"ready\t{t}", flush=True)
        now_set = set()
        for ep in eps:
            now_set.update(ep.get("policies") or [])
        out = [f"+{p}\t{t}" for p in sorted(now_set - seen)] + [f"-{p}\t{t}" for p in sorted(seen - now_set)]
        if out:
            print("\n".join(out), flush=True)
        seen = now_set
        time.sleep(a.interval)


# --- the measured samples ------------------------------------------------------------


class Follow:
    """The lines a poller wrote so far, as {event: epoch-ns} (first seen)."""

    def __init__(self, path):
        self.path = path
        self.offset = 0
        self.partial = ""
        self.events = {}

    def read(self):
        try:
            with open(self.path) as f:
                f.seek(self.offset)
                chunk = f.read()
                self.offset = f.tell()
        except FileNotFoundError:
            return
        text = self.partial + chunk
        lines = text.split("\n")
        self.partial = lines.pop()
        for line in lines:
            key, _, t = line.partition("\t")
            if t and key not in self.events:
                self.events[key] = int(t)


def wait_events(follows, key, deadline):
    """{node: epoch-ns} once every node's poller printed key; None at the deadline."""
    while True:
        for f in follows.values():
            f.read()
        if all(key in f.events for f in follows.values()):
            return {n: f.events[key] for n, f in follows.items()}
        if time.monotonic() > deadline:
            return None
        time.sleep(0.002)


def cmd_measure(a):
    api = Api(a.kubeconfig)
    follows = {}
    for spec in a.poll:
        node, _, path = spec.partition("=")
        follows[node] = Follow(path)
    for node, f in follows.items():
        if wait_events({node: f}, "ready", time.monotonic() + 60) is None:
            raise SystemExit(f"the poller of {node} never got an answer from its daemon")
    rng = random.Random(a.seed)
    samples = []
    path = f"/apis/networking.k8s.io/v1/namespaces/{a.namespace}/networkpolicies"
    for s in range(a.samples):
        name = f"bench-{a.run_id}-{s:04d}"
        key = f"{a.namespace}/{name}"
        obj = {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
               "metadata": {"name": name, "namespace": a.namespace},
               "spec": {"podSelector": {"matchLabels": {"bench-target": "yes"}}, "policyTypes": ["Ingress"],
                        "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {"team": f"t{s % 4}"}},
                                               "podSelector": {"matchLabels": {"app": f"app-{s % 12}"}}}],
                                     "ports": [{"protocol": "TCP", "port": 8080 + s % 3}]}]}}
        t0 = time.time_ns()
        if not api.create(path, obj):
            raise SystemExit(f"{key} already exists")
        t_created = time.time_ns()
        seen = wait_events(follows, "+" + key, time.monotonic() + a.timeout)
        if seen is None:
            missing = [n for n, f in follows.items() if "+" + key not in f.events]
            print(f"sample {s}: {key} not seen by {missing} within {a.timeout}s", file=sys.stderr)
            samples.append({"name": key, "t0": t0, "timeout": missing})
        else:
            per = {n: (t - t0) / 1e6 for n, t in seen.items()}
            samples.append({"name": key, "t0": t0, "api_ms": (t_created - t0) / 1e6,
                            "per_node_ms": per, "ms": max(per.values())})
            print(f"sample {s + 1}/{a.samples}: {max(per.values()):.1f} ms "
                  f"({', '.join(f'{n} {v:.1f}' for n, v in sorted(per.items()))}; create call "
                  f"{(t_created - t0) / 1e6:.1f} ms)", file=sys.stderr)
        # removed again: the cluster stays at its background policies
        t_del = time.time_ns()
        status, body = api.request("DELETE", f"{path}/{name}")
        if status >= 300:
            raise SystemExit(f"DELETE {key}: {status} {body}")
        gone = wait_events(follows, "-" + key, time.monotonic() + a.timeout)
        if gone is not None:
            samples[-1]["removed_ms"] = max((t - t_del) / 1e6 for t in gone.values())
        time.sleep(rng.uniform(a.pause_min, a.pause_max))
    json.dump(samples, sys.stdout)


# --- the report --------------------------------------------------------------------


def latency_line(samples, label):
    ok = [s for s in samples if "ms" in s]
    lat = [s["ms"] for s in ok]
    timeouts = len(samples) - len(ok)
    nodes = sorted({n for s in ok for n in s["per_node_ms"]})
    per_node = {n: pct([s["per_node_ms"][n] for s in ok], 50) for n in nodes}
    return (f"{label}: {len(lat)} samples{f' ({timeouts} timed out)' if timeouts else ''}: "
            f"p50 {pct(lat, 50)} ms, p90 {pct(lat, 90)} ms, p99 {pct(lat, 99)} ms, "
            f"max {round(max(lat), 1) if lat else None} ms (targets p50 <= 100, p99 <= 500); per node p50 {per_node}")


def cmd_latency(a):
    with open(a.samples) as f:
        print(latency_line(json.load(f), a.label), file=sys.stderr)


def cmd_summary(a):
    with open(a.samples) as f:
        samples = json.load(f)
    ok = [s for s in samples if "ms" in s]
    lat = [s["ms"] for s in ok]
    nodes = sorted({n for s in ok for n in s["per_node_ms"]})
    per_node = {n: pct([s["per_node_ms"][n] for s in ok], 50) for n in nodes}
    with open(a.rss) as f:
        rss = json.load(f)
    with open(a.populate) as f:
        populate = json.load(f)
    report = {
        "kernel": os.uname().release,
        "cpus": os.cpu_count(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": a.command,
        "enforce": {"pods": a.pods, "policies": a.policies, "nodes": len(nodes), "samples": len(lat),
                    "p50_ms": pct(lat, 50), "p90_ms": pct(lat, 90), "p99_ms": pct(lat, 99),
                    "max_ms": round(max(lat), 1) if lat else None, "per_node_p50_ms": per_node},
        "rss": {"pods": a.big_pods, "policies": a.big_policies, "idle_rss_mib": rss["idle_rss"],
                "rss_mib": rss["rss"], "hwm_mib": rss["hwm"]},
        "populate_seconds": {str(a.pods): populate["small"], str(a.big_pods): populate["big"]},
    }
    with open(a.out, "w") as f:
        json.dump(report, f, indent=2)
        f.write("\n")
    removed = [s["removed_ms"] for s in ok if "removed_ms" in s]
    print(latency_line(samples, f"enforce ({a.pods} pods, {a.policies} policies, {len(nodes)} nodes)"),
          file=sys.stderr)
    if removed:
        print(f"removal seen on every node: p50 {pct(removed, 50)} ms, max {round(max(removed), 1)} ms",
              file=sys.stderr)
    print(f"rss ({a.big_pods} pods, {a.big_policies} policies): VmRSS {rss['rss']} MiB, VmHWM {rss['hwm']} MiB "
          f"(idle VmRSS {rss['idle_rss']} MiB; target <= 100)", file=sys.stderr)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("populate")
    s.add_argument("--kubeconfig", required=True)
    s.add_argument("--pods", type=int, required=True)
    s.add_argument("--policies", type=int, required=True)
    s.add_argument("--first-pod", type=int, default=0, help="pods below it exist already")
    s.add_argument("--first-policy", type=int, default=0, help="policies below it exist already")
    s.add_argument("--namespaces", type=int, default=20)
    s.add_argument("--ghost-nodes", type=int, default=20)
    s.add_argument("--bench-namespace", default="bench")
    s.add_argument("--underlay", default="172.30.0")
    s.add_argument("--workers", type=int, default=16)
    s = sub.add_parser("poll")
    s.add_argument("--socket", default="/run/sarena/sarena.sock")
    s.add_argument("--stop", required=True)
    s.add_argument("--interval", type=float, default=0.005)
    s = sub.add_parser("measure")
    s.add_argument("--kubeconfig", required=True)
    s.add_argument("--samples", type=int, required=True)
    s.add_argument("--namespace", default="bench")
    s.add_argument("--poll", action="append", required=True, metavar="NODE=FILE")
    s.add_argument("--run-id", default="0")
    s.add_argument("--timeout", type=float, default=30)
    s.add_argument("--pause-min", type=float, default=0.2)
    s.add_argument("--pause-max", type=float, default=0.8)
    s.add_argument("--seed", type=int, default=1)
    s = sub.add_parser("latency")
    s.add_argument("--samples", required=True)
    s.add_argument("--label", required=True)
    s = sub.add_parser("summary")
    for opt in ("--samples", "--rss", "--populate", "--out", "--command"):
        s.add_argument(opt, required=True)
    for opt in ("--pods", "--policies", "--big-pods", "--big-policies"):
        s.add_argument(opt, type=int, required=True)
    a = p.parse_args()
    {"populate": cmd_populate, "poll": cmd_poll, "measure": cmd_measure, "latency": cmd_latency,
     "summary": cmd_summary}[a.cmd](a)


if __name__ == "__main__":
    main()
