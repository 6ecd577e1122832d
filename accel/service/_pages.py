"""The server-rendered pages (Jinja2): login, the jobs list, a job's record, the pools.

Pages accept the same bearer token as the API or the session cookie the login page sets
(HttpOnly, SameSite=Strict); without either they redirect to ``/login``.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from ._auth import Principal
from ._base import NotFoundError
from ._charts import Chart, line_chart
from ._core import Service
from ._http import SESSION_COOKIE, SESSION_S, Gate, HTTPError, error_response, job_id_of, read_log, read_raw
from ._prometheus import MetricsSourceError, PrometheusSource

__all__ = ["page_routes"]

_HERE = Path(__file__).parent
_HEADERS = {"Content-Security-Policy": "default-src 'self'; style-src 'self'", "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "no-referrer"}


def _fmt_wall(value: Any) -> str:
    if value is None or not isinstance(value, int | float) or not math.isfinite(value):
        return ""
    return datetime.fromtimestamp(float(value), UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _fmt_secs(value: Any) -> str:
    if value is None or not isinstance(value, int | float) or not math.isfinite(value):
        return "n/a"
    v = float(value)
    return f"{v:.0f} s" if v < 120 else (f"{v / 60:.1f} min" if v < 7200 else f"{v / 3600:.1f} h")


def _templates() -> Environment:
    env = Environment(loader=FileSystemLoader(str(_HERE / "templates")), autoescape=select_autoescape(["html"]))
    env.filters["wall"] = _fmt_wall
    env.filters["secs"] = _fmt_secs
    return env


def page_routes(service: Service, gate: Gate, metrics: PrometheusSource | None = None) -> list[Route]:
    """The pages' routes over ``service`` (``metrics``: where a job's device readings come from,
    instead of the service's own samples)."""
    templates = _templates()

    def page(fn: Callable[[Request, Principal], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
        async def handler(request: Request) -> Response:
            try:
                who = gate.known(request, cookie=True)
                if who is None:
                    who = await run_in_threadpool(gate.principal, request, cookie=True)
            except HTTPError as exc:
                if exc.status == 401:
                    return RedirectResponse("/login", status_code=303)
                return error_response(exc)
            try:
                return await fn(request, who)
            except (NotFoundError, HTTPError):
                return HTMLResponse(templates.get_template("base.html").render(who=who), status_code=404)
        return handler

    def render(name: str, **ctx: Any) -> HTMLResponse:
        return HTMLResponse(templates.get_template(name).render(**ctx), headers=_HEADERS)

    async def login_page(request: Request) -> Response:
        if request.method == "POST":
            # a urlencoded form of one field, read within a small cap (no multipart parser needed)
            try:
                raw = await read_raw(request, 4096)
            except HTTPError as exc:
                return error_response(exc)
            try:
                fields = parse_qs(raw.decode("utf-8", "replace"), max_num_fields=4)
            except ValueError:
                return error_response(HTTPError(400, "bad-request", "the login form has too many fields"))
            token = (fields.get("token") or [""])[0]
            try:
                gate.charge(f"addr:{request.client.host if request.client else '?'}")
            except HTTPError as exc:
                return error_response(exc)
            sid = await run_in_threadpool(gate.login, token[:200])
            if sid is None:
                return render("login.html", who=None, error="that token is not valid")
            resp = RedirectResponse("/jobs", status_code=303)
            resp.set_cookie(SESSION_COOKIE, sid, max_age=int(SESSION_S), httponly=True, samesite="strict",
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
        job_id = job_id_of(request)

        def gather() -> tuple[dict[str, Any], list[Chart], str | None, str]:
            r = service.record(who, job_id)
            charts, error = _job_charts(service, who, job_id, metrics)
            return r, charts, error, read_log(service.log_file(who, job_id, "stdout"), 50)

        r, charts, metrics_error, tail = await run_in_threadpool(gather)
        source = metrics.describe() if metrics is not None else "the service's samples of its executor"
        return render("job.html", who=who, r=r, charts=charts, metrics_source=source, metrics_error=metrics_error,
                      log_tail=tail)

    async def pools_page(request: Request, who: Principal) -> Response:
        hosts = [{"name": name, "executor": service.host_executor[name].name, "devices": len(inv.devices),
                  "health": _health(inv)} for name, inv in sorted(service.inventories.items())]
        return render("pools.html", who=who, pools=await run_in_threadpool(service.pools), hosts=hosts)

    async def root(request: Request) -> Response:
        return RedirectResponse("/jobs", status_code=303)

    return [
        Route("/", root),
        Route("/login", login_page, methods=["GET", "POST"]),
        Route("/logout", logout, methods=["POST"]),
        Route("/jobs", page(jobs_page)),
        Route("/jobs/{job_id}", page(job_page)),
        Route("/pools", page(pools_page)),
    ]


def _health(inv: Any) -> str:
    problems = len(getattr(inv, "problems", ()) or ())
    return "ok" if not problems else f"{problems} problem(s)"


def _job_charts(service: Service, who: Principal, job_id: str,
                metrics: PrometheusSource | None) -> tuple[list[Chart], str | None]:
    """The job's charts and, when the metrics source failed, why (never an empty chart instead)."""
    if metrics is None:
        return _charts(service.samples(who, job_id)), None
    rows: list[tuple[float, str, int | None, float | None, float | None]] = []
    clock = service.clock
    try:
        for devices, start, end in service.run_windows(who, job_id):
            for w, dev, m, u, p in metrics.job_samples(devices, start, end):
                # on the service's time line, as its own samples are
                rows.append((clock.t0 + (w - clock.wall0) * clock.scale, dev, m, u, p))
    except MetricsSourceError as exc:
        return [], str(exc)
    return _charts(rows), None


def _charts(samples: list[tuple[float, str, int | None, float | None, float | None]]) -> list[Chart]:
    mem: dict[str, list[tuple[float, float]]] = {}
    util: dict[str, list[tuple[float, float]]] = {}
    power: dict[str, list[tuple[float, float]]] = {}
    # a long id is labelled by its last 8 characters, unless two of the job's devices share them
    short = {dev: dev[-8:] if len(dev) > 24 else dev for dev in {row[1] for row in samples}}
    labels = {dev: (lab if list(short.values()).count(lab) == 1 else dev) for dev, lab in short.items()}
    for t, dev, m, u, p in samples:
        label = labels[dev]
        if m is not None:
            mem.setdefault(label, []).append((t, float(m)))
        if u is not None:
            util.setdefault(label, []).append((t, float(u) * 100.0))
        if p is not None:
            power.setdefault(label, []).append((t, float(p)))
    out = [line_chart("memory used", "GiB", mem, scale=1024**3), line_chart("utilization", "%", util, y_max=100.0),
           line_chart("power", "W", power)]
    return [c for c in out if c is not None]
