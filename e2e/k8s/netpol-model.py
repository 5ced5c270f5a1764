#!/usr/bin/env python3
"""The NetworkPolicy truth table of e2e/k8s/test-netpol-table.sh.

An independent model of networking.k8s.io/v1 NetworkPolicy (written from the
API's documented semantics, never from Sarena's code), the steps the test
applies, the probes it makes, and the probe clients themselves. Python 3
standard library only.

Subcommands:
  selftest                       the model against hand-written cases
  table PODS NAMESPACES NODES SERVICES PIDS NETNS
                                 the pod table (JSON on stdout) from kubectl's
                                 JSON of the test's pods, namespaces, nodes and
                                 Service, "NS/POD PID" lines (a process of each
                                 pod, to reach its network namespace) and
                                 "NODE NETNS" lines (the node's, in /run/netns)
  steps                          the number of steps
  step N --table T               step N's title (stderr) and its NetworkPolicy
                                 objects (a v1 List, stdout)
  plan --table T --out DIR [--only IDS]
                                 the probes: one file per client in DIR
                                 (DIR/clients: "NETNS FILE" per client, DIR/
                                 explain-NODE: explain queries per node)
  probe [--timeout S]            run in a client's network namespace: probes
                                 the "ID ADDR PORT PROTO" lines of stdin,
                                 prints "ID allow|deny DETAIL SOURCE"
  explain --cli PATH             run in a node: `sarena policy explain` for the
                                 "ID FROM TO PORT/PROTO" lines of stdin, prints
                                 "ID allow|deny DETAIL NODE"
  judge --table T --policies P --plan DIR --results FILE... [--title S]
        [--mismatches OUT] [--quiet]
                                 the expected verdict of every probe from the
                                 model, the table of the step, the mismatches;
                                 exit 1 if any

Semantics modelled (networking.k8s.io/v1):
  * a policy selects the pods of its own namespace its podSelector matches;
    it isolates them for ingress/egress per policyTypes (default: Ingress,
    plus Egress when it has egress rules);
  * a packet passes when the sender's egress allows it (not isolated, or some
    egress rule of a selecting policy matches the receiver and the port) AND
    the receiver's ingress allows it (likewise for the sender);
  * a peer: ipBlock (cidr minus except, address family must match); or pod
    and/or namespace selectors (podSelector alone: the policy's namespace;
    namespaceSelector alone: every pod there; both: the pods matching both);
    an empty or missing from/to list: every peer;
  * a port: protocol (default TCP), a number, a number range (endPort), a
    name resolved on the pod that owns the port (ingress: the receiver; egress:
    the receiver too, the peer), no port: every port of the protocol; an empty
    or missing ports list: every port and protocol;
  * traffic between a pod and its own node is always allowed; another node is
    an address like any other (ipBlock);
  * a pod reaching itself (its own address, or its own Service: hairpin)
    never leaves it / is masqueraded: allowed. Policy explanations (SCTP rows)
    are judged on the policies alone;
  * a Service is judged on its backend: the translated destination and port.
"""

import argparse
import ipaddress
import json
import os
import socket
import subprocess
import sys
import threading
import time

# --- the model ----------------------------------------------------------------

PROTOCOLS = ("TCP", "UDP", "SCTP")


def selector_matches(selector, labels):
    """A metav1.LabelSelector against a label map ({} matches everything)."""
    if selector is None:
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr["key"], expr["operator"], expr.get("values") or []
        if op == "In":
            ok = key in labels and labels[key] in values
        elif op == "NotIn":
            ok = key not in labels or labels[key] not in values
        elif op == "Exists":
            ok = key in labels
        elif op == "DoesNotExist":
            ok = key not in labels
        else:
            raise ValueError(f"unknown selector operator {op}")
        if not ok:
            return False
    return True


def policy_types(policy):
    """spec.policyTypes, with the API's default when it is missing."""
    spec = policy["spec"]
    types = spec.get("policyTypes")
    if types:
        return set(types)
    types = {"Ingress"}
    if spec.get("egress"):
        types.add("Egress")
    return types


class World:
    """The pods, namespaces and nodes a decision looks at."""

    def __init__(self, pods, namespaces, nodes=None):
        # pods: key "NS/NAME" -> {ns, name, labels, ips, node, ports}
        self.pods = pods
        # namespaces: real name -> labels
        self.namespaces = namespaces
        self.nodes = nodes or {}

    def pod_of_ip(self, ip):
        for key, pod in self.pods.items():
            if ip in pod["ips"]:
                return key
        return None


def ip_in_block(ip, block):
    addr = ipaddress.ip_address(ip)
    net = ipaddress.ip_network(block["cidr"], strict=False)
    if addr.version != net.version or addr not in net:
        return False
    for ex in block.get("except") or []:
        exnet = ipaddress.ip_network(ex, strict=False)
        if addr.version == exnet.version and addr in exnet:
            return False
    return True


def peer_matches(world, policy_ns, peer, other_pod, other_ip):
    """One NetworkPolicyPeer against the other end (a pod key or None, its address)."""
    if "ipBlock" in peer and peer["ipBlock"] is not None:
        return ip_in_block(other_ip, peer["ipBlock"])
    ns_sel = peer.get("namespaceSelector")
    pod_sel = peer.get("podSelector")
    if ns_sel is None and pod_sel is None:
        raise ValueError(f"an empty peer: {peer}")
    if other_pod is None:
        return False
    pod = world.pods[other_pod]
    if ns_sel is not None:
        if not selector_matches(ns_sel, world.namespaces.get(pod["ns"], {})):
            return False
    elif pod["ns"] != policy_ns:
        return False
    return pod_sel is None or selector_matches(pod_sel, pod["labels"])


def port_matches(world, rule_port, owner, port, proto):
    """One NetworkPolicyPort against a packet to PORT/PROTO of pod OWNER (key or None)."""
    if (rule_port.get("protocol") or "TCP") != proto:
        return False
    want = rule_port.get("port")
    if want is None:
        return True
    if isinstance(want, str) and not want.isdigit():
        if owner is None:
            return False
        return any(
            p["name"] == want and p["protocol"] == proto and p["port"] == port
            for p in world.pods[owner]["ports"]
        )
    want = int(want)
    end = rule_port.get("endPort")
    if end is not None:
        return want <= port <= int(end)
    return port == want


def direction_allows(world, policies, pod_key, direction, other_pod, other_ip, port_owner, port, proto):
    """(allowed, isolated, reason) for POD_KEY in DIRECTION ("Ingress"/"Egress")
    with the other end OTHER_POD/OTHER_IP, on PORT/PROTO of PORT_OWNER."""
    pod = world.pods[pod_key]
    selecting = [
        p
        for p in policies
        if p["metadata"]["namespace"] == pod["ns"]
        and selector_matches(p["spec"].get("podSelector") or {}, pod["labels"])
        and direction in policy_types(p)
    ]
    if not selecting:
        return True, False, "open"
    field, peers_field = ("ingress", "from") if direction == "Ingress" else ("egress", "to")
    for p in selecting:
        for i, rule in enumerate(p["spec"].get(field) or []):
            peers = rule.get(peers_field) or []
            if peers and not any(
                peer_matches(world, p["metadata"]["namespace"], peer, other_pod, other_ip) for peer in peers
            ):
                continue
            ports = rule.get("ports") or []
            if ports and not any(port_matches(world, rp, port_owner, port, proto) for rp in ports):
                continue
            return True, True, f"{p['metadata']['name']} {field}[{i}]"
    return False, True, "denied by " + ",".join(sorted(p["metadata"]["name"] for p in selecting))


def same_family(ips, like):
    version = ipaddress.ip_address(like).version
    for ip in ips:
        if ipaddress.ip_address(ip).version == version:
            return ip
    return None


def decide(world, policies, src, dst, port, proto, family=4, src_ip=None, loopback=True):
    """(allowed, why) for a packet from SRC to pod DST on PORT/PROTO.

    SRC is a pod key, or "node:NAME" (that node's network namespace, with
    source address SRC_IP). FAMILY picks the pods' addresses (4 or 6).
    LOOPBACK: a pod to itself is allowed whatever the policies (real traffic);
    off for the policy explanations.
    """
    dpod = world.pods[dst]
    dst_ip = next((ip for ip in dpod["ips"] if ipaddress.ip_address(ip).version == family), None)
    if dst_ip is None:
        raise ValueError(f"{dst} has no IPv{family} address")
    if src.startswith("node:"):
        node = src[len("node:"):]
        if dpod["node"] == node:
            return True, "own node"
        if src_ip is None:
            raise ValueError(f"{src}: no source address")
        ok, _, why = direction_allows(world, policies, dst, "Ingress", world.pod_of_ip(src_ip), src_ip, dst, port, proto)
        return ok, f"ingress: {why}"
    if src == dst and loopback:
        return True, "loopback"
    spod = world.pods[src]
    s_ip = same_family(spod["ips"], dst_ip)
    if s_ip is None:
        raise ValueError(f"{src} has no IPv{family} address")
    e_ok, _, e_why = direction_allows(world, policies, src, "Egress", dst, dst_ip, dst, port, proto)
    i_ok, _, i_why = direction_allows(world, policies, dst, "Ingress", src, s_ip, dst, port, proto)
    return e_ok and i_ok, f"egress: {e_why}; ingress: {i_why}"


# --- the pod table ---------------------------------------------------------------


def load_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def cmd_table(args):
    pods_j, ns_j, nodes_j, svc_j = args.pods, args.namespaces, args.nodes, args.services
    pids_path, netns_path = args.pids, args.netns
    namespaces = {}
    for ns in load_json(ns_j)["items"]:
        namespaces[ns["metadata"]["name"]] = ns["metadata"].get("labels") or {}
    pids = {}
    with open(pids_path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                key, pid = line.split()
                pids[key] = int(pid)
    pods = {}
    for p in load_json(pods_j)["items"]:
        meta, spec, status = p["metadata"], p["spec"], p["status"]
        key = f"{meta['namespace']}/{meta['name']}"
        ips = [a["ip"] for a in status.get("podIPs") or []] or [status["podIP"]]
        ports = []
        for c in spec["containers"]:
            for cp in c.get("ports") or []:
                if cp.get("name"):
                    ports.append({"name": cp["name"], "port": cp["containerPort"], "protocol": cp.get("protocol") or "TCP"})
        short = f"{namespaces[meta['namespace']].get('ns', meta['namespace'])}/{meta['labels'].get('pod', meta['name'])}"
        pods[key] = {
            "ns": meta["namespace"],
            "name": meta["name"],
            "short": short,
            "labels": meta.get("labels") or {},
            "ips": ips,
            "node": spec["nodeName"],
            "ports": ports,
            "pid": pids.get(key),
        }
    netns = {}
    with open(netns_path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                node, name = line.split()
                netns[node] = name
    nodes = {}
    for n in load_json(nodes_j)["items"]:
        name = n["metadata"]["name"]
        nodes[name] = {
            "ips": [a["address"] for a in n["status"]["addresses"] if a["type"] == "InternalIP"],
            "podCIDRs": n["spec"].get("podCIDRs") or [n["spec"]["podCIDR"]],
            "netns": netns.get(name),
        }
    services = []
    for s in load_json(svc_j)["items"]:
        meta, spec = s["metadata"], s["spec"]
        backends = sorted(
            k
            for k, p in pods.items()
            if p["ns"] == meta["namespace"] and selector_matches({"matchLabels": spec.get("selector") or {}}, p["labels"])
        )
        for sp in spec["ports"]:
            services.append(
                {
                    "ns": meta["namespace"],
                    "name": meta["name"],
                    "ip": spec["clusterIP"],
                    "port": sp["port"],
                    "protocol": sp.get("protocol") or "TCP",
                    "targetPort": sp["targetPort"],
                    "backends": backends,
                }
            )
    json.dump({"pods": pods, "namespaces": namespaces, "nodes": nodes, "services": services}, sys.stdout, indent=1)
    print()


def load_table(path):
    t = load_json(path)
    return t, World(t["pods"], t["namespaces"], t["nodes"])


# --- the steps -------------------------------------------------------------------


def steps_for(table):
    """[(title, [NetworkPolicy])] for the pod table (real namespace names, the
    second node's podCIDR, a pod's address)."""
    real = {labels.get("ns"): name for name, labels in table["namespaces"].items() if labels.get("ns")}
    by_short = {p["short"]: p for p in table["pods"].values()}
    x, y, z = real["x"], real["y"], real["z"]
    nodes = sorted(table["nodes"])
    node2 = nodes[1]
    cidr2 = next(c for c in table["nodes"][node2]["podCIDRs"] if ":" not in c)
    yc = by_short["y/c"]
    if yc["node"] != node2:
        raise ValueError("y/c must run on the second node")
    yc_ip = next(ip for ip in yc["ips"] if ":" not in ip)

    def ml(**labels):
        return {"matchLabels": labels}

    def np(ns, name, pod_selector, types=None, ingress=None, egress=None):
        spec = {"podSelector": pod_selector}
        if types is not None:
            spec["policyTypes"] = types
        if ingress is not None:
            spec["ingress"] = ingress
        if egress is not None:
            spec["egress"] = egress
        return {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": {"namespace": ns, "name": name},
            "spec": spec,
        }

    deny_x = np(x, "deny-ingress", {}, ["Ingress"])
    z_egress = [
        np(z, "deny-egress", {}, ["Egress"]),
        np(z, "to-x-tcp80", {}, ["Egress"], egress=[{"to": [{"namespaceSelector": ml(ns="x")}], "ports": [{"port": 80}]}]),
        # no policyTypes: the API defaults them to Ingress and Egress (it has
        # egress rules), so z/b also admits nothing
        np(z, "b-to-a", ml(pod="b"), egress=[{"to": [{"podSelector": ml(pod="a")}]}]),
        np(
            z,
            "c-udp-node1",
            ml(pod="c"),
            ["Egress"],
            egress=[
                {
                    "to": [{"ipBlock": {"cidr": "10.244.0.0/16", "except": [cidr2]}}],
                    "ports": [{"protocol": "UDP", "port": 80}],
                }
            ],
        ),
    ]
    return [
        ("no policy: everything allowed", []),
        ("x: default-deny ingress", [deny_x]),
        (
            "x: + x/a from pod=b (podSelector alone: own namespace); y: from namespace z (namespaceSelector) on TCP 80",
            [
                deny_x,
                np(x, "a-from-b", ml(pod="a"), ingress=[{"from": [{"podSelector": ml(pod="b")}]}]),
                np(y, "from-z-tcp80", {}, ingress=[{"from": [{"namespaceSelector": ml(ns="z")}], "ports": [{"port": 80}]}]),
            ],
        ),
        (
            "z/a: namespace y AND pod c in one peer; z/b: namespace In [x] OR pod c (two peers); "
            "y pods NotIn [a]: UDP 80 from pods a of every namespace",
            [
                np(z, "a-from-y-c", ml(pod="a"), ingress=[{"from": [{"namespaceSelector": ml(ns="y"), "podSelector": ml(pod="c")}]}]),
                np(
                    z,
                    "b-from-x-or-c",
                    ml(pod="b"),
                    ingress=[
                        {
                            "from": [
                                {"namespaceSelector": {"matchExpressions": [{"key": "ns", "operator": "In", "values": ["x"]}]}},
                                {"podSelector": ml(pod="c")},
                            ]
                        }
                    ],
                ),
                np(
                    y,
                    "udp-from-a",
                    {"matchExpressions": [{"key": "pod", "operator": "NotIn", "values": ["a"]}]},
                    ingress=[
                        {
                            "from": [
                                {
                                    "namespaceSelector": {},
                                    "podSelector": {"matchExpressions": [{"key": "pod", "operator": "In", "values": ["a"]}]},
                                }
                            ],
                            "ports": [{"protocol": "UDP", "port": 80}],
                        }
                    ],
                ),
            ],
        ),
        (
            f"x: from ipBlock {cidr2} (the second node's pods) except y/c {yc_ip}/32, "
            "on named ports serve-81 (TCP 81; TCP 80 on the c pods) and serve-80-udp (UDP)",
            [
                np(
                    x,
                    "from-node2-pods",
                    {},
                    ingress=[
                        {
                            "from": [{"ipBlock": {"cidr": cidr2, "except": [f"{yc_ip}/32"]}}],
                            "ports": [{"port": "serve-81"}, {"protocol": "UDP", "port": "serve-80-udp"}],
                        }
                    ],
                ),
            ],
        ),
        (
            "y: TCP 80-81 (endPort) from every namespace; x: SCTP 80 from every namespace, anything from x",
            [
                np(
                    y,
                    "tcp-80-81",
                    {},
                    ingress=[{"from": [{"namespaceSelector": {}}], "ports": [{"protocol": "TCP", "port": 80, "endPort": 81}]}],
                ),
                np(
                    x,
                    "sctp-and-own",
                    {},
                    ingress=[
                        {"from": [{"namespaceSelector": {}}], "ports": [{"protocol": "SCTP", "port": 80}]},
                        {"from": [{"podSelector": {}}]},
                    ],
                ),
            ],
        ),
        (
            "z: default-deny egress; to namespace x on TCP 80; z/b to pods a, any port (no policyTypes: "
            "Ingress+Egress, z/b admits nothing); z/c UDP 80 to 10.244.0.0/16 except the second node's; "
            "y/c isolated both ways",
            z_egress + [np(y, "c-isolated", ml(pod="c"), ["Ingress", "Egress"])],
        ),
        (
            "both ends must allow: z's egress as before; x from z/b on serve-81, from y on TCP 80 and SCTP serve-80-sctp",
            z_egress
            + [
                np(
                    x,
                    "from-z-b-and-y",
                    {},
                    ingress=[
                        {
                            "from": [{"namespaceSelector": ml(ns="z"), "podSelector": ml(pod="b")}],
                            "ports": [{"port": "serve-81"}],
                        },
                        {
                            "from": [{"namespaceSelector": ml(ns="y")}],
                            "ports": [{"port": 80}, {"protocol": "SCTP", "port": "serve-80-sctp"}],
                        },
                    ],
                ),
            ],
        ),
        ("every policy deleted: everything allowed again", []),
    ]


def cmd_steps(_args):
    print(len(steps_stand_in()))


def steps_stand_in():
    """The steps for a made-up table (their number does not depend on it)."""
    table = {
        "namespaces": {"x": {"ns": "x"}, "y": {"ns": "y"}, "z": {"ns": "z"}},
        "pods": {"y/c": {"short": "y/c", "node": "n2", "ips": ["10.244.1.2"]}},
        "nodes": {"n1": {"podCIDRs": ["10.244.0.0/24"]}, "n2": {"podCIDRs": ["10.244.1.0/24"]}},
    }
    return steps_for(table)


def cmd_step(args):
    table = load_json(args.table)
    title, policies = steps_for(table)[args.n]
    print(title, file=sys.stderr)
    json.dump({"apiVersion": "v1", "kind": "List", "items": policies}, sys.stdout, indent=1)
    print()


# --- the probes ------------------------------------------------------------------

# Each probe: id, client, destination pod, kind, address, port, protocol.
#   kind pod:     IPv4 pod -> pod          pod6: IPv6 pod -> pod (TCP 80)
#   svc:          pod -> the Service's ClusterIP (judged on the backend)
#   host:         a node's network namespace -> pod
#   explain:      `sarena policy explain` (SCTP: no such traffic in this kernel)
TRAFFIC = [("TCP", 80), ("TCP", 81), ("UDP", 80)]
EXPLAIN = [("SCTP", 80)]


def probes_for(table):
    pods = table["pods"]
    keys = sorted(pods, key=lambda k: pods[k]["short"])
    out = []

    def add(client, dst, kind, addr, port, proto):
        out.append(
            {"id": f"p{len(out)}", "client": client, "dst": dst, "kind": kind, "addr": addr, "port": port, "proto": proto}
        )

    for s in keys:
        for d in keys:
            v4 = same_family(pods[d]["ips"], "0.0.0.0")
            for proto, port in TRAFFIC:
                add(s, d, "pod", v4, port, proto)
            v6 = same_family(pods[d]["ips"], "::")
            if v6 and same_family(pods[s]["ips"], "::"):
                add(s, d, "pod6", v6, 80, "TCP")
            for proto, port in EXPLAIN:
                add(s, d, "explain", "", port, proto)
        for svc in table["services"]:
            add(s, "svc:" + svc["ns"] + "/" + svc["name"], "svc", svc["ip"], svc["port"], svc["protocol"])
    for node in sorted(table["nodes"]):
        for d in keys:
            add("node:" + node, d, "host", same_family(pods[d]["ips"], "0.0.0.0"), 80, "TCP")
    return out


def cmd_plan(args):
    table = load_json(args.table)
    outdir = args.out
    only = None
    if args.only:
        with open(args.only, encoding="utf-8") as f:
            only = {line.split()[0] for line in f if line.strip()}
    os.makedirs(outdir, exist_ok=True)
    probes = probes_for(table)
    with open(os.path.join(outdir, "plan.json"), "w", encoding="utf-8") as f:
        json.dump(probes, f)
    clients, explain = {}, {}
    for p in probes:
        if only is not None and p["id"] not in only:
            continue
        if p["kind"] == "explain":
            src, dst = table["pods"][p["client"]], table["pods"][p["dst"]]
            line = f"{p['id']} {p['client']} {p['dst']} {p['port']}/{p['proto']}\n"
            for node in {src["node"], dst["node"]}:
                explain.setdefault(node, []).append(line)
        else:
            clients.setdefault(p["client"], []).append(f"{p['id']} {p['addr']} {p['port']} {p['proto']}\n")
    with open(os.path.join(outdir, "clients"), "w", encoding="utf-8") as lst:
        for i, (client, lines) in enumerate(sorted(clients.items())):
            if client.startswith("node:"):
                netns = "/run/netns/" + table["nodes"][client[len("node:"):]]["netns"]
            else:
                netns = f"/proc/{table['pods'][client]['pid']}/ns/net"
            path = os.path.join(outdir, f"client-{i}.in")
            with open(path, "w", encoding="utf-8") as f:
                f.writelines(lines)
            lst.write(f"{netns} {path}\n")
    for node in sorted(table["nodes"]):
        with open(os.path.join(outdir, f"explain-{node}.in"), "w", encoding="utf-8") as f:
            f.writelines(explain.get(node, []))


def source_address(family, addr, port):
    """The address the kernel would send from to ADDR (a connected UDP socket sends nothing)."""
    s = socket.socket(family, socket.SOCK_DGRAM)
    try:
        s.connect((addr, port))
        return s.getsockname()[0]
    except OSError:
        return "-"
    finally:
        s.close()


def probe_one(addr, port, proto, timeout):
    """(verdict, detail, source address)."""
    family = socket.AF_INET6 if ":" in addr else socket.AF_INET
    src = source_address(family, addr, port)
    if proto == "TCP":
        s = socket.socket(family, socket.SOCK_STREAM)
        s.settimeout(timeout)
        try:
            s.connect((addr, port))
            return "allow", "connected", src
        except ConnectionRefusedError:
            return "deny", "refused", src
        except socket.timeout:
            return "deny", "timeout", src
        except OSError as e:
            return "deny", f"error:{e.errno}", src
        finally:
            s.close()
    # UDP: the server answers every datagram with its hostname; a datagram
    # every third of the timeout, the verdict on the first answer
    s = socket.socket(family, socket.SOCK_DGRAM)
    deadline = time.monotonic() + timeout
    try:
        s.connect((addr, port))
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return "deny", "timeout", src
            s.send(b"hostname?")
            s.settimeout(min(left, timeout / 3))
            try:
                s.recv(512)
                return "allow", "answered", src
            except socket.timeout:
                continue
    except ConnectionRefusedError:
        return "deny", "refused", src
    except OSError as e:
        return "deny", f"error:{e.errno}", src
    finally:
        s.close()


def cmd_probe(args):
    timeout = args.timeout
    jobs = [line.split() for line in sys.stdin if line.strip()]
    results = [None] * len(jobs)

    def run(i, job):
        pid, addr, port, proto = job
        results[i] = (pid,) + probe_one(addr, int(port), proto, timeout)

    threads = [threading.Thread(target=run, args=(i, j)) for i, j in enumerate(jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for r in results:
        print(" ".join(r))


def cmd_explain(args):
    cli, node = args.cli, args.node
    jobs = [line.split() for line in sys.stdin if line.strip()]
    results = [None] * len(jobs)
    sem = threading.Semaphore(8)

    def run(i, job):
        pid, src, dst, port = job
        with sem:
            p = subprocess.run(
                [cli, "--timeout=5", "-o", "json", "policy", "explain", "--from", src, "--to", dst, "--port", port],
                capture_output=True,
                text=True,
                check=False,
            )
        detail = "-"
        try:
            e = json.loads(p.stdout)
            verdict = "allow" if e["allowed"] else "deny"
            sides = []
            for side in ("egress", "ingress"):
                d = e.get(side)
                sides.append(f"{side}={d['verdict'] if d else 'elsewhere'}")
            detail = ",".join(sides)
            if (p.returncode == 0) != e["allowed"]:
                verdict, detail = "error", f"exit-{p.returncode}-but-allowed={e['allowed']}"
        except (ValueError, KeyError, TypeError):
            verdict = "error"
            detail = "exit-%d:%s" % (p.returncode, (p.stderr.strip().splitlines() or ["?"])[-1].replace(" ", "_")[:120])
        results[i] = (pid, verdict, detail, node)

    threads = [threading.Thread(target=run, args=(i, j)) for i, j in enumerate(jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for r in results:
        print(" ".join(r))


# --- the verdict -------------------------------------------------------------------


def expected(world, table, policies, probe, src_addr):
    kind, client, dst = probe["kind"], probe["client"], probe["dst"]
    if kind == "svc":
        svc = next(s for s in table["services"] if "svc:" + s["ns"] + "/" + s["name"] == dst)
        if len(svc["backends"]) != 1:
            raise ValueError(f"{dst}: the model wants exactly one backend")
        backend = svc["backends"][0]
        if client == backend:
            return True, "hairpin (masqueraded)"
        return decide(world, policies, client, backend, int(svc["targetPort"]), svc["protocol"])
    family = 6 if kind == "pod6" else 4
    return decide(
        world,
        policies,
        client,
        dst,
        probe["port"],
        probe["proto"],
        family=family,
        src_ip=src_addr if kind == "host" else None,
        loopback=kind != "explain",
    )


COLUMNS = [("pod", "TCP", 80), ("pod", "TCP", 81), ("pod", "UDP", 80), ("pod6", "TCP", 80), ("explain", "SCTP", 80)]


def cmd_judge(args):
    table, world = load_table(args.table)
    doc = load_json(args.policies)
    policies = doc["items"] if "items" in doc else doc
    with open(os.path.join(args.plan, "plan.json"), encoding="utf-8") as f:
        probes = json.load(f)
    kinds = {p["id"]: p["kind"] for p in probes}
    got = {}
    for path in args.results:
        with open(path, encoding="utf-8") as f:
            for line in f:
                if not line.strip():
                    continue
                pid, verdict, detail, src = line.split()
                got.setdefault(pid, {})[src if kinds.get(pid) == "explain" else "-"] = (verdict, detail, src)
    retried = set()
    if args.retried and os.path.exists(args.retried):
        with open(args.retried, encoding="utf-8") as f:
            retried = {line.split()[0] for line in f if line.strip()}
    pods = table["pods"]
    short = {k: p["short"] for k, p in pods.items()}
    rows = []
    mismatches = []
    cells = {}
    for p in probes:
        answers = got.get(p["id"])
        if not answers:
            g_ok, g_detail, src = None, "no result", None
        elif p["kind"] == "explain":
            vals = list(answers.values())
            g_ok = None if any(v[0] == "error" for v in vals) else all(v[0] == "allow" for v in vals)
            g_detail = ";".join(f"{n}:{v[0]}({v[1]})" for n, v in sorted(answers.items()))
            src = None
        else:
            v = answers["-"]
            g_ok, g_detail, src = v[0] == "allow", v[1], v[2]
        if p["kind"] == "host" and src in (None, "-"):
            src = table["nodes"][p["client"][len("node:"):]]["ips"][0]
        want, why = expected(world, table, policies, p, src)
        cells[(p["client"], p["dst"], p["kind"], p["proto"], p["port"])] = (want, g_ok)
        if g_ok != want:
            mismatches.append((p, want, g_ok, g_detail, why, src))
    # the table: a row per client, a column per destination pod, a cell per
    # TCP80 TCP81 UDP80 TCP80/IPv6 SCTP80(explain): + allowed, . denied,
    # ! not as expected, - not probed; then the Service column and the hosts
    keys = sorted(pods, key=lambda k: short[k])
    title = args.title
    quiet = args.quiet
    out = []
    if title:
        out.append(f"== {title}")
    svcs = [("svc:" + s["ns"] + "/" + s["name"], s) for s in table["services"]]
    head = "      " + " ".join(f"{short[k]:<5}" for k in keys)
    head += "  " + " ".join(f"svc->{short[s['backends'][0]]}" if len(s["backends"]) == 1 else "svc" for _, s in svcs)
    out.append(head)

    def mark(cell):
        if cell is None:
            return "-"
        want, g = cell
        if g != want:
            return "!"
        return "+" if want else "."

    for s in keys:
        row = f"{short[s]:<5} "
        row += " ".join(
            "".join(mark(cells.get((s, d, kind, proto, port))) for kind, proto, port in COLUMNS) for d in keys
        )
        row += "  " + " ".join(f"{mark(cells.get((s, sid, 'svc', s_['protocol'], s_['port']))):<8}" for sid, s_ in svcs)
        out.append(row.rstrip())
    for node in sorted(table["nodes"]):
        label = "n" + str(sorted(table["nodes"]).index(node) + 1)
        row = f"{label:<5} "
        row += " ".join(f"{mark(cells.get(('node:' + node, d, 'host', 'TCP', 80))):<5}" for d in keys)
        out.append(row.rstrip())
    n = len(probes)
    late = len([p for p in probes if p["id"] in retried]) - len(mismatches)
    out.append(
        f"   cells: TCP80 TCP81 UDP80 TCP80/IPv6 SCTP80(policy explain); rows n1 n2: the nodes -> TCP 80 "
        f"(+ allowed, . denied, ! not as the model says, - not probed)"
    )
    out.append(
        f"   {n} probes, {n - len(mismatches)} as expected, {len(mismatches)} not"
        + (f" ({late} right only on the retry)" if retried else "")
    )
    for p, want, g_ok, g_detail, why, src in mismatches:
        dst = short.get(p["dst"], p["dst"])
        if p["kind"] == "svc":
            svc = next(s_ for sid, s_ in svcs if sid == p["dst"])
            dst = "Service " + "/".join(short[b] for b in svc["backends"])
        client = short.get(p["client"], p["client"])
        if client.startswith("node:"):
            client = f"{client} ({src})"
        verdict = {True: "allow", False: "deny", None: "error"}
        out.append(
            f"   MISMATCH {client} -> {dst} {p['kind']} {p['addr']} {p['port']}/{p['proto']}: "
            f"expected {verdict[want]} ({why}), got {verdict[g_ok]} ({g_detail})"
        )
    if not quiet:
        print("\n".join(out))
    if args.mismatches:
        with open(args.mismatches, "w", encoding="utf-8") as f:
            for p, *_ in mismatches:
                f.write(p["id"] + "\n")
    sys.exit(1 if mismatches else 0)


# --- self-test -------------------------------------------------------------------


def cmd_selftest(_args):
    def pod(ns, name, node, ips, c_swap=False):
        names = ("serve-81", "serve-80-tcp") if c_swap else ("serve-80-tcp", "serve-81")
        return {
            "ns": ns,
            "name": name,
            "short": f"{ns[0]}/{name}",
            "labels": {"pod": name},
            "ips": ips,
            "node": node,
            "ports": [
                {"name": names[0], "port": 80, "protocol": "TCP"},
                {"name": "serve-80-udp", "port": 80, "protocol": "UDP"},
                {"name": "serve-80-sctp", "port": 80, "protocol": "SCTP"},
                {"name": names[1], "port": 81, "protocol": "TCP"},
            ],
        }

    pods = {
        "x1/a": pod("x1", "a", "n1", ["10.244.0.10", "fd00:10:244::a"]),
        "x1/b": pod("x1", "b", "n2", ["10.244.1.11", "fd00:10:244:1::b"]),
        "x1/c": pod("x1", "c", "n1", ["10.244.0.12"], c_swap=True),
        "y1/a": pod("y1", "a", "n2", ["10.244.1.20"]),
        "y1/c": pod("y1", "c", "n2", ["10.244.1.22"], c_swap=True),
        "z1/b": pod("z1", "b", "n2", ["10.244.1.31"]),
    }
    namespaces = {"x1": {"ns": "x"}, "y1": {"ns": "y"}, "z1": {"ns": "z", "extra": "1"}}
    world = World(pods, namespaces)

    def np(ns, sel, types=None, ingress=None, egress=None, name="p"):
        spec = {"podSelector": sel}
        if types is not None:
            spec["policyTypes"] = types
        if ingress is not None:
            spec["ingress"] = ingress
        if egress is not None:
            spec["egress"] = egress
        return {"metadata": {"namespace": ns, "name": name}, "spec": spec}

    failures = []

    def check(label, policies, src, dst, port, proto, want, **kw):
        ok, why = decide(world, policies, src, dst, port, proto, **kw)
        if ok != want:
            failures.append(f"{label}: {src} -> {dst} {port}/{proto}: got {ok} ({why}), want {want}")

    # selectors
    assert selector_matches({}, {})
    assert selector_matches({"matchLabels": {"a": "1"}}, {"a": "1", "b": "2"})
    assert not selector_matches({"matchLabels": {"a": "1"}}, {"a": "2"})
    assert selector_matches({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]}, {})
    assert not selector_matches({"matchExpressions": [{"key": "a", "operator": "In", "values": ["1"]}]}, {})
    assert selector_matches({"matchExpressions": [{"key": "a", "operator": "Exists"}]}, {"a": ""})
    assert selector_matches({"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]}, {"b": "1"})
    assert not selector_matches(
        {"matchLabels": {"pod": "a"}, "matchExpressions": [{"key": "pod", "operator": "In", "values": ["b"]}]}, {"pod": "a"}
    )
    # policyTypes defaulting
    assert policy_types(np("x1", {})) == {"Ingress"}
    assert policy_types(np("x1", {}, egress=[{}])) == {"Ingress", "Egress"}
    assert policy_types(np("x1", {}, egress=[])) == {"Ingress"}
    assert policy_types(np("x1", {}, types=["Egress"])) == {"Egress"}

    # no policy: all open
    check("open", [], "x1/a", "y1/a", 81, "UDP", True)
    # default deny ingress in x
    deny = np("x1", {}, ["Ingress"])
    check("deny", [deny], "y1/a", "x1/a", 80, "TCP", False)
    check("deny: other namespaces open", [deny], "x1/a", "y1/a", 80, "TCP", True)
    check("deny: loopback", [deny], "x1/a", "x1/a", 80, "TCP", True)
    check("deny: explain has no loopback", [deny], "x1/a", "x1/a", 80, "SCTP", False, loopback=False)
    check("deny: own node", [deny], "node:n1", "x1/a", 80, "TCP", True, src_ip="172.30.0.11")
    check("deny: other node", [deny], "node:n2", "x1/a", 80, "TCP", False, src_ip="172.30.0.12")
    # a policy with no types and no rules: ingress deny (default type)
    check("untyped", [np("x1", {"matchLabels": {"pod": "a"}})], "y1/a", "x1/a", 80, "TCP", False)
    check("untyped: other pod", [np("x1", {"matchLabels": {"pod": "a"}})], "y1/a", "x1/b", 80, "TCP", True)
    # podSelector alone: the policy's namespace only
    from_b = np("x1", {}, ingress=[{"from": [{"podSelector": {"matchLabels": {"pod": "b"}}}]}])
    check("podSelector", [from_b], "x1/b", "x1/a", 81, "TCP", True)
    check("podSelector: not other ns", [from_b], "z1/b", "x1/a", 81, "TCP", False)
    # namespaceSelector alone
    from_z = np("x1", {}, ingress=[{"from": [{"namespaceSelector": {"matchLabels": {"ns": "z"}}}], "ports": [{"port": 80}]}])
    check("nsSelector", [from_z], "z1/b", "x1/a", 80, "TCP", True)
    check("nsSelector: TCP default, not UDP", [from_z], "z1/b", "x1/a", 80, "UDP", False)
    check("nsSelector: port", [from_z], "z1/b", "x1/a", 81, "TCP", False)
    check("nsSelector: own ns not selected", [from_z], "x1/b", "x1/a", 80, "TCP", False)
    # both in one peer vs two peers
    ns_y_pod_c = {"namespaceSelector": {"matchLabels": {"ns": "y"}}, "podSelector": {"matchLabels": {"pod": "c"}}}
    both = np("x1", {}, ingress=[{"from": [ns_y_pod_c]}])
    check("AND", [both], "y1/c", "x1/a", 80, "TCP", True)
    check("AND: wrong pod", [both], "y1/a", "x1/a", 80, "TCP", False)
    check("AND: wrong ns", [both], "x1/c", "x1/a", 80, "TCP", False)
    two = np(
        "x1",
        {},
        ingress=[{"from": [{"namespaceSelector": {"matchLabels": {"ns": "y"}}}, {"podSelector": {"matchLabels": {"pod": "c"}}}]}],
    )
    check("OR: ns", [two], "y1/a", "x1/a", 80, "TCP", True)
    check("OR: pod", [two], "x1/c", "x1/a", 80, "TCP", True)
    check("OR: neither", [two], "z1/b", "x1/a", 80, "TCP", False)
    # ipBlock with except, pod addresses and node addresses
    blk = np(
        "x1",
        {},
        ingress=[{"from": [{"ipBlock": {"cidr": "10.244.1.0/24", "except": ["10.244.1.22/32"]}}], "ports": [{"port": "serve-81"}]}],
    )
    check("ipBlock", [blk], "y1/a", "x1/a", 81, "TCP", True)
    check("ipBlock: except", [blk], "y1/c", "x1/a", 81, "TCP", False)
    check("ipBlock: named port resolved on x/c", [blk], "y1/a", "x1/c", 80, "TCP", True)
    check("ipBlock: named port x/c 81", [blk], "y1/a", "x1/c", 81, "TCP", False)
    check("ipBlock: not v6", [blk], "x1/b", "x1/a", 80, "TCP", False, family=6)
    check("ipBlock: node outside", [blk], "node:n2", "x1/a", 81, "TCP", False, src_ip="172.30.0.12")
    check("ipBlock: node inside", [blk], "node:n2", "x1/a", 81, "TCP", True, src_ip="10.244.1.1")
    # named UDP port, protocol must match
    udp = np("x1", {}, ingress=[{"ports": [{"protocol": "UDP", "port": "serve-80-udp"}]}])
    check("named UDP", [udp], "z1/b", "x1/a", 80, "UDP", True)
    check("named UDP: TCP", [udp], "z1/b", "x1/a", 80, "TCP", False)
    wrong = np("x1", {}, ingress=[{"ports": [{"protocol": "TCP", "port": "serve-80-udp"}]}])
    check("named, wrong protocol", [wrong], "z1/b", "x1/a", 80, "TCP", False)
    # endPort
    rng = np("x1", {}, ingress=[{"from": [{"namespaceSelector": {}}], "ports": [{"port": 80, "endPort": 81}]}])
    check("endPort 81", [rng], "z1/b", "x1/a", 81, "TCP", True)
    check("endPort 80", [rng], "z1/b", "x1/a", 80, "TCP", True)
    check("endPort UDP", [rng], "z1/b", "x1/a", 80, "UDP", False)
    check("endPort 82", [rng], "z1/b", "x1/a", 82, "TCP", False)
    # a port with a protocol and no number
    anysctp = np("x1", {}, ingress=[{"ports": [{"protocol": "SCTP"}]}])
    check("any SCTP port", [anysctp], "z1/b", "x1/a", 9, "SCTP", True)
    check("any SCTP port: TCP", [anysctp], "z1/b", "x1/a", 9, "TCP", False)
    # empty rule: everything
    check("empty rule", [np("x1", {}, ingress=[{}])], "z1/b", "x1/a", 1, "UDP", True)
    # rules of several policies are ORed
    check("union", [deny, from_b], "x1/b", "x1/a", 80, "TCP", True)
    # egress
    deny_e = np("z1", {}, ["Egress"])
    to_x80 = np("z1", {}, egress=[{"to": [{"namespaceSelector": {"matchLabels": {"ns": "x"}}}], "ports": [{"port": 80}]}])
    check("egress deny", [deny_e], "z1/b", "y1/a", 80, "TCP", False)
    check("egress deny: host ingress unaffected", [deny_e], "node:n2", "z1/b", 80, "TCP", True, src_ip="172.30.0.12")
    check("egress deny: ingress to z open", [deny_e], "y1/a", "z1/b", 80, "TCP", True)
    check("egress allow", [deny_e, to_x80], "z1/b", "x1/a", 80, "TCP", True)
    check("egress allow v6", [deny_e, to_x80], "x1/a", "x1/b", 80, "TCP", True, family=6)
    check("egress port", [deny_e, to_x80], "z1/b", "x1/a", 81, "TCP", False)
    named_e = np("z1", {}, ["Egress"], egress=[{"ports": [{"port": "serve-81"}]}])
    check("egress named on the peer: x/a 81", [named_e], "z1/b", "x1/a", 81, "TCP", True)
    check("egress named on the peer: x/c 80", [named_e], "z1/b", "x1/c", 80, "TCP", True)
    check("egress named on the peer: x/c 81", [named_e], "z1/b", "x1/c", 81, "TCP", False)
    blk_e = np("z1", {}, ["Egress"], egress=[{"to": [{"ipBlock": {"cidr": "10.244.0.0/16", "except": ["10.244.1.0/24"]}}]}])
    check("egress ipBlock", [blk_e], "z1/b", "x1/a", 80, "UDP", True)
    check("egress ipBlock except", [blk_e], "z1/b", "y1/a", 80, "UDP", False)
    # both ends must allow
    ns_z_pod_b = {"namespaceSelector": {"matchLabels": {"ns": "z"}}, "podSelector": {"matchLabels": {"pod": "b"}}}
    x_from_zb = np("x1", {}, ingress=[{"from": [ns_z_pod_b], "ports": [{"port": "serve-81"}]}])
    check("both: egress yes ingress no", [deny_e, to_x80, x_from_zb], "z1/b", "x1/a", 80, "TCP", False)
    check("both: egress no ingress yes", [deny_e, to_x80, x_from_zb], "z1/b", "x1/a", 81, "TCP", False)
    check("both: yes", [deny_e, to_x80, x_from_zb], "z1/b", "x1/c", 80, "TCP", True)
    # isolated both ways, no rules
    iso = np("y1", {"matchLabels": {"pod": "c"}}, ["Ingress", "Egress"])
    check("isolated: out", [iso], "y1/c", "x1/a", 80, "TCP", False)
    check("isolated: in", [iso], "x1/a", "y1/c", 80, "TCP", False)
    check("isolated: own node", [iso], "node:n2", "y1/c", 80, "TCP", True, src_ip="172.30.0.12")
    # a policy of another namespace selects nothing here
    check("other namespace", [np("y1", {}, ["Ingress"])], "z1/b", "x1/a", 80, "TCP", True)
    # the steps build for a plausible table
    assert len(steps_stand_in()) >= 7
    if failures:
        print("\n".join(failures))
        print(f"selftest: {len(failures)} failed")
        sys.exit(1)
    print("selftest: ok")


# --- command line ----------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    sub.add_parser("selftest").set_defaults(func=cmd_selftest)
    p = sub.add_parser("table")
    for name in ("pods", "namespaces", "nodes", "services", "pids", "netns"):
        p.add_argument(name)
    p.set_defaults(func=cmd_table)
    sub.add_parser("steps").set_defaults(func=cmd_steps)
    p = sub.add_parser("step")
    p.add_argument("n", type=int)
    p.add_argument("--table", required=True)
    p.set_defaults(func=cmd_step)
    p = sub.add_parser("plan")
    p.add_argument("--table", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--only")
    p.set_defaults(func=cmd_plan)
    p = sub.add_parser("probe")
    p.add_argument("--timeout", type=float, default=1.0)
    p.set_defaults(func=cmd_probe)
    p = sub.add_parser("explain")
    p.add_argument("--cli", required=True)
    p.add_argument("--node", required=True)
    p.set_defaults(func=cmd_explain)
    p = sub.add_parser("judge")
    p.add_argument("--table", required=True)
    p.add_argument("--policies", required=True)
    p.add_argument("--plan", required=True)
    p.add_argument("--results", nargs="+", required=True)
    p.add_argument("--retried")
    p.add_argument("--title", default="")
    p.add_argument("--mismatches")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=cmd_judge)
    args = ap.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
