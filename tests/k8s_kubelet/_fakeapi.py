"""A faithful fake of the Kubernetes API server for the paths the kubelet plugin uses.

``/api/v1/nodes/NAME`` (get) and ``resource.k8s.io/v1``: list (with ``fieldSelector`` on
``spec.driver`` and ``spec.nodeName``), create, replace (``metadata.resourceVersion`` must
match: 409 otherwise) and delete ResourceSlices; get ResourceClaims.  Every object it
receives, and every claim and node a test puts in, is validated with ``kubernetes-validate
--strict`` against the Kubernetes 1.37 schema (422 with the reason when it fails): "checked
object by object against the schema".  Errors are ``Status`` objects as the real server sends
them.  ``start_hanging`` makes every request wait until ``stop_hanging`` (a hung API server).
"""

from __future__ import annotations

import json
import re
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import kubernetes_validate as kv

SCHEMA_VERSION = "1.37.0"
_SLICES = "/apis/resource.k8s.io/v1/resourceslices"
_SLICE = re.compile(r"^/apis/resource\.k8s\.io/v1/resourceslices/([^/]+)$")
_NODE = re.compile(r"^/api/v1/nodes/([^/]+)$")
_CLAIM = re.compile(r"^/apis/resource\.k8s\.io/v1/namespaces/([^/]+)/resourceclaims/([^/]+)$")


def validate(obj: dict[str, Any]) -> None:
    """Raise kubernetes_validate.ValidationError unless ``obj`` passes the 1.37 schema, strictly."""
    kv.validate(obj, SCHEMA_VERSION, strict=True)


class FakeApiServer:
    def __init__(self) -> None:
        self.slices: dict[str, dict[str, Any]] = {}
        self.claims: dict[tuple[str, str], dict[str, Any]] = {}
        self.nodes: dict[str, dict[str, Any]] = {}
        #: Every (method, path, body) received, in order.
        self.requests: list[tuple[str, str, dict[str, Any] | None]] = []
        self.validated = 0
        self.hang = threading.Event()  # set: requests wait until it is cleared
        self._released = threading.Event()
        self._released.set()
        self.lock = threading.Lock()
        self._version = 100
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _body(self) -> dict[str, Any] | None:
                n = int(self.headers.get("Content-Length") or 0)
                return json.loads(self.rfile.read(n)) if n else None

            def _send(self, status: int, obj: dict[str, Any]) -> None:
                data = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _handle(self, method: str) -> None:
                body = self._body()
                url = urlparse(self.path)
                fake.requests.append((method, url.path, body))
                if fake.hang.is_set():
                    fake._released.wait(60)
                status, obj = fake.answer(method, url.path, parse_qs(url.query), body)
                self._send(status, obj)

            def do_GET(self) -> None:
                self._handle("GET")

            def do_POST(self) -> None:
                self._handle("POST")

            def do_PUT(self) -> None:
                self._handle("PUT")

            def do_DELETE(self) -> None:
                self._handle("DELETE")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()

    # -- control ------------------------------------------------------------------------------

    def start_hanging(self) -> None:
        self._released.clear()
        self.hang.set()

    def stop_hanging(self) -> None:
        self.hang.clear()
        self._released.set()

    def close(self) -> None:
        self.stop_hanging()
        self.httpd.shutdown()
        self.httpd.server_close()

    def kubeconfig(self, path: Path) -> Path:
        path.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "fake",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "fake", "user": {"token": "t"}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}],
        }))
        return path

    def add_node(self, name: str) -> str:
        """A Node object; returns its uid."""
        node = {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "uid": str(uuid.uuid4()), "resourceVersion": self._next()}}
        validate(node)
        with self.lock:
            self.nodes[name] = node
        return str(node["metadata"]["uid"])

    def add_claim(self, namespace: str, name: str, results: list[dict[str, str]], *,
                  uid: str | None = None, allocated: bool = True) -> str:
        """A ResourceClaim allocated ``results`` ({request, driver, pool, device}); returns its uid."""
        uid = uid or str(uuid.uuid4())
        requests = sorted({r["request"] for r in results}) or ["req"]
        claim: dict[str, Any] = {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": namespace, "uid": uid, "resourceVersion": self._next()},
            "spec": {"devices": {"requests": [
                {"name": r, "exactly": {"deviceClassName": "gpu.nvidia.accel.dev"}} for r in requests]}},
        }
        if allocated:
            claim["status"] = {"allocation": {"devices": {"results": results}}}
        validate(claim)
        with self.lock:
            self.claims[(namespace, name)] = claim
        return uid

    # -- the API ------------------------------------------------------------------------------

    def _next(self) -> str:
        self._version += 1
        return str(self._version)

    @staticmethod
    def _status(code: int, reason: str, message: str) -> tuple[int, dict[str, Any]]:
        return code, {"apiVersion": "v1", "kind": "Status", "status": "Failure", "message": message,
                      "reason": reason, "code": code}

    def _check(self, obj: dict[str, Any] | None) -> tuple[int, dict[str, Any]] | None:
        if obj is None:
            return self._status(400, "BadRequest", "no body")
        try:
            validate(obj)
        except kv.ValidationError as exc:
            return self._status(422, "Invalid", f"schema: {exc}")
        self.validated += 1
        return None

    def answer(self, method: str, path: str, query: dict[str, list[str]],
               body: dict[str, Any] | None) -> tuple[int, dict[str, Any]]:
        with self.lock:
            m = _NODE.match(path)
            if m and method == "GET":
                node = self.nodes.get(m.group(1))
                if node is None:
                    return self._status(404, "NotFound", f'nodes "{m.group(1)}" not found')
                return 200, node
            m = _CLAIM.match(path)
            if m and method == "GET":
                claim = self.claims.get((m.group(1), m.group(2)))
                if claim is None:
                    return self._status(404, "NotFound", f'resourceclaims.resource.k8s.io "{m.group(2)}" not found')
                return 200, claim
            if path == _SLICES and method == "GET":
                wanted = {}
                for term in ",".join(query.get("fieldSelector", [])).split(","):
                    if term:
                        key, _, value = term.partition("=")
                        wanted[key] = value
                items = [s for s in self.slices.values()
                         if all(s["spec"].get(k.removeprefix("spec.")) == v for k, v in wanted.items())]
                return 200, {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSliceList",
                             "metadata": {"resourceVersion": str(self._version)}, "items": items}
            if path == _SLICES and method == "POST":
                bad = self._check(body)
                if bad:
                    return bad
                assert body is not None
                name = body["metadata"]["name"]
                if name in self.slices:
                    return self._status(409, "AlreadyExists", f'resourceslices "{name}" already exists')
                if body["metadata"].get("resourceVersion"):
                    return self._status(422, "Invalid", "resourceVersion must not be set on create")
                stored = json.loads(json.dumps(body))
                stored["metadata"] |= {"uid": str(uuid.uuid4()), "resourceVersion": self._next()}
                self.slices[name] = stored
                return 201, stored
            m = _SLICE.match(path)
            if m and method == "PUT":
                bad = self._check(body)
                if bad:
                    return bad
                assert body is not None
                name = m.group(1)
                if body["metadata"]["name"] != name:
                    return self._status(400, "BadRequest", "name in the body differs from the path")
                old = self.slices.get(name)
                if old is None:
                    return self._status(404, "NotFound", f'resourceslices "{name}" not found')
                if body["metadata"].get("resourceVersion") != old["metadata"]["resourceVersion"]:
                    return self._status(409, "Conflict", f'the object "{name}" has been modified')
                stored = json.loads(json.dumps(body))
                stored["metadata"] |= {"uid": old["metadata"]["uid"], "resourceVersion": self._next()}
                self.slices[name] = stored
                return 200, stored
            if m and method == "DELETE":
                if self.slices.pop(m.group(1), None) is None:
                    return self._status(404, "NotFound", f'resourceslices "{m.group(1)}" not found')
                return 200, {"apiVersion": "v1", "kind": "Status", "status": "Success", "code": 200}
            return self._status(404, "NotFound", f"{method} {path}: not served by this fake")
