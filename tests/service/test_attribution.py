"""accel serve's jobs on the exporter's series: ``accel serve --attribution-dir`` writes which job
and tenant hold each device of a host, ``accel exporter --accel-serve-attribution`` reads it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accel.discovery import discover
from accel.errors import AccelError
from accel.exporter import AccelCollector, SnapshotSource
from accel.integrations.exporter._attribution import Attribution, ServeJobs
from accel.plugin import BackendConfig
from accel.service._attribution import HEARTBEAT_S, AttributionWriter
from tests.exporter.test_attribution import _scrape

from ._svc import rig


def test_running_jobs_reach_the_exporter_with_their_tenant_and_nothing_else(tmp_path: Path) -> None:
    out = tmp_path / "attribution"
    with rig(tmp_path, profiles="dgx-h100") as r:
        (host,) = r.service.inventories
        r.service.attribution = AttributionWriter(out, r.service.inventories, wall=r.wall)
        a = r.submit(
            r.alice,
            name="secret-name-a",
            command=["python", "secret_cmd.py"],
            devices=2,
            duration_s=600,
            env={"PYTHONHASHSEED": "s3cr3t"},
        )["id"]
        b = r.submit(r.bob, name="secret-name-b", devices=1, duration_s=100_000)["id"]
        r.run_for(3)
        path = out / f"{host}.json"
        text = path.read_text()
        doc = json.loads(text)
        assert doc["host"] == host and doc["format"] == "accel-serve-attribution/1"
        rows = {(x["accel_job"], x["tenant"]) for x in doc["devices"]}
        assert sorted(rows) == sorted({(a, "team-a"), (b, "team-b")})
        assert len(doc["devices"]) == 3 and all(set(x) == {"device", "accel_job", "tenant"} for x in doc["devices"])
        for private in ("secret", "python", "s3cr3t", "PYTHONHASHSEED"):
            assert private not in text  # names, commands, environment stay in the service
        assert path.stat().st_mode & 0o777 == 0o644
        placed = {d["device_id"] for d in r.show(r.alice, a)["allocation"]["devices"]}
        assert {x["device"] for x in doc["devices"] if x["accel_job"] == a} == placed

        # The exporter over the same simulator profile (the same device ids) labels them.
        serve = ServeJobs(path, wall=r.wall)
        got = _scrape_sim(Attribution(serve=serve, ttl_s=0))
        info = {
            (dict(k[1])["device"], dict(k[1])["accel_job"], dict(k[1])["tenant"])
            for k, v in got.items()
            if k[0] == "accel_device_accel_job_info" and v == 1
        }
        assert info == {(x["device"], x["accel_job"], x["tenant"]) for x in doc["devices"]}
        assert got[("accel_attribution_up", frozenset({("source", "accel-serve")}))] == 1

        # The first job ends: its devices are free again in the file.
        r.run_for(12)  # wall seconds: 720 s of the service at its time scale 60
        doc = json.loads(path.read_text())
        assert {x["accel_job"] for x in doc["devices"]} == {b}
        # Rewritten at least every HEARTBEAT_S while the service runs ...
        before = doc["written_at"]
        r.run_for(HEARTBEAT_S + 1)
        assert json.loads(path.read_text())["written_at"] > before
        # ... so an exporter tells a stopped service's file from a live one: no stale answer.
        r.wall.advance(121)
        with pytest.raises(AccelError, match=r"written 1[2-5][0-9] s ago \(over 120 s\)"):
            serve.read()
        got = _scrape_sim(Attribution(serve=serve, ttl_s=0))
        assert got[("accel_attribution_up", frozenset({("source", "accel-serve")}))] == 0
        assert not [k for k in got if k[0] == "accel_device_accel_job_info"]


def _scrape_sim(attribution: Attribution) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    config = BackendConfig(options={"profile": "dgx-h100"})
    source = SnapshotSource(discover(backends=["sim"], default_config=config), {}, config, min_interval_s=0)
    try:
        return _scrape(AccelCollector(source, attribution=attribution))
    finally:
        source.close()


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (None, "No such file"),
        (b"{not json", "not JSON"),
        (b'{"format": "other", "devices": []}', "not the accel-serve-attribution/1 format"),
        (b'{"format": "accel-serve-attribution/1", "devices": []}', "no written_at"),
        (
            b'{"format": "accel-serve-attribution/1", "written_at": 100, "devices": [{"device": "d"}]}',
            "not {device, accel_job, tenant}",
        ),
        (b" " * (1 << 20) + b"{}", "over 1048576 bytes"),
        (b"[" * 100_000, "not JSON: .*nested deeper"),  # refused, never a RecursionError
    ],
)
def test_a_bad_attribution_file_is_an_error_naming_it(tmp_path: Path, content: bytes | None, why: str) -> None:
    path = tmp_path / "h.json"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(AccelError, match=why) as err:
        ServeJobs(path, wall=lambda: 100.0).read()
    assert str(path) in str(err.value)


def test_a_writer_that_cannot_write_says_so_once_and_goes_on(tmp_path: Path) -> None:
    out = tmp_path / "attribution"
    told: list[str] = []
    writer = AttributionWriter(out, ["h1", "../evil"], wall=lambda: 1.0, warn=told.append)
    assert writer.hosts == ["h1"]  # a host name that is not a plain file name gets no file
    (out / "h1.json").mkdir()  # a directory where the file goes: the rename fails
    writer.update({"h1": [("d", "j", "t")]})
    writer.update({"h1": [("d", "j", "t"), ("e", "j", "t")]})
    assert len(told) == 1 and "h1.json" in told[0] and writer.error is not None
    (out / "h1.json").rmdir()
    writer.update({"h1": [("d", "j", "t")]})
    assert told[-1] == "the attribution files are written again" and writer.error is None
    assert json.loads((out / "h1.json").read_text())["devices"] == [{"device": "d", "accel_job": "j", "tenant": "t"}]
