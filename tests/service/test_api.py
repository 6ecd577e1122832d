"""accel serve's API, end to end over the sim executor: quote, submit, run, record, logs, bill."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.service._svc import rig

pytest.importorskip("starlette")


def test_quote_lists_every_pool_that_can_take_the_job(tmp_path: Path) -> None:
    with rig(tmp_path) as r:
        resp = r.client.post("/v1/quotes", json={"devices": 1, "duration_s": 3600}, headers=r.headers(r.alice))
        assert resp.status_code == 200, resp.text
        quotes = resp.json()["quotes"]
        pools = {q["pool"]: q for q in quotes}
        assert set(pools) == {"NVIDIA H100 80GB HBM3", "NVIDIA GeForce RTX 4090"}
        h100 = pools["NVIDIA H100 80GB HBM3"]
        assert h100["wait_p50_s"] == 0.0 and h100["reason"] == "none"
        assert h100["price_per_device_hour"] == 4.0 and h100["expected_cost"] == pytest.approx(4.0)
        assert pools["NVIDIA GeForce RTX 4090"]["expected_cost"] == pytest.approx(0.5)
        # 8 devices: only the H100 host has that many
        resp = r.client.post("/v1/quotes", json={"devices": 8}, headers=r.headers(r.alice))
        assert [q["pool"] for q in resp.json()["quotes"]] == ["NVIDIA H100 80GB HBM3"]
        # more than any pool: a 400 naming the pools
        resp = r.client.post("/v1/quotes", json={"devices": 9}, headers=r.headers(r.alice))
        assert resp.status_code == 400 and "no pool can take 9" in resp.json()["error"]["message"]


def test_a_busy_pool_quotes_a_wait_with_its_reason(tmp_path: Path) -> None:
    with rig(tmp_path) as r:
        r.submit(r.alice, devices=8, model="H100", duration_s=600)
        r.run_for(2)
        resp = r.client.post("/v1/quotes", json={"devices": 4, "model": "H100", "duration_s": 600},
                             headers=r.headers(r.bob))
        (q,) = resp.json()["quotes"]
        assert q["reason"] == "capacity" and 500 < q["wait_p50_s"] <= 600
        assert q["why"] == "waits for running jobs to release devices"


def test_submit_runs_to_the_end_and_the_record_has_everything(tmp_path: Path) -> None:
    with rig(tmp_path) as r:
        job = r.submit(r.alice, name="eval", devices=2, model="H100", duration_s=600,
                       command=["python", "train.py", "--epochs", "3"], env={"PYTHONUNBUFFERED": "1"})
        assert job["state"] == "queued" and job["tenant"] == "team-a"
        r.run_for(5)
        rec = r.show(r.alice, job["id"])
        assert rec["state"] == "running"
        devices = rec["allocation"]["devices"]
        assert len(devices) == 2 and {d["host"] for d in devices} == {"sim-dgx-h100"}
        assert all(d["visibility_env"]["CUDA_VISIBLE_DEVICES"].startswith("GPU-") for d in devices)
        r.run_for(12)  # 600 s of service time at scale 60 is 10 s of wall time
        rec = r.show(r.alice, job["id"])
        assert rec["state"] == "finished"
        assert rec["exit"]["exit_code"] == 0 and rec["exit"]["reason"] == "completed"
        kinds = [(e["actor"].split(":")[0], e["kind"]) for e in rec["timeline"]]
        for want in [("scheduler", "submitted"), ("tenant", "quoted"), ("scheduler", "admitted"),
                     ("scheduler", "placed"), ("executor", "started"), ("scheduler", "finished"),
                     ("executor", "exited")]:
            assert want in kinds, (want, kinds)
        assert rec["command"] == ["python", "train.py", "--epochs", "3"]
        assert rec["env_names"] == ["PYTHONUNBUFFERED"]
        assert rec["wait"]["quoted_p50_s"] == 0.0 and rec["wait"]["actual_s"] is not None
        (line,) = rec["bill"]["lines"]
        assert line["devices"] == 2 and line["price_per_device_hour"] == 4.0
        assert line["cost"] == pytest.approx(2 * 600 / 3600 * 4.0, rel=0.02)
        assert rec["pool"] == "NVIDIA H100 80GB HBM3"
        logs = r.client.get(f"/v1/jobs/{job['id']}/logs", headers=r.headers(r.alice))
        assert "python train.py --epochs 3" in logs.text and "exited with code 0" in logs.text
        # the service sampled the devices while the job ran
        assert r.service.store.samples(job["id"])
        bill = r.client.get("/v1/bill", headers=r.headers(r.alice)).json()
        (b,) = bill["lines"]
        assert b["tenant"] == "team-a" and b["cost"] == pytest.approx(line["cost"], rel=1e-6)


def test_a_failing_job_and_a_time_limit_are_classified(tmp_path: Path) -> None:
    with rig(tmp_path) as r:
        bad = r.submit(r.alice, devices=1, model="4090", duration_s=120, env={"ACCEL_SIM_EXIT_CODE": "3"})
        slow = r.submit(r.alice, devices=1, model="4090", duration_s=6000, time_limit_s=300)
        r.run_for(10)
        rec = r.show(r.alice, bad["id"])
        assert rec["state"] == "failed" and rec["exit"]["exit_code"] == 3 and rec["exit"]["reason"] == "failed"
        rec = r.show(r.alice, slow["id"])
        assert rec["state"] == "failed" and rec["exit"]["reason"] == "time_limit"
        assert any(e["kind"] == "time-limit" for e in rec["timeline"])


def test_cancel_a_running_job(tmp_path: Path) -> None:
    with rig(tmp_path) as r:
        job = r.submit(r.alice, devices=1, duration_s=3600)
        r.run_for(2)
        resp = r.client.post(f"/v1/jobs/{job['id']}/cancel", headers=r.headers(r.alice))
        assert resp.status_code == 200
        r.run_for(2)
        rec = r.show(r.alice, job["id"])
        assert rec["state"] == "cancelled" and rec["exit"]["reason"] == "cancelled"
        again = r.client.post(f"/v1/jobs/{job['id']}/cancel", headers=r.headers(r.alice))
        assert again.status_code == 409


def test_list_is_per_tenant_and_admin_sees_all(tmp_path: Path) -> None:
    with rig(tmp_path) as r:
        a = r.submit(r.alice, duration_s=60)
        b = r.submit(r.bob, duration_s=60)
        ids = lambda tok: {j["id"] for j in r.client.get("/v1/jobs", headers=r.headers(tok)).json()["jobs"]}  # noqa: E731
        assert ids(r.alice) == {a["id"]} and ids(r.bob) == {b["id"]} and ids(r.admin) == {a["id"], b["id"]}


def test_pools_and_health(tmp_path: Path) -> None:
    with rig(tmp_path) as r:
        assert r.client.get("/healthz").json() == {"ok": True}
        pools = r.client.get("/v1/pools", headers=r.headers(r.alice)).json()["pools"]
        assert {p["pool"]: p["devices"] for p in pools} == {"NVIDIA H100 80GB HBM3": 8, "NVIDIA GeForce RTX 4090": 4}


def test_accel_sched_bill_prices_the_journal_from_the_stored_table(tmp_path: Path) -> None:
    """The 0.0 USD defect: ``accel sched bill`` on the service's journal prices every line."""
    import io
    import json

    from accel.scheduler.queueing.cli import add_arguments, main

    with rig(tmp_path) as r:
        r.submit(r.alice, devices=2, model="H100", duration_s=600)
        r.run_for(12)
        served = r.client.get("/v1/bill", headers=r.headers(r.admin)).json()
        journal = r.state / "journal.sqlite"
        import argparse

        parser = argparse.ArgumentParser()
        add_arguments(parser)
        out = io.StringIO()
        assert main(parser.parse_args(["bill", "--json", "--journal", str(journal)]), out) == 0
        (line,) = json.loads(out.getvalue())["lines"]
        (want,) = served["lines"]
        assert line["cost"] == pytest.approx(want["cost"]) and line["cost"] == pytest.approx(2 * 600 / 3600 * 4.0,
                                                                                             rel=1e-6)
        out = io.StringIO()
        assert main(parser.parse_args(["bill", "--journal", str(journal)]), out) == 0
        assert "1.33 USD" in out.getvalue()


def test_preemption_checkpoints_requeues_and_resumes_the_victim(tmp_path: Path) -> None:
    with rig(tmp_path, grace_s=300.0) as r:
        low = r.submit(r.alice, name="low", devices=8, model="H100", duration_s=1200,
                       checkpoint={"signal": "SIGUSR1", "interval_s": 60})
        r.run_for(3)  # 180 s of service time: the victim has 3 checkpoints
        assert r.show(r.alice, low["id"])["state"] == "running"
        high = r.submit(r.bob, name="high", devices=8, model="H100", duration_s=300, priority_class="high")
        r.run_for(1)
        rec = r.show(r.alice, low["id"])
        assert rec["state"] == "preempting"
        signalled = [e for e in rec["timeline"] if e["kind"] == "signalled"]
        assert signalled and signalled[0]["reason"] == "SIGUSR1"
        r.run_for(6)
        assert r.show(r.bob, high["id"])["state"] == "running"
        rec = r.show(r.alice, low["id"])
        assert rec["state"] == "queued" and rec["launches"][0]["reason"] == "preempted"
        r.run_for(30)
        rec = r.show(r.alice, low["id"])
        assert rec["state"] == "finished" and [la["reason"] for la in rec["launches"]] == ["preempted", "completed"]
        kinds = [e["kind"] for e in rec["timeline"]]
        for kind in ("preempting", "preempted", "resumed"):
            assert kind in kinds
        assert rec["attempts"] == 2 and len(rec["bill"]["lines"]) == 2
        assert r.show(r.bob, high["id"])["state"] == "finished"


def test_an_executor_offering_telemetry_feeds_the_charts(tmp_path: Path) -> None:
    """The local executor reads a job's devices as accel Telemetry (``telemetry(devices)``)
    instead of ``sample``: the service charts either."""
    from collections.abc import Sequence
    from typing import Any

    from accel.model import Telemetry
    from accel.service._auth import Principal
    from accel.service._core import Service, default_policy
    from accel.service._executor import PlacedDevice
    from accel.service._jobreq import EnvAllowlist, parse_request
    from accel.service.executors import ExecutorContext, build_executor
    from tests.service._svc import FakeWall

    class TelemetryOnly:
        """The sim executor seen through the other reading interface (everything else delegated)."""

        name = "sim"
        relaunch_safe = True

        def __init__(self, inner: Any) -> None:
            self.inner = inner
            for attr in ("hosts", "start", "poll", "signal", "reattach", "log_path", "close"):
                setattr(self, attr, getattr(inner, attr))

        def telemetry(self, devices: Sequence[PlacedDevice]) -> list[Telemetry]:
            out: list[Telemetry] = []
            for d in devices:
                host = self.inner._hosts[d.host]
                out.extend(host.busy.telemetry([host.device_ids[d.index]]))
            return out

    wall = FakeWall()
    holder: dict[str, Service] = {}
    inner = build_executor("sim", ExecutorContext(lambda: holder["svc"].now() if holder else 0.0,
                                                  tmp_path / "logs", {"profiles": "rtx4090-4"}))
    svc = holder["svc"] = Service.open(tmp_path, [TelemetryOnly(inner)], time_scale=60, policy=default_policy(),
                                       wall=wall, sample_every_s=1.0)
    try:
        who = Principal("t", "team-a", False)
        job_id = svc.submit(who, parse_request({"command": ["x"], "devices": 2, "duration_s": 300}, EnvAllowlist()))
        for _ in range(8):
            wall.advance(1)
            svc.tick()
        samples = svc.samples(who, job_id)
        assert samples and all(s[3] == pytest.approx(0.9) for s in samples)  # the busy copy's load
        assert svc.record(who, job_id)["state"] == "finished"
    finally:
        svc.close()
