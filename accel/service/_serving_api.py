"""The serving groups' routes (``/v1/serving...``), in the API's style: the gate, bounded bodies, JSON errors.

- ``POST /v1/serving``: create a group (``{"name", "replicas", "engine", <job fields>}``), 201;
- ``GET /v1/serving``: the caller's groups; ``GET /v1/serving/{name}``: one, with its replicas'
  addresses (what ``accel router --from-serve`` polls);
- ``POST /v1/serving/{name}/scale`` (``{"replicas": N}``, 0 to :data:`~._serving.MAX_REPLICAS`);
- ``POST /v1/serving/{name}/cancel``: cancel every replica; the group ends.

A group is looked up by name in the caller's tenant: another tenant's group is a 404.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ._api import guarded
from ._auth import Principal
from ._http import Gate, HTTPError, read_json
from ._jobreq import RequestError
from ._serving import ServingManager

__all__ = ["serving_routes"]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,47}$")
_SCALE_BODY_BYTES = 1024


def _name_of(request: Request) -> str:
    name = str(request.path_params["name"])
    if not _NAME.match(name):
        raise HTTPError(404, "not-found", "no such serving group")
    return name


def serving_routes(manager: Callable[[], ServingManager | None], gate: Gate, max_body_bytes: int) -> list[Route]:
    """The routes over the service's manager (``manager()``; ``None``: the service keeps no groups, 409)."""

    def serving_of() -> ServingManager:
        m = manager()
        if m is None:
            raise HTTPError(409, "conflict", "this service keeps no serving groups")
        return m

    async def create(request: Request, who: Principal) -> Response:
        body = await read_json(request, max_body_bytes)
        view = await run_in_threadpool(serving_of().create, who, body)
        return JSONResponse(view, status_code=201, headers={"Location": f"/v1/serving/{view['name']}"})

    async def listing(request: Request, who: Principal) -> Response:
        return JSONResponse({"serving": await run_in_threadpool(serving_of().groups, who)})

    async def show(request: Request, who: Principal) -> Response:
        return JSONResponse(await run_in_threadpool(serving_of().view, who, _name_of(request)))

    async def scale(request: Request, who: Principal) -> Response:
        name = _name_of(request)
        body = await read_json(request, _SCALE_BODY_BYTES)
        if not isinstance(body, Mapping) or set(body) != {"replicas"}:
            raise RequestError('the body must be {"replicas": N}', "replicas")
        replicas: Any = body["replicas"]
        return JSONResponse(await run_in_threadpool(serving_of().scale, who, name, replicas))

    async def cancel(request: Request, who: Principal) -> Response:
        return JSONResponse(await run_in_threadpool(serving_of().cancel, who, _name_of(request)))

    return [
        Route("/v1/serving", guarded(gate, create), methods=["POST"]),
        Route("/v1/serving", guarded(gate, listing), methods=["GET"]),
        Route("/v1/serving/{name}", guarded(gate, show), methods=["GET"]),
        Route("/v1/serving/{name}/scale", guarded(gate, scale), methods=["POST"]),
        Route("/v1/serving/{name}/cancel", guarded(gate, cancel), methods=["POST"]),
    ]
