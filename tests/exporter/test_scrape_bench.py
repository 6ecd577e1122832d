"""The harness of benchmarks/exporter_scrape: the accel side without nvitop-exporter, the skip
without it, and (only where nvitop-exporter is installed) one small side-by-side run.
Behaviour only: call counts and shapes, never timings."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests._helpers import loaded_script

_HARNESS = Path(__file__).resolve().parents[2] / "benchmarks" / "exporter_scrape" / "run.py"


@pytest.fixture(scope="module")
def harness() -> Iterator[Any]:
    with loaded_script(_HARNESS, "exporter_scrape_run") as module:
        yield module


def test_accel_side_scrapes_the_fake_with_the_same_calls_every_warm_scrape(harness: Any) -> None:
    side = harness.AccelSide(harness.timed_fake("rtx4090-4"))
    try:
        harness._one(side)  # cold: identity, wiring, topology
        warm = [harness._one(side) for _ in range(3)]
    finally:
        side.close()
    totals = {sum(r["calls"].values()) for r in warm}
    assert len(totals) == 1 and totals.pop() > 0
    calls = warm[-1]["calls"]
    # Every GPU's utilisation is read once per scrape (4 GPUs), and the snapshot's two reads ran.
    assert calls["nvmlDeviceGetUtilizationRates"] == 4
    assert set(side.phases) == {"read"}  # inventory + telemetry: one hand-off to the backend's worker
    assert sum(c for c, _ in side.phases.values()) == sum(calls.values())
    assert 0 < harness.accel_common_calls(calls) <= sum(calls.values())
    assert warm[-1]["samples"] > 0 and warm[-1]["in_fake"] >= 0.0


def test_accel_common_side_reads_and_exports_less_than_the_full_side(harness: Any) -> None:
    full, common = harness.AccelSide(harness.timed_fake("rtx4090-4")), harness.AccelSide(
        harness.timed_fake("rtx4090-4"), common=True)
    try:
        harness._one(full), harness._one(common)
        f, c = harness._one(full), harness._one(common)
    finally:
        full.close()
        common.close()
    assert common.label == "accel common" and set(common.phases) == {"read"}
    assert 0 < sum(c["calls"].values()) < sum(f["calls"].values())
    assert 0 < c["samples"] < f["samples"]
    # Health is not read: no field batch for ECC and NVLink counters beyond power/temperature,
    # no throttle reasons; utilisation is still read once per GPU.
    assert c["calls"]["nvmlDeviceGetUtilizationRates"] == 4
    assert "nvmlDeviceGetCurrentClocksEventReasons" not in c["calls"]


def test_without_nvitop_exporter_it_says_so_and_exits_0(harness: Any, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(harness, "available", lambda: None)
    assert harness.main(["--scrapes", "1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("exporter scrape: skipped") and "nvitop-exporter==1.7.2" in out


def test_side_by_side_where_nvitop_exporter_is_installed(harness: Any) -> None:
    if harness.available() is None:
        pytest.skip("nvitop-exporter is not installed (tox -e bench-exporter installs it)")
    r = harness.measure("h100-nvswitch-8", scrapes=2, warmup=1)
    assert r["gpus"] == 8
    assert r["nvitop"]["calls"] > 0 and r["nvitop common"]["calls"] > 0
    assert r["nvitop common"]["calls"] <= r["nvitop"]["calls"]
    assert r["accel"]["common_calls"] <= r["accel"]["calls"]
    # accel --fields common is measured as its own side now, so the common ratios are direct.
    assert 0 < r["accel common"]["calls"] < r["accel"]["calls"]
    assert r["accel common"]["samples"] < r["accel"]["samples"]
    assert set(r["ratios"]) >= {"calls_full", "cpu_full", "calls_common", "cpu_common", "outside_fake_common"}
    assert r["ratios"]["calls_common"] == r["accel common"]["calls"] / r["nvitop common"]["calls"]


def test_labels_benchmark_measures_every_variant_against_accel_in_one_run() -> None:
    path = _HARNESS.parent / "labels.py"
    with loaded_script(path, "exporter_scrape_labels") as module:
        r = module.measure("rtx4090-4", scrapes=2, warmup=0, pods=2)
    rows, ratios = r["rows"], r["ratio_to_accel"]
    assert set(rows) == {"accel", "dcgm", "accel+pods", "dcgm+pods"}
    assert ratios["accel"]["samples"] == 1.0
    # The dcgm labels add no series but more bytes; two holders per device copy every value series.
    assert rows["dcgm"]["samples"] == rows["accel"]["samples"] and rows["dcgm"]["bytes"] > rows["accel"]["bytes"]
    assert rows["dcgm+pods"]["samples"] > 1.5 * rows["dcgm"]["samples"]
    assert rows["accel+pods"]["samples"] == rows["accel"]["samples"] + 4 * 2 + 1  # pod info + attribution_up
