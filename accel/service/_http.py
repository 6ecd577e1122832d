"""HTTP plumbing shared by the API and the pages: typed errors, the gate, bounded bodies, logs.

The gate: the bearer token (or, for pages, the session cookie the login page sets) names a
:class:`Principal`; the principal's token bucket is charged (a client without a valid token is
charged by address, so guessing tokens is rate limited too).  Bodies are capped by their
``Content-Length`` and by what is actually read, then decoded by the bounded reader.
"""

from __future__ import annotations

import dataclasses
import math
import re
import secrets
import time
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse

from accel._net.asgi_server import BodyTimeoutError, read_body
from accel._net.bounded_json import JSONLimitError, JSONLimits, loads_bounded

from ._auth import Principal, RateLimiter, TokenBook

__all__ = ["BODY_LIMITS", "MAX_BODY_BYTES", "SESSION_COOKIE", "SESSION_S", "Gate", "HTTPError", "error_response",
           "job_id_of", "read_json", "read_log", "read_raw"]

#: A request body's bounds (:mod:`accel._net.bounded_json`, the project's one bounded reader): 64 KiB,
#: 16 levels of nesting (a job request is 3 deep), numbers of at most 32 characters.
BODY_LIMITS = JSONLimits(max_bytes=64 * 1024, max_depth=16, max_number_chars=32)
MAX_BODY_BYTES = BODY_LIMITS.max_bytes
SESSION_COOKIE = "accel_session"
SESSION_S = 12 * 3600.0
_JOB_ID = re.compile(r"^j[0-9]{6}-[0-9a-f]{6}$")


class HTTPError(Exception):
    def __init__(self, status: int, code: str, message: str, field: str | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.field, self.headers = status, code, message, field, headers


def error_response(exc: HTTPError) -> JSONResponse:
    body: dict[str, Any] = {"code": exc.code, "message": exc.message}
    if exc.field:
        body["field"] = exc.field
    return JSONResponse({"error": body}, status_code=exc.status, headers=exc.headers)


class Gate:
    """Auth, sessions and rate limits for one app."""

    def __init__(self, tokens: TokenBook, limiter: RateLimiter) -> None:
        self.tokens = tokens
        self.limiter = limiter
        self.sessions: dict[str, tuple[Principal, float]] = {}

    def charge(self, key: str) -> None:
        wait = self.limiter.allow(key)
        if wait > 0:
            raise HTTPError(429, "rate-limited", f"too many requests; retry in {wait:.1f} s",
                             headers={"Retry-After": str(max(1, math.ceil(wait)))})

    def known(self, request: Request, *, cookie: bool = False) -> Principal | None:
        """The principal when it is known without slow work (a token that checked before, a
        live session), charged to its bucket; ``None``: ask :meth:`principal` (scrypt, errors)."""
        who: Principal | None = None
        header = request.headers.get("authorization", "")
        if header:
            scheme, _, token = header.partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                who = self.tokens.cached(token.strip())
        elif cookie:
            sid = request.cookies.get(SESSION_COOKIE, "")
            entry = self.sessions.get(sid) if sid else None
            if entry is not None and entry[1] > time.monotonic():
                who = entry[0]
        if who is not None:
            self.charge(f"token:{who.token_id}")
        return who

    def principal(self, request: Request, *, cookie: bool = False) -> Principal:
        who: Principal | None = None
        header = request.headers.get("authorization", "")
        if header:
            scheme, _, token = header.partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                who = self.tokens.check(token.strip())
            if who is None:
                self.charge(f"addr:{request.client.host if request.client else '?'}")
                raise HTTPError(401, "unauthorized", "the bearer token is not valid",
                                 headers={"WWW-Authenticate": "Bearer"})
        elif cookie:
            sid = request.cookies.get(SESSION_COOKIE, "")
            entry = self.sessions.get(sid) if sid else None
            if entry is not None and entry[1] > time.monotonic():
                who = entry[0]
        if who is None:
            self.charge(f"addr:{request.client.host if request.client else '?'}")
            raise HTTPError(401, "unauthorized", "send Authorization: Bearer <token>",
                             headers={"WWW-Authenticate": "Bearer"})
        self.charge(f"token:{who.token_id}")
        return who

    def login(self, token: str) -> str | None:
        who = self.tokens.check(token)
        if who is None:
            return None
        sid = secrets.token_urlsafe(32)
        now = time.monotonic()
        for k in [k for k, (_w, exp) in self.sessions.items() if exp <= now]:
            del self.sessions[k]
        self.sessions[sid] = (who, now + SESSION_S)
        return sid


#: How long a client has to send a whole request body (a slow client gets a 408, not a thread).
BODY_TIMEOUT_S = 10.0


async def read_raw(request: Request, max_bytes: int) -> bytes:
    """The request body, at most ``max_bytes`` (413) and all of it within :data:`BODY_TIMEOUT_S`
    (408; also when the client goes away first), read by the shared stack's :func:`read_body`."""
    length = request.headers.get("content-length")
    if length is not None and not length.isdigit():
        raise HTTPError(400, "bad-request", "Content-Length is not a number")
    try:
        return await read_body(request.receive, max_bytes, BODY_TIMEOUT_S, request.scope)
    except ValueError as exc:
        raise HTTPError(413, "too-large", str(exc)) from None
    except BodyTimeoutError as exc:
        raise HTTPError(408, "body-timeout", str(exc)) from None


async def read_json(request: Request, max_bytes: int) -> Any:
    raw = await read_raw(request, max_bytes)
    try:
        limits = BODY_LIMITS if max_bytes == BODY_LIMITS.max_bytes else dataclasses.replace(BODY_LIMITS,
                                                                                              max_bytes=max_bytes)
        return loads_bounded(raw, limits)
    except JSONLimitError as exc:
        if exc.limit == "max_bytes":
            raise HTTPError(413, "too-large", str(exc)) from None
        raise HTTPError(400, "bad-json", str(exc), exc.field) from None


def job_id_of(request: Request) -> str:
    job_id = str(request.path_params["job_id"])
    if not _JOB_ID.match(job_id):
        raise HTTPError(404, "not-found", "no such job")
    return job_id


def read_log(path: Path | None, tail: int | None, *, max_bytes: int = 8 * 1024 * 1024) -> str:
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


