"""Memory-leak detection: delay on the simulator's leak fault, false alarms on non-leaks.

Two detectors read the same samples in the same run:

* **accel**: :class:`accel.leak.LeakDetector` with its defaults (the floor of used memory,
  step-robust trend test at several scales; see ``accel/leak/_detector.py``);
* **baseline**: the alert most fleets run, Prometheus'
  ``predict_linear(used_bytes[1h], 4*3600) > total_bytes``: a least-squares line over the last
  hour, alarming when it reaches the total within four hours (evaluated once 30 min of samples
  exist).

Leaks: the simulator (profile ``dgx-h100``, one reading = one tick = 10 s) with the
``memory_leak:0@T0=RATE`` fault, so device 0's used memory gains RATE bytes per tick on top of the
simulator's own load noise from tick T0 (one to two hours in) until it is full.  For each rate:
the delay from T0 to the first verdict, whether it came before the device was full, and the
time-to-full estimate's error against the truth at that moment.  The other seven devices of the
same runs leak nothing: every verdict on them is a false alarm.

Non-leaks (synthetic used-memory series of one 80 GB device, 10 s samples, each with its own noise):
``sawtooth`` (garbage collection: periods 1 min to 2 h, amplitude 20% and 50% of the device),
``steps`` (models loaded and unloaded at random times, 5-30 GB each), ``warmup`` (a caching
allocator: blocks at a falling rate up to a plateau, the service restarted every 12 h),
``mixed`` (all three), ``sim-idle`` (the simulator's own load, no fault).  A false alarm is a
verdict's rising edge; also reported, the share of time a verdict was up.

Seeds are split: ``--tune`` searches the detector's main thresholds on the *train* seeds only;
the tables are on the *report* seeds, which the defaults were never chosen on.

    python benchmarks/leak/run.py                 # full profile (a few minutes)
    python benchmarks/leak/run.py --quick         # CI's profile (seconds)
    python benchmarks/leak/run.py --tune          # the threshold search on train seeds
    python benchmarks/leak/run.py --episodes      # how long false verdicts last, against an alert's `for`

``--episodes`` measures what the alert rule's ``for`` buys: every false verdict on the non-leak
patterns (report seeds, 2 days each) with how long it lasted, and how many a ``for`` of 1 and of
5 minutes would let through (Prometheus evaluating every minute: a verdict alerts when it is
still up at the first evaluation at least ``for`` after it rose).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from accel.leak import LeakDetector
from accel.plugin import BackendConfig
from accel.sim import PLUGIN

TICK_S = 10.0
GB = 10**9
MiB = 2**20
TOTAL = 80 * GB
TRAIN_SEEDS = (0, 1, 2, 3, 4, 5)
REPORT_SEEDS = (100, 101, 102, 103, 104, 105, 106, 107)
RATES = (16 * MiB, 64 * MiB, 256 * MiB, 1024 * MiB)


class PredictLinear:
    """``predict_linear(used[window], ahead) > total``: least squares over a sliding window."""

    def __init__(self, window_s: float = 3600.0, ahead_s: float = 4 * 3600.0, min_span_s: float = 1800.0) -> None:
        self.window_s, self.ahead_s, self.min_span_s = window_s, ahead_s, min_span_s
        self.q: dict[Any, deque[tuple[float, float]]] = {}
        self.sums: dict[Any, list[float]] = {}

    def observe(self, key: Any, t: float, used: int, total: int) -> bool:
        q = self.q.setdefault(key, deque())
        s = self.sums.setdefault(key, [0.0, 0.0, 0.0, 0.0, 0.0])
        x = t - 1.7e9 if t > 1e9 else t  # keep the sums well-conditioned
        q.append((x, float(used)))
        s[0] += 1
        s[1] += x
        s[2] += used
        s[3] += x * x
        s[4] += x * used
        while q and q[0][0] < x - self.window_s:
            ox, oy = q.popleft()
            s[0] -= 1
            s[1] -= ox
            s[2] -= oy
            s[3] -= ox * ox
            s[4] -= ox * oy
        if q[-1][0] - q[0][0] < self.min_span_s:
            return False
        n, sx, sy, sxx, sxy = s
        den = n * sxx - sx * sx
        if den <= 0:
            return False
        slope = (n * sxy - sx * sy) / den
        intercept = (sy - slope * sx) / n
        return intercept + slope * (x + self.ahead_s) > total


@dataclass
class Tally:
    alarms: int = 0
    up_samples: int = 0
    samples: int = 0
    _prev: dict[Any, bool] = field(default_factory=dict)

    def add(self, key: Any, flagged: bool) -> None:
        if flagged and not self._prev.get(key, False):
            self.alarms += 1
        self._prev[key] = flagged
        self.samples += 1
        self.up_samples += flagged


# -- non-leak series ------------------------------------------------------------------------------
def sawtooth(rng: random.Random, n: int) -> Iterator[int]:
    period = rng.choice((60, 300, 1800, 7200))
    amp = rng.choice((0.2, 0.5)) * TOTAL
    base = rng.uniform(2, 10) * GB
    phase = rng.uniform(0, period)
    for i in range(n):
        t = i * TICK_S + phase
        yield int(base + amp * ((t % period) / period) + rng.uniform(0, 0.5 * GB))


def steps(rng: random.Random, n: int) -> Iterator[int]:
    loaded: list[float] = []
    base = rng.uniform(1, 4) * GB
    for _ in range(n):
        if rng.random() < TICK_S / 5400:  # a load or an unload every 90 minutes on average
            if loaded and (rng.random() < 0.5 or sum(loaded) > 0.6 * TOTAL):
                loaded.pop(rng.randrange(len(loaded)))
            else:
                loaded.append(rng.uniform(5, 30) * GB)
        yield int(base + sum(loaded) + rng.uniform(0, 0.3 * GB))


def warmup(rng: random.Random, n: int) -> Iterator[int]:
    plateau = rng.uniform(0.4, 0.85) * TOTAL
    restart_s = 12 * 3600
    used = 0.0
    for i in range(n):
        t = (i * TICK_S) % restart_s
        if t < TICK_S:
            used = rng.uniform(1, 3) * GB  # the service restarts and loads its model
        # Blocks arrive less often as the cache covers more shapes (about 1/(1 + t/10 min)).
        if used < plateau and rng.random() < 0.5 / (1.0 + t / 600.0):
            used = min(plateau, used + rng.uniform(0.2, 2.0) * GB)
        yield int(used + rng.uniform(0, 0.2 * GB))


def mixed(rng: random.Random, n: int) -> Iterator[int]:
    a, b = steps(random.Random(rng.random()), n), sawtooth(random.Random(rng.random()), n)
    for x, y in zip(a, b, strict=False):
        yield int(min(TOTAL, 0.5 * x + 0.5 * y + rng.uniform(0, 1 * GB)))


def sim_idle(rng: random.Random, n: int) -> Iterator[int]:
    backend = PLUGIN.open(BackendConfig(options={"profile": "dgx-h100", "seed": str(rng.randrange(10**6))}))
    try:
        for _ in range(n):
            dev = backend.inventory().devices[0]
            yield int(dev.memory_used_bytes or 0)
    finally:
        backend.close()


PATTERNS: dict[str, Callable[[random.Random, int], Iterator[int]]] = {
    "sawtooth": sawtooth, "steps": steps, "warmup": warmup, "mixed": mixed, "sim-idle": sim_idle,
}


def false_alarms(pattern: str, seeds: tuple[int, ...], days: float, params: dict[str, Any]) -> dict[str, Any]:
    n = int(days * 86400 / TICK_S)
    ours, base = Tally(), Tally()
    for seed in seeds:
        det, pl = LeakDetector(**params), PredictLinear()
        rng = random.Random(f"{pattern}-{seed}")
        t0 = 1.7e9 + seed * 1e6
        for i, used in enumerate(PATTERNS[pattern](rng, n)):
            used = max(0, min(TOTAL, used))
            t = t0 + i * TICK_S
            det.observe(seed, t, used, TOTAL)
            ours.add(seed, det.assess(seed) is not None)
            base.add(seed, pl.observe(seed, t, used, TOTAL))
    device_days = days * len(seeds)
    return {
        "pattern": pattern, "device_days": device_days,
        "accel_alarms_per_day": ours.alarms / device_days, "accel_up_share": ours.up_samples / max(1, ours.samples),
        "baseline_alarms_per_day": base.alarms / device_days,
        "baseline_up_share": base.up_samples / max(1, base.samples),
    }


def episodes(patterns: tuple[str, ...], seeds: tuple[int, ...], days: float) -> list[tuple[str, int, float]]:
    """Every false verdict on ``patterns``: (pattern, seed, seconds it lasted; inf: still up)."""
    n = int(days * 86400 / TICK_S)
    out: list[tuple[str, int, float]] = []
    for pattern in patterns:
        for seed in seeds:
            det = LeakDetector()
            rng = random.Random(f"{pattern}-{seed}")
            t0 = 1.7e9 + seed * 1e6
            start: float | None = None
            for i, used in enumerate(PATTERNS[pattern](rng, n)):
                t = t0 + i * TICK_S
                det.observe(seed, t, max(0, min(TOTAL, used)), TOTAL)
                up = det.assess(seed) is not None
                if up and start is None:
                    start = t
                elif not up and start is not None:
                    out.append((pattern, seed, t - start))
                    start = None
            if start is not None:
                out.append((pattern, seed, math.inf))
    return out


def alerts_through(durations: list[float], for_s: float, eval_s: float = 60.0) -> int:
    """How many verdicts of these durations alert with ``for_s``: still up at the first evaluation
    ``for_s`` or more after they rose (evaluations every ``eval_s``, the verdict rising mid-interval)."""
    return sum(1 for d in durations if d >= math.ceil(for_s / eval_s) * eval_s + eval_s / 2)


def print_episodes(rows: list[tuple[str, int, float]]) -> None:
    print("| pattern | false verdicts | lasting (s) | alert with for: 1m | alert with for: 5m |")
    print("|---|---|---|---|---|")
    for pattern in sorted({r[0] for r in rows}):
        ds = sorted(r[2] for r in rows if r[0] == pattern)
        print(f"| {pattern} | {len(ds)} | {', '.join(f'{d:.0f}' for d in ds)} | {alerts_through(ds, 60.0)} | "
              f"{alerts_through(ds, 300.0)} |")


# -- leaks on the simulator -----------------------------------------------------------------------
def leak_run(rate: int, seed: int, params: dict[str, Any], max_ticks: int) -> dict[str, Any]:
    rng = random.Random(f"leak-{rate}-{seed}")
    t0_tick = rng.randrange(360, 720)
    backend = PLUGIN.open(BackendConfig(options={
        "profile": "dgx-h100", "seed": str(seed), "faults": f"memory_leak:0@{t0_tick}={rate}"}))
    det, pl = LeakDetector(**params), PredictLinear()
    others_ours, others_base = Tally(), Tally()
    found: dict[str, Any] = {"rate_bytes_per_tick": rate, "seed": seed}
    try:
        inv = backend.inventory()
        full_tick: int | None = None
        for tick in range(max_ticks):
            if tick:
                inv = backend.inventory()
            t = 1.7e9 + tick * TICK_S
            for pos, dev in enumerate(inv.devices):
                used, total = dev.memory_used_bytes, dev.memory_total_bytes
                if used is None or total is None:
                    continue
                det.observe(dev.id, t, used, total)
                ours = det.assess(dev.id)
                base = pl.observe(dev.id, t, used, total)
                if pos == 0:
                    if full_tick is None and used >= total:
                        full_tick = tick
                    for name, hit in (("accel", ours is not None), ("baseline", base)):
                        if hit and tick < t0_tick:
                            found[f"{name}_early"] = found.get(f"{name}_early", 0) + 1
                        if hit and tick >= t0_tick and f"{name}_delay_s" not in found:
                            found[f"{name}_delay_s"] = (tick - t0_tick) * TICK_S
                            found[f"{name}_before_full"] = full_tick is None
                            if name == "accel" and ours is not None:
                                found["accel_tick"], found["accel_ttf_s"] = tick, ours.seconds_to_full
                else:
                    others_ours.add(dev.id, ours is not None)
                    others_base.add(dev.id, base)
            if full_tick is not None and "accel_delay_s" in found and "baseline_delay_s" in found:
                break
        found["full_after_s"] = None if full_tick is None else (full_tick - t0_tick) * TICK_S
        if full_tick is not None and "accel_tick" in found and found["accel_tick"] < full_tick:
            # The truth: when the device actually filled (leak plus the simulator's load).
            truth = (full_tick - found["accel_tick"]) * TICK_S
            found["ttf_error"] = (found["accel_ttf_s"] - truth) / truth
        found["others_device_days"] = others_ours.samples * TICK_S / 86400
        found["others_accel_alarms"] = others_ours.alarms
        found["others_baseline_alarms"] = others_base.alarms
    finally:
        backend.close()
    return found


def leaks(seeds: tuple[int, ...], params: dict[str, Any], max_ticks: int,
          rates: tuple[int, ...]) -> list[dict[str, Any]]:
    rows = []
    for rate in rates:
        runs = [leak_run(rate, s, params, max_ticks) for s in seeds]
        row: dict[str, Any] = {"rate_mib_per_tick": rate // MiB, "rate_bytes_per_s": rate / TICK_S, "runs": len(runs)}
        for name in ("accel", "baseline"):
            delays = [r[f"{name}_delay_s"] for r in runs if f"{name}_delay_s" in r]
            row[f"{name}_detected"] = len(delays)
            row[f"{name}_before_full"] = sum(1 for r in runs if r.get(f"{name}_before_full"))
            row[f"{name}_median_delay_s"] = statistics.median(delays) if delays else None
            row[f"{name}_early_alarms"] = sum(r.get(f"{name}_early", 0) > 0 for r in runs)
        errs = [abs(r["ttf_error"]) for r in runs if r.get("ttf_error") is not None]
        row["accel_median_abs_ttf_error"] = statistics.median(errs) if errs else None
        fulls = [r["full_after_s"] for r in runs if r.get("full_after_s") is not None]
        row["median_full_after_s"] = statistics.median(fulls) if fulls else None
        row["others_device_days"] = sum(r["others_device_days"] for r in runs)
        row["others_accel_alarms"] = sum(r["others_accel_alarms"] for r in runs)
        row["others_baseline_alarms"] = sum(r["others_baseline_alarms"] for r in runs)
        rows.append(row)
    return rows


def _fmt(v: Any, unit: str = "") -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.3g}{unit}"
    return f"{v}{unit}"


def report(params: dict[str, Any], seeds: tuple[int, ...], days: float, max_ticks: int,
           rates: tuple[int, ...], patterns: tuple[str, ...]) -> dict[str, Any]:
    started = time.perf_counter()
    leak_rows = leaks(seeds, params, max_ticks, rates)
    fa_rows = [false_alarms(p, seeds, days, params) for p in patterns]
    return {"params": params, "seeds": list(seeds), "leaks": leak_rows, "false_alarms": fa_rows,
            "seconds": time.perf_counter() - started}


def print_report(res: dict[str, Any]) -> None:
    print(f"seeds {res['seeds']}  params {res['params'] or 'defaults'}  ({res['seconds']:.0f} s)")
    print("\nleaks (simulator dgx-h100, device 0, 10 s per reading)")
    print("| leak | full after | accel delay | accel before full | accel TTF error "
          "| baseline delay | baseline before full |")
    print("|---|---|---|---|---|---|---|")
    for r in res["leaks"]:
        print(f"| {r['rate_mib_per_tick']} MiB/10 s | {_fmt(r['median_full_after_s'], ' s')} "
              f"| {_fmt(r['accel_median_delay_s'], ' s')} | {r['accel_before_full']}/{r['runs']} "
              f"| {_fmt(r['accel_median_abs_ttf_error'])} "
              f"| {_fmt(r['baseline_median_delay_s'], ' s')} | {r['baseline_before_full']}/{r['runs']} |")
    days = sum(r["others_device_days"] for r in res["leaks"])
    ours = sum(r["others_accel_alarms"] + r["accel_early_alarms"] for r in res["leaks"])
    base = sum(r["others_baseline_alarms"] + r["baseline_early_alarms"] for r in res["leaks"])
    print(f"\nnon-leaking simulator devices in those runs: {days:.1f} device-days; "
          f"false alarms accel {ours}, baseline {base}")
    print("\nfalse alarms on non-leaks (per device-day; share of time flagged)")
    print("| pattern | device-days | accel alarms/day | accel flagged | baseline alarms/day | baseline flagged |")
    print("|---|---|---|---|---|---|")
    for r in res["false_alarms"]:
        print(f"| {r['pattern']} | {r['device_days']:.1f} | {r['accel_alarms_per_day']:.3f} "
              f"| {r['accel_up_share']:.2%} "
              f"| {r['baseline_alarms_per_day']:.3f} | {r['baseline_up_share']:.2%} |")
    tot_days = sum(r["device_days"] for r in res["false_alarms"])
    a = sum(r["accel_alarms_per_day"] * r["device_days"] for r in res["false_alarms"])
    b = sum(r["baseline_alarms_per_day"] * r["device_days"] for r in res["false_alarms"])
    ratio = (a / b) if b else (math.inf if a else 0.0)
    print(f"\nall non-leak patterns: accel {a:.0f} false alarms, baseline {b:.0f}, in {tot_days:.0f} device-days: "
          f"accel/baseline = {ratio:.3f}")


def tune(days: float, max_ticks: int) -> None:
    """Grid over the main thresholds on the train seeds: fewest false alarms, then shortest delay."""
    grid = [{"z_min": z, "urgency": u} for z in (2.5, 3.0, 3.5) for u in (1.0, 2.0)]
    print("| z_min | urgency | false alarms | leaks before full | sum of median delays (s) |")
    print("|---|---|---|---|---|")
    best: tuple[Any, ...] | None = None
    for params in grid:
        res = report(params, TRAIN_SEEDS, days, max_ticks, RATES, tuple(PATTERNS))
        fa = sum(r["accel_alarms_per_day"] * r["device_days"] for r in res["false_alarms"])
        fa += sum(r["others_accel_alarms"] + r["accel_early_alarms"] for r in res["leaks"])
        caught = sum(r["accel_before_full"] for r in res["leaks"])
        delay = sum(r["accel_median_delay_s"] or 1e6 for r in res["leaks"])
        print(f"| {params['z_min']} | {params['urgency']} | {fa:.0f} | {caught} | {delay:.0f} |", flush=True)
        score = (fa, -caught, delay)
        if best is None or score < best[0]:
            best = (score, params)
    assert best is not None
    print(f"\nbest on train seeds {TRAIN_SEEDS}: {best[1]}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="CI's profile: 2 seeds, 6 h series, 2 rates")
    ap.add_argument("--tune", action="store_true", help="search thresholds on the train seeds")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--episodes", action="store_true", help="how long false verdicts last, against an alert's for")
    args = ap.parse_args(argv)
    if args.episodes:
        started = time.perf_counter()
        print_episodes(episodes(("sawtooth", "steps", "warmup", "mixed"), REPORT_SEEDS, 2.0))
        print(f"\n{time.perf_counter() - started:.0f} s")
        return 0
    if args.tune:
        tune(days=0.5, max_ticks=int(0.5 * 86400 / TICK_S))
        return 0
    if args.quick:
        res = report({}, REPORT_SEEDS[:2], 0.25, int(6 * 3600 / TICK_S), (256 * MiB, 1024 * MiB),
                     ("sawtooth", "steps", "warmup"))
    else:
        res = report({}, REPORT_SEEDS, 2.0, int(86400 / TICK_S), RATES, tuple(PATTERNS))
    if args.json:
        print(json.dumps(res, indent=2))
    else:
        print_report(res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
