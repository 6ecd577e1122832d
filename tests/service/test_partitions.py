"""Partitions in job requests: a device split into MIG instances is offered as its partitions,
a job asks for ``partition: "1g.10gb"``, and its visibility variable names the MIG device."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from accel.service._auth import Principal
from accel.service._core import Service, default_policy
from accel.service._jobreq import EnvAllowlist, RequestError, parse_request
from accel.service._partitions import schedulable
from accel.service.executors import ExecutorContext, build_executor

from ._svc import rig

A100 = "NVIDIA A100-SXM4-80GB"
SLICE = f"{A100} / 1g.10gb"
#: a100-mig's two 1g.10gb instances (the simulator's ids are stable).
MIG_09, MIG_10 = "MIG-5c3a1f00-0000-5a0b-9c1d-000000000009", "MIG-5c3a1f00-0000-5a0b-9c1d-000000000010"


def test_partition_requests_on_the_sim_executor(tmp_path: Path) -> None:
    with rig(tmp_path, profiles="a100-mig,dgx-h100") as r:
        pools = {p["pool"]: p for p in r.client.get("/v1/pools", headers=r.headers(r.admin)).json()["pools"]}
        # the A100 is in MIG mode: it is offered as its instances, not as a whole device
        assert A100 not in pools
        assert {p for p in pools if p.startswith(A100)} == {SLICE, f"{A100} / 2g.20gb", f"{A100} / 3g.40gb"}
        assert pools[SLICE]["devices"] == 2
        # priced as the A100's list price (2.00) times the slice's share of its memory
        assert pools[SLICE]["price_per_device_hour"] == pytest.approx(2.0 * 10200547328 / 85899345920, abs=1e-3)
        body = {"command": ["train"], "partition": "1g.10gb", "duration_s": 600}
        quotes = r.client.post("/v1/quotes", json=body, headers=r.headers(r.alice)).json()["quotes"]
        assert [q["pool"] for q in quotes] == [SLICE]
        jobs = [r.submit(r.alice, **body, name=f"slice{i}")["id"] for i in range(3)]
        whole = r.submit(r.alice, command=["train"], duration_s=600, name="whole")["id"]
        r.run_for(5)
        recs = {j: r.show(r.alice, j) for j in [*jobs, whole]}
        running = [j for j in jobs if recs[j]["state"] == "running"]
        assert len(running) == 2 and recs[jobs[2]]["state"] == "queued"  # two 1g.10gb instances
        placed = sorted(recs[j]["allocation"]["devices"][0]["visibility_env"]["CUDA_VISIBLE_DEVICES"] for j in running)
        assert placed == [MIG_09, MIG_10]
        assert {recs[j]["allocation"]["devices"][0]["device_id"] for j in running} == {
            f"nvidia:{MIG_09}",
            f"nvidia:{MIG_10}",
        }
        # a request for whole devices never gets a partition
        assert recs[whole]["pool"] == "NVIDIA H100 80GB HBM3"
        # the slice reads as its GPU in the simulator, under the slice's id
        r.run_for(5)
        samples = r.service.samples(Principal("admin", "admin", True), running[0])
        assert samples and {s[1] for s in samples} == {recs[running[0]]["allocation"]["devices"][0]["device_id"]}
        r.run_for(12)  # wall seconds: 720 s of the service at its time scale 60
        done = r.show(r.alice, running[0])
        assert done["state"] == "finished"
        line = done["bill"]["lines"][0]
        assert line["pool"] == SLICE and line["price_per_device_hour"] == pools[SLICE]["price_per_device_hour"]
        # whole A100s are not there to be had; the profile must be offered
        for bad in ({"model": "A100"}, {"partition": "7g.80gb"}):
            resp = r.client.post("/v1/quotes", json={"command": ["x"], **bad}, headers=r.headers(r.alice))
            assert resp.status_code == 400, resp.text


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"partition": "1g.10gb", "share": {"compute_milli": 100}}, "share"),
        ({"partition": "1g 10gb"}, "partition"),
        ({"partition": 3}, "partition"),
    ],
)
def test_bad_partition_requests(body: dict[str, object], field: str) -> None:
    with pytest.raises(RequestError) as err:
        parse_request({"command": ["x"], **body}, EnvAllowlist())
    assert err.value.field == field


def test_whole_devices_are_offered_as_they_are() -> None:
    from tests.service_exec._common import host

    inv = host("dgx-h100")
    assert schedulable(inv) == (inv, {})


@pytest.mark.skipif(os.name != "posix", reason="the local executor runs POSIX process groups")
def test_a_local_job_on_a_partition_sees_the_mig_device(tmp_path: Path) -> None:
    # accel serve's service over the local executor on an a100-mig host: the job's process gets
    # CUDA_VISIBLE_DEVICES naming its MIG instance, not the GPU.
    state = tmp_path / "state"
    holder: dict[str, Service] = {}
    ctx = ExecutorContext(
        lambda: holder["svc"].now() if "svc" in holder else 0.0,
        state / "logs",
        {"inventory": "sim:a100-mig", "allow_root": True},
    )
    svc = Service.open(state, [build_executor("local", ctx)], policy=default_policy())
    holder["svc"] = svc
    try:
        who = Principal("t", "t", False)
        req = parse_request(
            {"command": ["sh", "-c", "echo $CUDA_VISIBLE_DEVICES"], "partition": "3g.40gb"}, EnvAllowlist()
        )
        job = svc.submit(who, req)
        end = time.monotonic() + 30
        while svc.record(who, job)["state"] != "finished":
            assert time.monotonic() < end, svc.record(who, job)
            svc.tick()
            time.sleep(0.05)
        path = svc.log_file(who, job, "stdout")
        assert path is not None
        assert path.read_text().strip() == "MIG-5c3a1f00-0000-5a0b-9c1d-000000000002"
    finally:
        svc.close()
