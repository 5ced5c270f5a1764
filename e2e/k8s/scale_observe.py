"""The observing half of bench-node-scale.py (python3 stdlib only): the
Node objects through a watch of the API server, the real nodes' routes
through `ip -ts monitor route` in their netns, their kernel tables, and the
daemons' CPU, memory and link counters."""

import calendar
import json
import os
import re
import subprocess
import threading
import time

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def list_nodes(api, selector=""):
    """The Node list (the parsed body); fails on an error status."""
    path = "/api/v1/nodes" + (f"?labelSelector={selector}" if selector else "")
    status, body = api.request("GET", path)
    if status != 200:
        raise RuntimeError(f"GET {path}: {status} {str(body)[:200]}")
    return body




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
        body = list_nodes(self.api)
        now = time.time()
        for n in body["items"]:
            self._node(n, now)
        threading.Thread(target=self._watch, args=(body["metadata"]["resourceVersion"],), daemon=True).start()
        for name, ns in self.nodes.items():
            # timestamps in UTC, whatever the machine's zone (parse_ts)
            p = subprocess.Popen(["nsenter", f"--net=/run/netns/{ns}", "ip", "-ts", "monitor", "route"],
                                 stdout=subprocess.PIPE, text=True, env={**os.environ, "TZ": "UTC"})
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
                body = list_nodes(self.api)
                rv = body["metadata"]["resourceVersion"]
                now = time.time()
                with self.cond:
                    listed = {n["metadata"]["name"] for n in body["items"]}
                    for name in [n for n in self.cidr_seen if n not in listed]:
                        self.gone[name] = now  # deleted while the watch was down
                        del self.cidr_seen[name]
                    self.cond.notify_all()
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
    """ip -ts's time (UTC, see Observer.start) with microseconds -> epoch seconds."""
    base, _, frac = ts.partition(".")
    return calendar.timegm(time.strptime(base, "%Y-%m-%dT%H:%M:%S")) + float("0." + (frac or "0"))


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



def proc_cpu(pid):
    """utime + stime of PID in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


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


def nodes_quiet(api, quiet, timeout=900):
    """Seconds until no Node object changed for QUIET seconds (the
    controller-manager updates a thousand new Nodes for minutes:
    conditions, taints); fails when the watch breaks or the time is up."""
    rv = list_nodes(api)["metadata"]["resourceVersion"]
    state = {"last": time.time(), "error": None}

    def follow():
        try:
            for _ in api.watch("/api/v1/nodes", rv):
                state["last"] = time.time()
            state["error"] = "the watch ended"
        except Exception as e:  # noqa: BLE001 - reported to the caller
            state["error"] = str(e)

    threading.Thread(target=follow, daemon=True).start()
    t0 = time.time()
    while time.time() - state["last"] < quiet:
        if state["error"]:
            raise SystemExit(f"watching the Nodes for quiet: {state['error']}")
        if time.time() - t0 > timeout:
            raise SystemExit(f"the Node objects still change after {timeout} s")
        time.sleep(0.5)
    return round(time.time() - t0, 1)
