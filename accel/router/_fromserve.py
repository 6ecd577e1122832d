"""Replicas from ``accel serve``: a serving group's ready replicas become the router's backends.

``accel router --from-serve URL --token-file FILE --service NAME`` polls the service's
``GET /v1/serving/NAME`` (the token names the tenant: another tenant's group is a 404 like a
missing one) every ``interval_s``; the replicas the service reports ready (their engine serves
at ``address``) are the router's set, replicas that appear are routed to from the next poll on,
replicas that leave get no new requests (those in flight finish).  Every request is bounded: a
timeout, and an answer of at most ``max_bytes``.  A failed poll (service down, bad answer)
keeps the last set (the health checks still guard each replica) and is reported on the router's
``/health``; a 404 (the group was cancelled, or never was) empties it.

A replica whose engine publishes vLLM's KV events says where (``kv_events``: ``tcp://HOST:PORT``;
``accel serve --sim``'s fake engines do, a group of real engines does when it declares a KV-event
port): with ``attach_kv``, each replica that joins with one gets a subscriber there (the router's
view of its cache then follows the engine's own events), closed when the replica leaves.

With ``scale`` the autoscaler's desired count (:attr:`Monitor.desired`) is sent to the service
(``POST /v1/serving/NAME/scale``) when it differs from the group's count: the service places or
cancels replica jobs, and the next polls follow.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from ._backends import Backend, BackendSet, Role
from ._errors import RouterError

__all__ = ["ServeDiscovery", "ServeSource", "read_token_file"]

#: Largest answer read from the service (a group of 64 replicas is about 15 KB).
MAX_ANSWER_BYTES = 1024 * 1024
#: Most replicas taken from one answer.
MAX_REPLICAS = 1024
_ROLES: tuple[Role, ...] = ("both", "prefill", "decode")
_MAX_ENDPOINT = 300


def read_token_file(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            token = f.read(4096).strip()
    except OSError as exc:
        raise RouterError(f"--token-file {path}: {exc.strerror or exc}") from None
    if not token or any(c.isspace() for c in token):
        raise RouterError(f"--token-file {path}: expected one token")
    return token


@dataclass(frozen=True)
class ServeSource:
    """Where the replicas come from: the service's URL, a token of the tenant, the group's name."""

    url: str
    token: str
    service: str
    interval_s: float = 1.0
    timeout_s: float = 2.0
    scale: bool = False

    def __post_init__(self) -> None:
        if not self.url.startswith(("http://", "https://")):
            raise RouterError(f"--from-serve {self.url!r}: expected http://HOST:PORT")
        if not self.service or len(self.service) > 48 or "/" in self.service:
            raise RouterError(f"--service {self.service!r}: a serving group's name")
        if not (self.interval_s > 0 and self.timeout_s > 0):
            raise RouterError("--serve-interval and its timeout must be > 0")


class ServeDiscovery:
    """Polls the service on a daemon thread (see the module doc); :meth:`close` stops it."""

    def __init__(self, source: ServeSource, backends: BackendSet, *,
                 desired: Callable[[], int | None] | None = None,
                 attach_kv: Callable[[Backend, str], object] | None = None) -> None:
        self.source = source
        self.backends = backends
        self.desired = desired
        self.attach_kv = attach_kv
        self._kv: dict[str, str] = {}  # replica URL -> its KV-event endpoint, from the last answer
        self.error: str | None = None
        self.polled_at: float | None = None
        self.wanted: int | None = None  # the group's replica count as the service last said
        self.polls = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="accel-router-from-serve", daemon=True)
        import httpx

        self._http = httpx.Client(base_url=source.url.rstrip("/"), timeout=source.timeout_s, follow_redirects=False,
                                  headers={"Authorization": f"Bearer {source.token}"})
        self._path = f"/v1/serving/{quote(source.service, safe='')}"

    def start(self) -> ServeDiscovery:
        self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=self.source.timeout_s + 2)
        self._http.close()
        for b in self.backends:
            if b.kv is not None:
                b.kv.close()

    def status(self) -> dict[str, Any]:
        return {"service": self.source.service, "from": self.source.url, "error": self.error,
                "replicas_wanted": self.wanted, "polled_ago_s": None if self.polled_at is None
                else round(time.monotonic() - self.polled_at, 3)}

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            self.poll_once()
            self._stop.wait(max(0.0, started + self.source.interval_s - time.monotonic()))

    def _get(self, method: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
        """One bounded request: (status, decoded JSON or None)."""
        deadline = time.monotonic() + 2 * self.source.timeout_s  # a slow drip is cut too, not only silence
        with self._http.stream(method, path, json=body) as resp:
            chunks, size = [], 0
            for chunk in resp.iter_bytes():
                size += len(chunk)
                if size > MAX_ANSWER_BYTES:
                    raise ValueError(f"answer over {MAX_ANSWER_BYTES} bytes")
                if time.monotonic() > deadline:
                    raise ValueError(f"answer took over {2 * self.source.timeout_s:g} s")
                chunks.append(chunk)
            status = resp.status_code
        try:
            return status, json.loads(b"".join(chunks)) if chunks else None
        except ValueError:
            raise ValueError(f"HTTP {status}: not JSON") from None

    def poll_once(self) -> None:
        """Read the group once and make the backend set follow it (then scale, with ``scale``)."""
        import httpx

        self.polls += 1
        try:
            status, data = self._get("GET", self._path)
        except (httpx.HTTPError, ValueError) as exc:
            self.error = f"{type(exc).__name__}: {exc}"
            return
        self.polled_at = time.monotonic()
        if status == 404:
            self._follow({})
            self.wanted = None
            self.error = f"no serving group {self.source.service} for this token"
            return
        if status != 200 or not isinstance(data, dict):
            self.error = f"HTTP {status}: {_message(data)}"
            return
        wanted = self._replicas(data)
        if wanted is None:
            return
        self._follow(wanted)
        raw = data.get("replicas_wanted")
        self.wanted = raw if isinstance(raw, int) and not isinstance(raw, bool) else None
        self.error = None if data.get("state") == "active" else f"serving group is {data.get('state')}"
        if self.source.scale and data.get("state") == "active":
            self._scale()

    def _follow(self, wanted: dict[str, Role]) -> None:
        added, removed = self.backends.sync(wanted)
        for b in removed:
            if b.kv is not None:
                b.kv.close()
        if self.attach_kv is None:
            return
        for b in added:
            endpoint = self._kv.get(b.url)
            if endpoint is not None:
                try:
                    self.attach_kv(b, endpoint)
                except Exception as exc:  # noqa: BLE001 - a bad endpoint costs its events, not the router
                    self.error = f"KV events of {b.url} at {endpoint}: {type(exc).__name__}: {exc}"

    def _replicas(self, data: dict[str, Any]) -> dict[str, Role] | None:
        import httpx

        reps = data.get("replicas")
        if not isinstance(reps, list):
            self.error = "the service's answer has no replica list"
            return None
        out: dict[str, Role] = {}
        self._kv = {}
        for r in reps[:MAX_REPLICAS]:
            if not isinstance(r, dict) or r.get("ready") is not True or not isinstance(r.get("address"), str):
                continue
            addr = str(r["address"]).rstrip("/")
            role = r.get("role", "both")
            try:
                parsed = httpx.URL(addr)
            except (httpx.InvalidURL, TypeError):
                continue
            if parsed.scheme not in ("http", "https") or not parsed.host or role not in _ROLES:
                continue
            out[addr] = role
            kv = r.get("kv_events")
            if isinstance(kv, str) and _kv_endpoint(kv):
                self._kv[addr] = kv
        return out

    def _scale(self) -> None:
        import httpx

        want = self.desired() if self.desired is not None else None
        if want is None or want == self.wanted:
            return
        try:
            status, data = self._get("POST", self._path + "/scale", {"replicas": want})
        except (httpx.HTTPError, ValueError) as exc:
            self.error = f"scale to {want}: {type(exc).__name__}: {exc}"
            return
        if status != 200:
            self.error = f"scale to {want}: HTTP {status}: {_message(data)}"
            return
        self.wanted = want


def _kv_endpoint(text: str) -> bool:
    """``tcp://HOST:PORT`` (what a replica's ``kv_events`` may be; anything else is ignored)."""
    if len(text) > _MAX_ENDPOINT or not text.startswith("tcp://"):
        return False
    host, sep, port = text[6:].rpartition(":")
    return bool(sep and host and port.isdigit() and 0 < int(port) < 65536
                and all(c.isalnum() or c in ".-_[]:" for c in host))


def _message(data: Any) -> str:
    if isinstance(data, dict) and isinstance(data.get("error"), dict):
        return str(data["error"].get("message", ""))[:200]
    return ""
