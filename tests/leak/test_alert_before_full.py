"""A leak alerts before the device is full, counting the alert rule's ``for`` (issue 32).

On the simulator, a leak that filled the device in 15 minutes alerted after it was full: the
detector flagged it at +567 s and ``AccelMemoryLeakSuspected`` then waited its ``for: 5m``.  Over
a grid of leak rates whose time to full runs from just over the detector's shortest window to an
hour, the first verdict plus the rule's ``for`` (read from the rule itself) plus one reading
must come before the first reading at 100%.
"""

from __future__ import annotations

import re

import pytest

from accel.integrations.exporter._rules import RULE_GROUPS
from accel.leak import LeakDetector
from accel.plugin import BackendConfig
from accel.sim import PLUGIN

TICK_S = 10.0  # one simulator reading
ONSET_TICK = 260  # 43 minutes of history before the leak: every short window has its history


def _rule_for_s() -> float:
    (rule,) = [r for g in RULE_GROUPS for r in g["rules"] if r.get("alert") == "AccelMemoryLeakSuspected"]
    m = re.fullmatch(r"(\d+)([smh])", str(rule["for"]))
    assert m is not None, rule["for"]
    return int(m.group(1)) * {"s": 1.0, "m": 60.0, "h": 3600.0}[m.group(2)]


def _leak(seed: int, ttf_s: float) -> tuple[float | None, float | None]:
    """(seconds from the onset to the first verdict, to the first full reading) of a leak sized
    to fill device 0's headroom at the onset in about ``ttf_s``."""
    probe = PLUGIN.open(BackendConfig(options={"profile": "dgx-h100", "seed": str(seed)}))
    try:
        dev = probe.inventory().devices[0]
    finally:
        probe.close()
    assert dev.memory_total_bytes is not None and dev.memory_used_bytes is not None
    rate = int((dev.memory_total_bytes - dev.memory_used_bytes) / (ttf_s / TICK_S))
    backend = PLUGIN.open(BackendConfig(options={
        "profile": "dgx-h100", "seed": str(seed), "faults": f"memory_leak:0@{ONSET_TICK}={rate}"}))
    det = LeakDetector()
    found = full = None
    try:
        for tick in range(ONSET_TICK + int(3 * ttf_s / TICK_S)):
            dev = backend.inventory().devices[0]
            used, total = dev.memory_used_bytes, dev.memory_total_bytes
            assert used is not None and total is not None
            det.observe(dev.id, 1.7e9 + tick * TICK_S, used, total)
            verdict = det.assess(dev.id)
            if tick < ONSET_TICK:
                assert verdict is None, f"a verdict before the leak, at tick {tick}"
            elif verdict is not None and found is None:
                found = (tick - ONSET_TICK) * TICK_S
            if full is None and tick >= ONSET_TICK and used >= total:
                full = (tick - ONSET_TICK) * TICK_S
            if found is not None and full is not None:
                break
    finally:
        backend.close()
    return found, full


def test_the_rule_waits_less_than_the_shortest_window() -> None:
    assert _rule_for_s() < LeakDetector().min_window_s


@pytest.mark.parametrize("ttf_s", [330.0, 420.0, 540.0, 720.0, 900.0, 2400.0])
@pytest.mark.parametrize("seed", [1, 5])
def test_a_leak_alerts_before_the_device_is_full(seed: int, ttf_s: float) -> None:
    found, full = _leak(seed, ttf_s)
    assert full is not None, "the leak never filled the device"
    if full <= LeakDetector().min_window_s:
        pytest.skip(f"the simulator's load filled it in {full:.0f} s: not longer than the shortest window")
    assert found is not None, f"no verdict before {full:.0f} s"
    alert = found + _rule_for_s() + TICK_S
    assert alert < full, f"verdict at +{found:.0f} s, alert at +{alert:.0f} s, full at +{full:.0f} s"
