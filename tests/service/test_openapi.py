"""/openapi.json: the committed snapshot is current, and it names exactly the API's routes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests._helpers import loaded_script

pytest.importorskip("starlette")

ROOT = Path(__file__).resolve().parents[2]


def test_the_committed_openapi_document_is_current() -> None:
    with loaded_script(ROOT / "scripts" / "gen_openapi.py", "accel_gen_openapi") as gen:
        assert gen.main(["--check"]) == 0, "docs/service-openapi.json is not current: run python scripts/gen_openapi.py"


def test_the_document_names_every_api_route_and_the_service_serves_it(tmp_path: Path) -> None:
    from starlette.routing import Route

    from tests.service._svc import rig

    doc = json.loads((ROOT / "docs" / "service-openapi.json").read_text())
    with rig(tmp_path) as r:
        served = r.client.get("/openapi.json").json()
        assert served == doc
        app_routes = set()
        from accel.service._app import build_app
        from accel.service._auth import TokenBook

        app = build_app(r.service, TokenBook(r.service.store))
        for route in app.routes:
            if isinstance(route, Route) and (route.path.startswith("/v1/") or route.path == "/healthz"):
                for method in route.methods or ():
                    if method != "HEAD":
                        app_routes.add((route.path, method.lower()))
    documented = {(path, method) for path, ops in doc["paths"].items() for method in ops}
    assert documented == app_routes
    ids = [op["operationId"] for ops in doc["paths"].values() for op in ops.values()]
    assert len(ids) == len(set(ids))
