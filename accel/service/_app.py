"""The HTTP face of ``accel serve``: the JSON API, ``/openapi.json`` and the pages (Starlette).

Every request goes through the same gate: the body is capped by its ``Content-Length`` and by
what is actually read, then decoded by the bounded reader (:mod:`._jsonbody`); the bearer token
(or, for pages, the session cookie the login page sets) names a :class:`Principal`; the
principal's token bucket is charged (a client without a valid token is charged by address, so
guessing tokens is rate limited too).  Errors are JSON ``{"error": {"code", "message"}}`` with
a 4xx status; nothing a handler raises reaches the client as a traceback.
"""

from __future__ import annotations

import math
import re
import secrets
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

import accel
from accel.errors import AccelError
from accel.scheduler import InvalidRequestError, SchedulerStateError

from ._auth import Principal, RateLimiter, TokenBook
from ._charts import Chart, line_chart
from ._core import NotFoundError, Service
from ._jobreq import RequestError, parse_request
from ._jsonbody import MAX_BODY_BYTES, BodyError, parse_body
from ._openapi import openapi

__all__ = ["SESSION_COOKIE", "build_app"]

SESSION_COOKIE = "accel_session"
_JOB_ID = re.compile(r"^j[0-9]{6}-[0-9a-f]{6}$")
_HERE = Path(__file__).parent
_SESSION_S = 12 * 3600.0


class _HTTPError(Exception):
    def __init__(self, status: int, code: str, message: str, field: str | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.field, self.headers = status, code, message, field, headers


def _error(exc: _HTTPError) -> JSONResponse:
    body: dict[str, Any] = {"code": exc.code, "message": exc.message}
    if exc.field:
        body["field"] = exc.field
    return JSONResponse({"error": body}, status_code=exc.status, headers=exc.headers)


def _fmt_wall(value: Any) -> str:
    if value is None or not isinstance(value, int | float) or not math.isfinite(value):
        return ""
    return datetime.fromtimestamp(float(value), UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _fmt_secs(value: Any) -> str:
    if value is None or not isinstance(value, int | float) or not math.isfinite(value):
        return "n/a"
    v = float(value)
    return f"{v:.0f} s" if v < 120 else (f"{v / 60:.1f} min" if v < 7200 else f"{v / 3600:.1f} h")


class _Gate:
    """Auth, sessions and rate limits for one app."""

    def __init__(self, tokens: TokenBook, limiter: RateLimiter) -> None:
        self.tokens = tokens
        self.limiter = limiter
        self.sessions: dict[str, tuple[Principal, float]] = {}

    def _charge(self, key: str) -> None:
        wait = self.limiter.allow(key)
        if wait > 0:
            raise _HTTPError(429, "rate-limited", f"too many requests; retry in {wait:.1f} s",
                             headers={"Retry-After": str(max(1, math.ceil(wait)))})

    def principal(self, request: Request, *, cookie: bool = False) -> Principal:
        who: Principal | None = None
        header = request.headers.get("authorization", "")
        if header:
            scheme, _, token = header.partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                who = self.tokens.check(token.strip())
            if who is None:
                self._charge(f"addr:{request.client.host if request.client else '?'}")
                raise _HTTPError(401, "unauthorized", "the bearer token is not valid",
                                 headers={"WWW-Authenticate": "Bearer"})
        elif cookie:
            sid = request.cookies.get(SESSION_COOKIE, "")
            entry = self.sessions.get(sid) if sid else None
            if entry is not None and entry[1] > time.monotonic():
                who = entry[0]
        if who is None:
            self._charge(f"addr:{request.client.host if request.client else '?'}")
            raise _HTTPError(401, "unauthorized", "send Authorization: Bearer <token>",
                             headers={"WWW-Authenticate": "Bearer"})
        self._charge(f"token:{who.token_id}")
        return who

    def login(self, token: str) -> str | None:
        who = self.tokens.check(token)
        if who is None:
            return None
        sid = secrets.token_urlsafe(32)
        now = time.monotonic()
        for k in [k for k, (_w, exp) in self.sessions.items() if exp <= now]:
            del self.sessions[k]
        self.sessions[sid] = (who, now + _SESSION_S)
        return sid


async def _read_json(request: Request, max_bytes: int) -> Any:
    length = request.headers.get("content-length")
    if length is not None:
        if not length.isdigit():
            raise _HTTPError(400, "bad-request", "Content-Length is not a number")
        if int(length) > max_bytes:
            raise _HTTPError(413, "too-large", f"request body is {length} bytes; the limit is {max_bytes}")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > max_bytes:
            raise _HTTPError(413, "too-large", f"request body is over the limit of {max_bytes} bytes")
        chunks.append(chunk)
    try:
        return parse_body(b"".join(chunks), max_bytes=max_bytes)
    except BodyError as exc:
        raise _HTTPError(exc.status, "too-large" if exc.status == 413 else "bad-json", str(exc)) from None


def _job_id(request: Request) -> str:
    job_id = str(request.path_params["job_id"])
    if not _JOB_ID.match(job_id):
        raise _HTTPError(404, "not-found", "no such job")
    return job_id


def build_app(service: Service, tokens: TokenBook, *, rate: float = 50.0, burst: int = 100,
              max_body_bytes: int = MAX_BODY_BYTES) -> Starlette:
    """The ASGI app over ``service``."""
    gate = _Gate(tokens, RateLimiter(rate, burst))
    templates = Environment(loader=FileSystemLoader(str(_HERE / "templates")),
                            autoescape=select_autoescape(["html"]))
    templates.filters["wall"] = _fmt_wall
    templates.filters["secs"] = _fmt_secs
    doc = openapi(accel.__version__)

    def api(fn: Callable[[Request, Principal], Awaitable[Response]], *, cookie: bool = False
            ) -> Callable[[Request], Awaitable[Response]]:
        async def handler(request: Request) -> Response:
            try:
                # scrypt and the service's lock block: off the event loop, in the thread pool
                who = await run_in_threadpool(gate.principal, request, cookie=cookie)
                return await fn(request, who)
            except _HTTPError as exc:
                return _error(exc)
            except NotFoundError as exc:
                return _error(_HTTPError(404, "not-found", str(exc)))
            except RequestError as exc:
                return _error(_HTTPError(400, "invalid-request", str(exc), exc.field))
            except InvalidRequestError as exc:
                return _error(_HTTPError(400, "invalid-request", str(exc), getattr(exc, "field", None)))
            except SchedulerStateError as exc:
                return _error(_HTTPError(409, "conflict", str(exc)))
            except PermissionError as exc:
                return _error(_HTTPError(403, "forbidden", str(exc)))
            except AccelError as exc:
                return _error(_HTTPError(400, exc.code, str(exc)))
        return handler

    def page(fn: Callable[[Request, Principal], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
        async def handler(request: Request) -> Response:
            try:
                who = await run_in_threadpool(gate.principal, request, cookie=True)
            except _HTTPError as exc:
                if exc.status == 401:
                    return RedirectResponse("/login", status_code=303)
                return _error(exc)
            try:
                return await fn(request, who)
            except (NotFoundError, _HTTPError):
                return HTMLResponse(templates.get_template("base.html").render(who=who), status_code=404)
        return handler

    def render(name: str, **ctx: Any) -> HTMLResponse:
        return HTMLResponse(templates.get_template(name).render(**ctx),
                            headers={"Content-Security-Policy": "default-src 'self'; style-src 'self'",
                                     "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"})

    # -- API -------------------------------------------------------------------------------------------
    async def health(request: Request) -> Response:
        return JSONResponse({"ok": True})

    async def openapi_doc(request: Request) -> Response:
        return JSONResponse(doc)

    async def quotes(request: Request, who: Principal) -> Response:
        body = await _read_json(request, max_body_bytes)
        req = parse_request(body, service.env_allow, need_command=False)
        return JSONResponse({"quotes": await run_in_threadpool(service.quote, who, req)})

    async def submit(request: Request, who: Principal) -> Response:
        body = await _read_json(request, max_body_bytes)
        req = parse_request(body, service.env_allow)
        job_id = await run_in_threadpool(service.submit, who, req)
        record = await run_in_threadpool(service.record, who, job_id)
        return JSONResponse(record, status_code=201, headers={"Location": f"/v1/jobs/{job_id}"})

    async def listing(request: Request, who: Principal) -> Response:
        limit_text = request.query_params.get("limit", "100")
        if not limit_text.isdigit() or not 1 <= int(limit_text) <= 1000:
            raise _HTTPError(400, "invalid-request", "limit must be 1 to 1000", "limit")
        state = request.query_params.get("state") or None
        rows = await run_in_threadpool(lambda: service.jobs(who, limit=int(limit_text), state=state))
        return JSONResponse({"jobs": rows})

    async def show(request: Request, who: Principal) -> Response:
        return JSONResponse(await run_in_threadpool(service.record, who, _job_id(request)))

    async def cancel(request: Request, who: Principal) -> Response:
        job_id = _job_id(request)
        await run_in_threadpool(service.cancel, who, job_id)
        return JSONResponse(await run_in_threadpool(service.record, who, job_id))

    async def logs(request: Request, who: Principal) -> Response:
        job_id = _job_id(request)
        stream = request.query_params.get("stream", "stdout")
        if stream not in ("stdout", "stderr"):
            raise _HTTPError(400, "invalid-request", "stream must be stdout or stderr", "stream")
        tail_text = request.query_params.get("tail")
        if tail_text is not None and not tail_text.isdigit():
            raise _HTTPError(400, "invalid-request", "tail must be a number of lines", "tail")
        path = await run_in_threadpool(service.log_file, who, job_id, stream)
        text = await run_in_threadpool(_read_log, path, int(tail_text) if tail_text is not None else None)
        headers = {}
        if request.query_params.get("download"):
            headers["Content-Disposition"] = f'attachment; filename="{job_id}-{stream}.log"'
        return PlainTextResponse(text, headers=headers)

    async def bill(request: Request, who: Principal) -> Response:
        return JSONResponse(await run_in_threadpool(service.bill, who))

    async def pools(request: Request, who: Principal) -> Response:
        return JSONResponse({"pools": await run_in_threadpool(service.pools)})

    # -- pages -----------------------------------------------------------------------------------------
    async def login_page(request: Request) -> Response:
        if request.method == "POST":
            # a urlencoded form of one field, read within a small cap (no multipart parser needed)
            raw = b""
            async for chunk in request.stream():
                raw += chunk
                if len(raw) > 4096:
                    return _error(_HTTPError(413, "too-large", "the login form is over 4096 bytes"))
            try:
                fields = parse_qs(raw.decode("utf-8", "replace"), max_num_fields=4)
            except ValueError:
                return _error(_HTTPError(400, "bad-request", "the login form has too many fields"))
            token = (fields.get("token") or [""])[0]
            try:
                gate._charge(f"addr:{request.client.host if request.client else '?'}")
            except _HTTPError as exc:
                return _error(exc)
            sid = await run_in_threadpool(gate.login, token[:200])
            if sid is None:
                return render("login.html", who=None, error="that token is not valid")
            resp = RedirectResponse("/jobs", status_code=303)
            resp.set_cookie(SESSION_COOKIE, sid, max_age=int(_SESSION_S), httponly=True, samesite="strict",
                            secure=request.url.scheme == "https", path="/")
            return resp
        return render("login.html", who=None, error=None)

    async def logout(request: Request) -> Response:
        gate.sessions.pop(request.cookies.get(SESSION_COOKIE, ""), None)
        resp = RedirectResponse("/login", status_code=303)
        resp.delete_cookie(SESSION_COOKIE, path="/")
        return resp

    async def jobs_page(request: Request, who: Principal) -> Response:
        rows = await run_in_threadpool(lambda: service.jobs(who, limit=500))
        return render("jobs.html", who=who, jobs=rows)

    async def job_page(request: Request, who: Principal) -> Response:
        job_id = _job_id(request)
        def gather() -> tuple[dict[str, Any], list[Chart], str]:
            r = service.record(who, job_id)
            return r, _charts(service.samples(who, job_id)), _read_log(service.log_file(who, job_id, "stdout"), 50)

        r, charts, tail = await run_in_threadpool(gather)
        return render("job.html", who=who, r=r, charts=charts, log_tail=tail)

    async def pools_page(request: Request, who: Principal) -> Response:
        hosts = [{"name": name, "executor": service.host_executor[name].name, "devices": len(inv.devices),
                  "health": _health(inv)} for name, inv in sorted(service.inventories.items())]
        return render("pools.html", who=who, pools=await run_in_threadpool(service.pools), hosts=hosts)

    async def root(request: Request) -> Response:
        return RedirectResponse("/jobs", status_code=303)

    routes = [
        Route("/healthz", health),
        Route("/openapi.json", openapi_doc),
        Route("/v1/quotes", api(quotes), methods=["POST"]),
        Route("/v1/jobs", api(submit), methods=["POST"]),
        Route("/v1/jobs", api(listing), methods=["GET"]),
        Route("/v1/jobs/{job_id}", api(show), methods=["GET"]),
        Route("/v1/jobs/{job_id}/cancel", api(cancel), methods=["POST"]),
        Route("/v1/jobs/{job_id}/logs", api(logs, cookie=True), methods=["GET"]),
        Route("/v1/bill", api(bill), methods=["GET"]),
        Route("/v1/pools", api(pools), methods=["GET"]),
        Route("/", root),
        Route("/login", login_page, methods=["GET", "POST"]),
        Route("/logout", logout, methods=["POST"]),
        Route("/jobs", page(jobs_page)),
        Route("/jobs/{job_id}", page(job_page)),
        Route("/pools", page(pools_page)),
        Mount("/static", StaticFiles(directory=str(_HERE / "static")), name="static"),
    ]

    async def server_error(request: Request, exc: Exception) -> Response:
        return JSONResponse({"error": {"code": "internal", "message": "internal error; see the service's log"}},
                            status_code=500)

    return Starlette(routes=routes, exception_handlers={Exception: server_error})


def _read_log(path: Path | None, tail: int | None, *, max_bytes: int = 8 * 1024 * 1024) -> str:
    """The log's text (its last ``tail`` lines), at most ``max_bytes`` from its end."""
    if path is None or not path.is_file():
        return ""
    with open(path, "rb") as f:
        f.seek(0, 2)
        size = f.tell()
        f.seek(max(0, size - max_bytes))
        data = f.read().decode("utf-8", "replace")
    if tail is not None:
        lines = data.splitlines()
        data = "\n".join(lines[-tail:]) + ("\n" if lines and tail else "")
    return data


def _health(inv: Any) -> str:
    problems = len(getattr(inv, "problems", ()) or ())
    return "ok" if not problems else f"{problems} problem(s)"


def _charts(samples: list[tuple[float, str, int | None, float | None, float | None]]) -> list[Chart]:
    mem: dict[str, list[tuple[float, float]]] = {}
    util: dict[str, list[tuple[float, float]]] = {}
    power: dict[str, list[tuple[float, float]]] = {}
    for t, dev, m, u, p in samples:
        label = dev.rsplit("-", 1)[-1][:8] if len(dev) > 24 else dev
        if m is not None:
            mem.setdefault(label, []).append((t, float(m)))
        if u is not None:
            util.setdefault(label, []).append((t, float(u) * 100.0))
        if p is not None:
            power.setdefault(label, []).append((t, float(p)))
    out = [line_chart("memory used", "GiB", mem, scale=1024**3), line_chart("utilization", "%", util, y_max=100.0),
           line_chart("power", "W", power)]
    return [c for c in out if c is not None]
