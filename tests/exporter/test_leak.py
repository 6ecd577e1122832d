"""The exporter's leak detection on the simulator's memory-leak fault: condition, gauges, off switch."""

from __future__ import annotations

import pytest

pytest.importorskip("prometheus_client")

from accel.discovery import discover
from accel.exporter import SnapshotSource
from accel.leak import LEAK_REASON, LeakDetector, LeakWatch
from accel.plugin import BackendConfig
from tests.exporter.test_collector import samples, scrape

GiB = 2**30


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def _source(leak: LeakWatch | None, clock: Clock) -> SnapshotSource:
    # Device 0 leaks 2 GiB per tick from tick 40 on: a scrape (inventory, telemetry) is one instant
    # of the simulator, so from the 41st scrape; scrapes 10 s apart on the fake clock.
    config = BackendConfig(options={"profile": "dgx-h100", "seed": "3", "faults": "memory_leak:0@40=2147483648"},
                           enrich_from_sysfs=False)
    report = discover({"sim": config}, backends=["sim"])
    return SnapshotSource(report, {"sim": config}, config, min_interval_s=0.0, clock=clock, leak=leak)


def _run(source: SnapshotSource, clock: Clock, reads: int) -> str:
    text = ""
    for _ in range(reads):
        text = scrape(source)
        clock.t += 10.0
    return text


def test_a_leaking_device_gets_the_condition_and_the_gauges_and_the_others_do_not() -> None:
    clock = Clock()
    source = _source(LeakWatch(LeakDetector()), clock)
    try:
        before = samples(_run(source, clock, 40))
        assert not [k for k in before if k[0].startswith("accel_memory_leak_")]
        got: dict = {}
        for _ in range(60):
            got = samples(_run(source, clock, 1))
            if any(k[0] == "accel_memory_leak_seconds_to_full" for k in got):
                break
        leak_keys = [k for k in got if k[0] == "accel_memory_leak_seconds_to_full"]
        assert leak_keys, "no leak verdict within 60 scrapes of a 2 GiB/scrape leak"
        devices = {dict(k[1])["device"] for k in leak_keys}
        snap = source.get()
        leaking = snap.backends[0].inventory.devices[0].id  # type: ignore[union-attr]
        assert devices == {leaking}
        ttf = got[leak_keys[0]]
        assert 0 <= ttf < 3600
        conds = [dict(k[1]) for k in got if k[0] == "accel_health_condition" and ("reason", LEAK_REASON) in k[1]]
        assert {c["device"] for c in conds} == {leaking}
        assert {c["severity"] for c in conds} == {"warning"}
        # A warning does not change the state: the device still works.
        assert got[("accel_health_state", frozenset({("device", leaking), ("state", "healthy")}))] == 1
    finally:
        source.close()


def test_off_switch_exports_no_leak_families() -> None:
    clock = Clock()
    source = _source(None, clock)
    try:
        got = samples(_run(source, clock, 120))
        assert not [k for k in got if k[0].startswith("accel_memory_leak_")]
        assert not [k for k in got if ("reason", LEAK_REASON) in k[1]]
    finally:
        source.close()
