"""Ends are recorded when the executor says the job ended, not at the tick that noticed."""

from __future__ import annotations

from pathlib import Path

import pytest

from accel.service._executor import ExitReason, RunStatus

from ._svc import rig


def test_a_sim_job_ends_and_frees_its_devices_at_its_own_end_time(tmp_path: Path) -> None:
    # scale 60: one wall second is a minute of service time; ticks every 10 wall s = 600 s apart
    with rig(tmp_path) as r:
        a = r.submit(r.admin, devices=8, model="H100", duration_s=100)["id"]
        b = r.submit(r.admin, devices=8, model="H100", duration_s=50)["id"]
        r.run_for(1.0)  # a placed and started
        r.run_for(40.0, step=10.0)  # a ends at +100 s, b starts then and ends at +150 s
        ra, rb = r.show(r.admin, a), r.show(r.admin, b)
        assert ra["state"] == rb["state"] == "finished"
        a_start, a_end = ra["launches"][0]["started_at"], ra["launches"][0]["ended_at"]
        b_end = rb["launches"][0]["ended_at"]
        placed = next(e["t"] for e in ra["timeline"] if e["kind"] == "placed")
        assert a_end == pytest.approx(placed + 100.0)
        b_placed = next(e["t"] for e in rb["timeline"] if e["kind"] == "placed")
        assert b_placed == pytest.approx(a_end)  # placed when a freed the devices, not at the next tick
        assert b_end == pytest.approx(b_placed + 50.0)
        assert a_start >= placed
        # the bill: exactly 100 s and 50 s of 8 H100s
        hours = sum(line["device_hours"] for line in ra["bill"]["lines"] + rb["bill"]["lines"])
        assert hours == pytest.approx(8 * 150 / 3600, abs=1e-5)


def test_an_end_time_is_kept_within_the_engine_time_and_the_tick(tmp_path: Path) -> None:
    with rig(tmp_path) as r:
        svc = r.service
        r.submit(r.admin, devices=1, duration_s=600)
        r.run_for(2.0)  # the engine's time is past its placement
        now = svc.now()
        assert svc.engine.now > 0
        assert svc._end_time(RunStatus(False, 0, None, ExitReason.COMPLETED, "", now + 50.0), now) == now
        assert svc._end_time(RunStatus(False, 0, None, ExitReason.COMPLETED, "", -1e9), now) == svc.engine.now
        assert svc._end_time(RunStatus(False, 0, None, ExitReason.COMPLETED, "", float("nan")), now) == now
        assert svc._end_time(RunStatus(False, 0, None, ExitReason.COMPLETED, ""), now) == now
