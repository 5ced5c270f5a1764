"""What the e2e/k8s benchmark helpers share (python3 stdlib only): a client
of the API server from an admin kubeconfig ([`Api`]), HTTP over a daemon's
Unix socket ([`UnixHTTPConnection`]), nearest-rank percentiles ([`pct`]),
and what makes a "ghost" Node (no kubelet) and the pods bound to it
([`GHOST_TAINT`], [`TOLERATIONS`]).
Imported by bench-policy-cluster.py and bench-node-scale.py, which run with
this directory first on sys.path."""

import base64
import http.client
import json
import socket
import ssl
import threading
import time


# The taint of the Node objects no kubelet runs: nothing is scheduled there.
GHOST_TAINT = {"key": "sarena.bench/ghost", "effect": "NoSchedule"}
TOLERATIONS = [
    # no tolerationSeconds: never evicted from the kubelet-less nodes
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
    {"key": "sarena.bench/ghost", "operator": "Exists", "effect": "NoSchedule"},
]


class Api:
    """The admin kubeconfig's server, token and CA; one connection per thread."""

    def __init__(self, kubeconfig):
        server = token = ca = None
        with open(kubeconfig) as f:
            for line in f:
                s = line.strip()
                if s.startswith("server:"):
                    server = s.split(":", 1)[1].strip()
                elif s.startswith("token:"):
                    token = s.split(":", 1)[1].strip()
                elif s.startswith("certificate-authority-data:"):
                    ca = base64.b64decode(s.split(":", 1)[1].strip()).decode()
        if not (server and token and ca):
            raise SystemExit(f"{kubeconfig}: no server, token or CA data")
        hostport = server.split("://", 1)[1].rstrip("/")
        self.host, _, port = hostport.partition(":")
        self.port = int(port or 443)
        self.token = token
        self.ctx = ssl.create_default_context(cadata=ca)
        self.local = threading.local()

    def _headers(self, ctype=None):
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
        if ctype is not None:
            headers["Content-Type"] = ctype
        return headers

    def _conn(self):
        c = getattr(self.local, "conn", None)
        if c is None:
            c = http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=60)
            self.local.conn = c
        return c

    def request(self, method, path, body=None, ctype="application/json"):
        """(status, parsed body); retried on connection errors, 429 and 5xx."""
        data = None if body is None else json.dumps(body).encode()
        headers = self._headers(ctype if data is not None else None)
        for attempt in range(30):
            try:
                c = self._conn()
                c.request(method, path, body=data, headers=headers)
                r = c.getresponse()
                raw = r.read()
            except (OSError, http.client.HTTPException):
                self.local.conn = None
                time.sleep(min(0.1 * (attempt + 1), 2))
                continue
            status = r.status
            # 403 right after a namespace exists: its default ServiceAccount
            # is not there yet (the admission plugin refuses pods until then)
            retry = status == 429 or status >= 500 or (status == 403 and b"serviceaccount" in raw.lower())
            if retry:
                time.sleep(min(0.1 * (attempt + 1), 2))
                continue
            try:
                parsed = json.loads(raw) if raw else None
            except ValueError:
                parsed = raw.decode(errors="replace")
            return status, parsed
        raise RuntimeError(f"{method} {path}: no answer after 30 attempts")

    def create(self, path, obj):
        """POST; an existing object (409) counts as done. True if created."""
        status, body = self.request("POST", path, obj)
        if status == 409:
            return False
        if status >= 300:
            raise RuntimeError(f"POST {path}: {status} {body}")
        return True

    def delete(self, path):
        """DELETE; an object already gone (404) counts as done. True if deleted."""
        status, body = self.request("DELETE", path)
        if status == 404:
            return False
        if status >= 300:
            raise RuntimeError(f"DELETE {path}: {status} {body}")
        return True

    def watch(self, path, resource_version):
        """The watch events of PATH (a collection) from RESOURCE_VERSION, as
        (type, object) pairs, on a connection of its own; ends when the
        server closes the stream (the caller lists and watches again)."""
        c = http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=None)
        sep = "&" if "?" in path else "?"
        c.request("GET", f"{path}{sep}watch=1&resourceVersion={resource_version}&timeoutSeconds=3600",
                  headers=self._headers())
        r = c.getresponse()
        if r.status != 200:
            raise RuntimeError(f"watch {path}: {r.status} {r.read()[:200]!r}")
        try:
            while True:
                line = r.readline()
                if not line:
                    return
                event = json.loads(line)
                yield event["type"], event["object"]
        finally:
            c.close()


class UnixHTTPConnection(http.client.HTTPConnection):
    """HTTP over the Unix socket at PATH (a daemon's API)."""

    def __init__(self, path):
        super().__init__("localhost", timeout=10)
        self.path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(10)
        s.connect(self.path)
        self.sock = s


def pct(values, p):
    """Nearest-rank percentile."""
    if not values:
        return None
    v = sorted(values)
    rank = max(1, -(-len(v) * p // 100))
    return round(v[int(rank) - 1], 1)
