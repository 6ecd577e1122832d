"""Serving groups under ``accel serve --executor local``: each replica job runs the group's engine
command (accel's fake vLLM engine, a real process the executor starts and stops by pid) on the
ports the service chose; see :mod:`tests.service_exec._serving_e2e` for the path it walks."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("starlette")
pytest.importorskip("zmq")

from ._common import host, start_serve
from ._serving_e2e import run_group


def test_a_group_of_engine_commands_behind_the_router(tmp_path: Path) -> None:
    inventory = tmp_path / "local.json"
    inventory.write_text(host("rtx4090-4", name="local").model_dump_json())
    state, ready = tmp_path / "state", tmp_path / "ready"
    ready.mkdir()
    served = start_serve(state, ["--executor", "local", "--allow-root", "--executor-option", f"inventory={inventory}"])
    try:
        run_group(served, state, ready)
    finally:
        served.stop()
