"""accel serve reads request bodies through the shared stack's reader: a body that does not
arrive in time is a 408, a client gone mid-body too (no traceback), and a declared length over
the cap a 413 before anything is read."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from starlette.requests import Request

from accel.service import _http
from accel.service._http import HTTPError, read_raw


def _request(headers: dict[str, str], messages: list[dict[str, Any]] | None) -> Request:
    scope = {"type": "http", "method": "POST", "path": "/v1/serving",
             "headers": [(k.encode(), v.encode()) for k, v in headers.items()]}

    async def receive() -> dict[str, Any]:
        if messages:
            return messages.pop(0)
        await asyncio.sleep(3600)  # a client that stalls
        raise AssertionError("unreachable")

    return Request(scope, receive)


def test_a_stalled_body_is_a_408(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_http, "BODY_TIMEOUT_S", 0.1)
    req = _request({"content-length": "100"}, [{"type": "http.request", "body": b"{", "more_body": True}])
    with pytest.raises(HTTPError) as err:
        asyncio.run(read_raw(req, 1024))
    assert err.value.status == 408 and "0.1 s" in str(err.value)


def test_a_client_gone_mid_body_is_a_408_not_an_exception() -> None:
    req = _request({"content-length": "100"}, [{"type": "http.request", "body": b"ab", "more_body": True},
                                               {"type": "http.disconnect"}])
    with pytest.raises(HTTPError) as err:
        asyncio.run(read_raw(req, 1024))
    assert err.value.status == 408 and "went away" in str(err.value)


def test_a_declared_length_over_the_cap_is_a_413_before_reading() -> None:
    req = _request({"content-length": "5000"}, None)  # receive would stall: it must not be called
    with pytest.raises(HTTPError) as err:
        asyncio.run(read_raw(req, 1024))
    assert err.value.status == 413


def test_a_whole_body_is_read() -> None:
    req = _request({"content-length": "4"}, [{"type": "http.request", "body": b"ab", "more_body": True},
                                             {"type": "http.request", "body": b"cd"}])
    assert asyncio.run(read_raw(req, 1024)) == b"abcd"
