"""LeakDetector: leaks found with a right time to full; caching, sawtooth, steps and noise are not leaks."""

from __future__ import annotations

import ast
import itertools
import math
import random
from pathlib import Path

import pytest

from accel.errors import ConfigError, ValidationError
from accel.leak import LeakDetector, mann_kendall_z

GB = 10**9
TOTAL = 80 * GB
DT = 10.0


def feed(det: LeakDetector, series: list[int], key: object = "d0") -> list[bool]:
    flags = []
    for i, used in enumerate(series):
        det.observe(key, i * DT, max(0, min(TOTAL, used)), TOTAL)  # type: ignore[arg-type]
        flags.append(det.assess(key) is not None)  # type: ignore[arg-type]
    return flags


@pytest.mark.parametrize("rate", [2 * 10**6, 10**7, 5 * 10**7])  # bytes per second
def test_a_leak_is_found_before_full_with_time_to_full_within_20_percent(rate: int) -> None:
    rng = random.Random(rate)
    start = 3600  # an hour of steady use first
    series = [int(5 * GB + rng.uniform(0, 0.5 * GB) + max(0, i * DT - start) * rate) for i in range(20000)]
    full_at = next(i for i, u in enumerate(series) if u >= TOTAL)
    det = LeakDetector()
    flags = feed(det, series[:full_at])
    assert any(flags), f"no verdict before full for {rate} B/s"
    first = flags.index(True)
    assert first * DT >= start, "flagged before the leak began"
    det2 = LeakDetector()
    feed(det2, series[: first + 1])
    verdict = det2.assess("d0")
    assert verdict is not None
    truth = (full_at - first) * DT
    assert abs(verdict.seconds_to_full - truth) <= 0.2 * truth
    assert verdict.slope_bytes_per_s == pytest.approx(rate, rel=0.2)


def _patterns(rng: random.Random, n: int) -> dict[str, list[int]]:
    noise = [rng.uniform(0, 0.5 * GB) for _ in range(n)]
    cache, warm = [], 2 * GB
    for i in range(n):
        if warm < 50 * GB and rng.random() < 0.5 / (1 + i * DT / 600):
            warm += rng.uniform(0.2, 2) * GB
        cache.append(int(warm + noise[i]))
    return {
        "flat-noise": [int(20 * GB + x) for x in noise],
        "caching-allocator": cache,
        "gc-sawtooth-5min": [int(5 * GB + 40 * GB * ((i * DT) % 300) / 300 + noise[i]) for i in range(n)],
        "gc-sawtooth-30min": [int(5 * GB + 40 * GB * ((i * DT + 900) % 1800) / 1800 + noise[i]) for i in range(n)],
        "model-load-steps": [int(3 * GB + 20 * GB * (i > n // 3) + 15 * GB * (i > 2 * n // 3) + noise[i])
                             for i in range(n)],
    }


@pytest.mark.parametrize("pattern", ["flat-noise", "caching-allocator", "gc-sawtooth-5min", "model-load-steps"])
def test_no_verdict_on_non_leaks(pattern: str) -> None:
    series = _patterns(random.Random(11), 4 * 8640 // 4)[pattern]  # one day at 10 s
    assert not any(feed(LeakDetector(), series)), pattern


def test_a_slow_sawtooth_is_flagged_at_most_in_its_first_tooth() -> None:
    # Without history the first rising edge of a 30-minute cycle cannot be told from a leak that
    # fills the device; once a tooth has fallen, the later ones are not flagged.
    flags = feed(LeakDetector(), _patterns(random.Random(5), 8640)["gc-sawtooth-30min"])
    assert not any(flags[int(1800 / DT):])


def test_a_leak_on_top_of_a_sawtooth_is_found() -> None:
    rng = random.Random(2)
    series = [int(5 * GB + 20 * GB * ((i * DT) % 300) / 300 + i * DT * 2 * 10**6 + rng.uniform(0, GB))
              for i in range(8640)]
    flags = feed(LeakDetector(), [u for u in series if u < TOTAL])
    assert any(flags)


def test_verdict_clears_with_hysteresis_when_the_leak_stops() -> None:
    rng = random.Random(3)
    leak = [int(5 * GB + i * DT * 10**7 + rng.uniform(0, 0.1 * GB)) for i in range(3000)]
    flat = [leak[-1] + int(rng.uniform(0, 0.1 * GB)) for _ in range(8000)]
    flags = feed(LeakDetector(), leak + flat)
    assert any(flags[:3000])
    assert not any(flags[-1000:]), "the verdict outlived the leak"
    # It does not flap: one rising edge during the leak.
    edges = sum(1 for a, b in itertools.pairwise(flags) if b and not a)
    assert edges == 1


def test_processes_are_keys_measured_against_the_device_headroom() -> None:
    det = LeakDetector()
    for i in range(330):
        proc = int(GB + max(0.0, i * DT - 1800) * 3 * 10**7)
        det.observe(("d0", 42, "python"), i * DT, proc, TOTAL, headroom_bytes=TOTAL - proc - 30 * GB)
    v = det.assess(("d0", 42, "python"))
    assert v is not None
    assert v.headroom_bytes < TOTAL - v.used_bytes  # the device fills before the process alone would


def test_too_little_history_is_no_verdict_and_state_is_bounded() -> None:
    det = LeakDetector()
    for i in range(20):
        det.observe("d0", i * DT, GB + i * GB, TOTAL)
    assert det.assess("d0") is None  # 200 s < the shortest window
    for i in range(20, 20000):
        det.observe("d0", i * DT, GB, TOTAL)
    assert len(det.export_state()[0][2]) <= det.max_buckets


def test_clock_step_and_memory_change_restart_the_key() -> None:
    det = LeakDetector()
    for i in range(1200):
        det.observe("d0", i * DT, GB + i * 5 * 10**7, TOTAL)
    assert det.assess("d0") is not None
    det.observe("d0", 0.0, GB, TOTAL)  # the clock went back
    assert det.assess("d0") is None
    for i in range(1200):
        det.observe("d1", i * DT, GB + i * 5 * 10**7, TOTAL)
    det.observe("d1", 5000 * DT, GB, TOTAL // 2)  # repartitioned: another memory
    assert det.assess("d1") is None


def test_forget_stale_drops_keys_that_stopped_reporting() -> None:
    det = LeakDetector()
    det.observe(("d0", 1, "a"), 0.0, GB, TOTAL)
    det.observe("d0", det.window_s + 100, GB, TOTAL)
    assert det.forget_stale(det.window_s + 100) == [("d0", 1, "a")]
    assert det.keys() == ["d0"]


@pytest.mark.parametrize("kw", [
    {"min_window_s": 0}, {"min_window_s": math.inf}, {"scales": 0}, {"scales": 2.5}, {"segments": 3},
    {"z_min": -1}, {"z_clear": 5.0}, {"min_slope_bytes_per_s": -1}, {"horizon_s": math.nan}, {"urgency": 0},
])
def test_bad_parameters_are_config_errors(kw: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        LeakDetector(**kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("sample", [
    (math.nan, 1, 2), (math.inf, 1, 2), (0.0, -1, 2), (0.0, 3, 2), (0.0, 1, 0), (0.0, 1.5, 2), (0.0, True, 2),
])
def test_bad_samples_are_validation_errors_naming_the_key(sample: tuple[float, object, object]) -> None:
    with pytest.raises(ValidationError, match="gpu7"):
        LeakDetector().observe("gpu7", *sample)  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        LeakDetector().observe("gpu7", 0.0, 1, 2, headroom_bytes=3)


def test_mann_kendall_reference_values() -> None:
    assert mann_kendall_z([1, 2]) == 0.0
    assert mann_kendall_z([5, 5, 5, 5]) == 0.0
    # Strictly increasing n=10: S=45, var = 10*9*25/18 = 125, z = 44/sqrt(125).
    assert mann_kendall_z(list(range(10))) == pytest.approx(44 / math.sqrt(125))
    assert mann_kendall_z(list(range(10, 0, -1))) == pytest.approx(-44 / math.sqrt(125))


def test_the_package_depends_only_on_the_model_and_errors() -> None:
    root = Path(__file__).resolve().parents[2] / "accel" / "leak"
    for path in root.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 2:
                assert (node.module or "").split(".")[0] in ("model", "errors"), (path.name, node.module)
