"""Serving replicas that run the group's own engine command (``accel serve --executor local`` / ``slurm``).

The port convention (decided here, documented in ``docs/serving.md``): **the service chooses each
replica's port and hands it to the engine command**, in two ways at once, so that any engine can
take it:

- the literal ``{port}`` in any argument of the command is replaced by the port (``vllm serve M
  --port {port}``, ``accel router fake-engine --listen 127.0.0.1:{port}``); only this exact token
  is replaced (no ``str.format``: a JSON argument's own braces stay as they are);
- the environment variable ``ACCEL_REPLICA_PORT`` holds it (an engine started by a wrapper script).

A group that declares KV events (``engine.kv_events``) gets a second port the same way:
``{kv_port}`` and ``ACCEL_REPLICA_KV_PORT``, for vLLM's ``--kv-events-config '{"enable_kv_cache_events":
true, "publisher": "zmq", "endpoint": "tcp://*:{kv_port}"}'``; the replica's KV-event endpoint is
then ``tcp://HOST:KV_PORT``.

Why the service chooses, rather than the engine binding port 0 and reporting back: vLLM's server
takes a port and reports nothing a scheduler can read (SkyPilot and dstack likewise have the user
declare the port the replica command binds: SkyPilot's ``service.replica_port`` / ``resources.ports``,
dstack's service ``port``), and a report back needs a file system shared with the node (Slurm's
nodes may have none).  One port per replica job, fixed for its life (a replica requeued after a
preemption keeps it), so the replica's URL is ``http://<node address>:<port>``, the node's address
from the executor (:class:`~accel.service.executors.NodeAddresses`: loopback for ``local``, the
node's ``NodeAddr`` for ``slurm``).  The port is one the service host's kernel gave as free and
no other replica of an active group holds; on another node it may be taken: the engine then fails
to bind, its job ends before it was ever healthy, and the replica is replaced on a new port (a
group whose replicas keep failing that way ends, ``failed``).

Readiness: ``GET <url><health_path>`` (vLLM's ``/health``) answering 200; until then the replica
is not routed to.  A replica not healthy ``ready_timeout_s`` after its job started is cancelled
(and counted as a failure).  A ready replica is checked again every :data:`RECHECK_S`; after
:data:`UNHEALTHY_AFTER` failed checks in a row it is not ready (the router drops it) until a check
passes again.
"""

from __future__ import annotations

import contextlib
import http.client
import math
import socket
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ._jobreq import RequestError

__all__ = ["KV_PORT_ENV", "KV_PORT_TOKEN", "PORT_ENV", "PORT_TOKEN", "RECHECK_S", "UNHEALTHY_AFTER", "fill",
           "healthy", "parse_command_engine", "pick_ports", "replica_url"]

PORT_TOKEN = "{port}"
KV_PORT_TOKEN = "{kv_port}"
PORT_ENV = "ACCEL_REPLICA_PORT"
KV_PORT_ENV = "ACCEL_REPLICA_KV_PORT"
#: Seconds between checks of a ready replica.
RECHECK_S = 2.0
#: Failed checks in a row that make a ready replica not ready.
UNHEALTHY_AFTER = 3
#: One health check's timeout (connect and answer).
CHECK_TIMEOUT_S = 1.0
_MAX_HEALTH_PATH = 200
_COMMAND_ENGINE = {"kv_events": False, "ready_timeout_s": 600.0, "health_path": "/health"}


def parse_command_engine(value: Any, command: Sequence[Any]) -> dict[str, Any]:
    """The options of a group that runs its own engine command: ``kv_events`` (bool, default
    false: the group declares a KV-event port), ``ready_timeout_s`` (1 to 86400, default 600),
    ``health_path`` (default ``/health``).  ``command`` is checked for the port tokens."""
    if value is None:
        value = {}
    if not isinstance(value, Mapping) or set(value) - set(_COMMAND_ENGINE):
        raise RequestError(f"engine must be an object of {', '.join(sorted(_COMMAND_ENGINE))} (the group runs its "
                           "own engine command)", "engine")
    out: dict[str, Any] = {"mode": "command", **_COMMAND_ENGINE}
    if "kv_events" in value:
        if not isinstance(value["kv_events"], bool):
            raise RequestError("engine.kv_events must be true or false", "engine.kv_events")
        out["kv_events"] = value["kv_events"]
    if "ready_timeout_s" in value:
        v = value["ready_timeout_s"]
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or not 1 <= v <= 86400:
            raise RequestError("engine.ready_timeout_s must be a number from 1 to 86400", "engine.ready_timeout_s")
        out["ready_timeout_s"] = float(v)
    if "health_path" in value:
        v = value["health_path"]
        if (not isinstance(v, str) or not v.startswith("/") or len(v) > _MAX_HEALTH_PATH
                or any(not (c.isascii() and c.isprintable()) or c in " ?#" for c in v)):
            raise RequestError("engine.health_path must be a URL path (/health), printable ASCII, no query",
                               "engine.health_path")
        out["health_path"] = v
    text = [a for a in command if isinstance(a, str)]
    if not out["kv_events"] and any(KV_PORT_TOKEN in a for a in text):
        raise RequestError(f"command uses {KV_PORT_TOKEN} but the group declares no KV-event port "
                           "(engine.kv_events: true)", "command")
    return out


def fill(argv: Iterable[str], port: int, kv_port: int | None) -> list[str]:
    """``argv`` with ``{port}`` (and ``{kv_port}``) replaced; nothing else changes."""
    out = []
    for a in argv:
        a = a.replace(PORT_TOKEN, str(port))
        if kv_port is not None:
            a = a.replace(KV_PORT_TOKEN, str(kv_port))
        out.append(a)
    return out


def pick_ports(n: int, avoid: set[int]) -> list[int]:
    """``n`` distinct TCP ports this host's kernel gives as free (bound together, then released),
    none of them in ``avoid``."""
    held: list[socket.socket] = []
    out: list[int] = []
    try:
        for _ in range(n + len(avoid) + 16):
            if len(out) == n:
                break
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            held.append(s)
            s.bind(("0.0.0.0", 0))  # free on every address, as an engine on the node binds
            port = int(s.getsockname()[1])
            if port not in avoid:
                out.append(port)
    finally:
        for s in held:
            s.close()
    if len(out) < n:
        raise OSError("no free port found")
    return out


def replica_url(address: str, port: int, scheme: str = "http") -> str:
    host = f"[{address}]" if ":" in address else address
    return f"{scheme}://{host}:{port}"


def healthy(address: str, port: int, path: str, timeout_s: float = CHECK_TIMEOUT_S) -> bool:
    """Whether ``GET http://address:port/path`` answers 200 within ``timeout_s`` (the body is not read
    past 64 KiB)."""
    conn = http.client.HTTPConnection(address, port, timeout=timeout_s)
    try:
        conn.request("GET", path, headers={"Accept": "*/*", "Connection": "close"})
        resp = conn.getresponse()
        resp.read(65536)
        return resp.status == 200
    except (OSError, http.client.HTTPException):
        return False
    finally:
        with contextlib.suppress(OSError):
            conn.close()
