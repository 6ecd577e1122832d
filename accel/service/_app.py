"""The HTTP face of ``accel serve``: the JSON API, ``/openapi.json`` and the pages (Starlette).

Every request goes through the same gate (:mod:`._http`): the body is capped by its
``Content-Length`` and by what is actually read, then decoded by the project's bounded JSON
reader (:mod:`accel._net.bounded_json`); the bearer token (or, for pages, the session cookie the
login page sets) names a :class:`Principal`; the principal's token bucket is charged (a client
without a valid token is charged by address, so guessing tokens is rate limited too).  Errors
are JSON ``{"error": {"code", "message"}}`` with a 4xx status; nothing a handler raises reaches
the client as a traceback.  The routes: the API (:mod:`._api`) and the pages (:mod:`._pages`).
"""

from __future__ import annotations

from pathlib import Path

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Mount
from starlette.staticfiles import StaticFiles

import accel

from ._api import api_routes
from ._auth import RateLimiter, TokenBook
from ._core import Service
from ._http import MAX_BODY_BYTES, SESSION_COOKIE, Gate
from ._openapi import openapi
from ._pages import page_routes
from ._prometheus import PrometheusSource

__all__ = ["SESSION_COOKIE", "build_app"]

_HERE = Path(__file__).parent


def build_app(service: Service, tokens: TokenBook, *, rate: float = 50.0, burst: int = 100,
              max_body_bytes: int = MAX_BODY_BYTES, metrics: PrometheusSource | None = None) -> Starlette:
    """The ASGI app over ``service`` (``metrics``: the job pages' source of device readings,
    ``--prometheus``; default the service's own samples)."""
    gate = Gate(tokens, RateLimiter(rate, burst))
    routes: list[BaseRoute] = [*api_routes(service, gate, openapi(accel.__version__), max_body_bytes),
                               *page_routes(service, gate, metrics),
                               Mount("/static", StaticFiles(directory=str(_HERE / "static")), name="static")]

    async def server_error(request: Request, exc: Exception) -> Response:
        return JSONResponse({"error": {"code": "internal", "message": "internal error; see the service's log"}},
                            status_code=500)

    from ._serving_api import serving_routes

    routes[:0] = serving_routes(lambda: service.serving, gate, max_body_bytes)
    return Starlette(routes=routes, exception_handlers={Exception: server_error})
