"""The JSON API's routes (``/v1/...``, ``/healthz``, ``/openapi.json``) over a :class:`Service`.

Every handler runs behind :func:`guarded`: the gate names the principal (off the event loop:
scrypt and the service's lock block), and the typed errors a handler raises become JSON
``{"error": {"code", "message"}}`` answers with a 4xx status.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from accel.errors import AccelError
from accel.scheduler import InvalidRequestError, SchedulerStateError

from ._auth import Principal
from ._base import NotFoundError
from ._core import Service
from ._http import Gate, HTTPError, error_response, job_id_of, read_json, read_log
from ._jobreq import RequestError, parse_request

__all__ = ["api_routes", "guarded"]

Handler = Callable[[Request, Principal], Awaitable[Response]]


def guarded(gate: Gate, fn: Handler, *, cookie: bool = False) -> Callable[[Request], Awaitable[Response]]:
    """``fn`` behind the gate, its typed errors answered as JSON 4xx."""

    async def handler(request: Request) -> Response:
        try:
            # a known token is a dict lookup; scrypt blocks: off the event loop, in the thread pool
            who = gate.known(request, cookie=cookie)
            if who is None:
                who = await run_in_threadpool(gate.principal, request, cookie=cookie)
            return await fn(request, who)
        except HTTPError as exc:
            return error_response(exc)
        except NotFoundError as exc:
            return error_response(HTTPError(404, "not-found", str(exc)))
        except RequestError as exc:
            return error_response(HTTPError(400, "invalid-request", str(exc), exc.field))
        except InvalidRequestError as exc:
            return error_response(HTTPError(400, "invalid-request", str(exc), getattr(exc, "field", None)))
        except SchedulerStateError as exc:
            return error_response(HTTPError(409, "conflict", str(exc)))
        except PermissionError as exc:
            return error_response(HTTPError(403, "forbidden", str(exc)))
        except AccelError as exc:
            return error_response(HTTPError(400, exc.code, str(exc)))

    return handler


def api_routes(service: Service, gate: Gate, doc: dict[str, Any], max_body_bytes: int) -> list[Route]:
    """The API's routes over ``service`` (``doc``: the OpenAPI document served as is)."""

    async def health(request: Request) -> Response:
        return JSONResponse({"ok": True})

    async def openapi_doc(request: Request) -> Response:
        return JSONResponse(doc)

    async def quotes(request: Request, who: Principal) -> Response:
        body = await read_json(request, max_body_bytes)
        req = parse_request(body, service.env_allow, need_command=False)
        return JSONResponse({"quotes": await run_in_threadpool(service.quote, who, req)})

    async def submit(request: Request, who: Principal) -> Response:
        body = await read_json(request, max_body_bytes)
        req = parse_request(body, service.env_allow)
        def submit_and_read() -> dict[str, Any]:  # one trip to the thread pool
            return service.record(who, service.submit(who, req))

        record = await run_in_threadpool(submit_and_read)
        return JSONResponse(record, status_code=201, headers={"Location": f"/v1/jobs/{record['id']}"})

    async def listing(request: Request, who: Principal) -> Response:
        limit_text = request.query_params.get("limit", "100")
        if not limit_text.isdigit() or not 1 <= int(limit_text) <= 1000:
            raise HTTPError(400, "invalid-request", "limit must be 1 to 1000", "limit")
        state = request.query_params.get("state") or None
        rows = await run_in_threadpool(lambda: service.jobs(who, limit=int(limit_text), state=state))
        return JSONResponse({"jobs": rows})

    async def show(request: Request, who: Principal) -> Response:
        return JSONResponse(await run_in_threadpool(service.record, who, job_id_of(request)))

    async def cancel(request: Request, who: Principal) -> Response:
        job_id = job_id_of(request)
        def cancel_and_read() -> dict[str, Any]:
            service.cancel(who, job_id)
            return service.record(who, job_id)

        return JSONResponse(await run_in_threadpool(cancel_and_read))

    async def logs(request: Request, who: Principal) -> Response:
        job_id = job_id_of(request)
        stream = request.query_params.get("stream", "stdout")
        if stream not in ("stdout", "stderr"):
            raise HTTPError(400, "invalid-request", "stream must be stdout or stderr", "stream")
        tail_text = request.query_params.get("tail")
        if tail_text is not None and not tail_text.isdigit():
            raise HTTPError(400, "invalid-request", "tail must be a number of lines", "tail")
        path = await run_in_threadpool(service.log_file, who, job_id, stream)
        text = await run_in_threadpool(read_log, path, int(tail_text) if tail_text is not None else None)
        headers = {}
        if request.query_params.get("download"):
            headers["Content-Disposition"] = f'attachment; filename="{job_id}-{stream}.log"'
        return PlainTextResponse(text, headers=headers)

    async def bill(request: Request, who: Principal) -> Response:
        return JSONResponse(await run_in_threadpool(service.bill, who))

    async def pools(request: Request, who: Principal) -> Response:
        return JSONResponse({"pools": await run_in_threadpool(service.pools)})

    return [
        Route("/healthz", health),
        Route("/openapi.json", openapi_doc),
        Route("/v1/quotes", guarded(gate, quotes), methods=["POST"]),
        Route("/v1/jobs", guarded(gate, submit), methods=["POST"]),
        Route("/v1/jobs", guarded(gate, listing), methods=["GET"]),
        Route("/v1/jobs/{job_id}", guarded(gate, show), methods=["GET"]),
        Route("/v1/jobs/{job_id}/cancel", guarded(gate, cancel), methods=["POST"]),
        Route("/v1/jobs/{job_id}/logs", guarded(gate, logs, cookie=True), methods=["GET"]),
        Route("/v1/bill", guarded(gate, bill), methods=["GET"]),
        Route("/v1/pools", guarded(gate, pools), methods=["GET"]),
    ]
