"""What one exact start estimate costs at 10,000 queued on 5,000 hosts (issue 35).

Two engines, each filled to 90% by running jobs and then given ``--queued`` waiting jobs (sizes
as ``cycle_bench.py``), one cycle run, then a job submitted one second later and its start
estimated (``QueueingScheduler.quote``) planning ``plan_depth`` (64) jobs ahead exactly (the
rest fluid), every job ahead by the full walk, and every job ahead from the kept plan (the
estimate before it, at the previous instant, made the plan that this one carries forward);
then, one cycle later, at the engine's default depth (every job ahead where the kept plan
serves, else ``plan_depth``; the last row's wait is one second later's):

``philly``: the Philly benchmark's policy (one FIFO class, tiers, conservative backfill, no
quotas): the case the kept plan serves.  ``cycle_bench``: ``cycle_bench.build`` (two classes,
shortest-first, quotas): outside that case, so an exact estimate there is the full walk.

    python benchmarks/philly/deep_plan_cost.py            # 5,000 hosts, 10,000 queued
    python benchmarks/philly/deep_plan_cost.py --hosts 500 --queued 1000
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Sequence

from accel.scheduler.queueing import BackfillMode, JobSpec, QueueingScheduler, _walk, uniform_cluster

try:  # run as a script: the sibling modules are on sys.path
    import cycle_bench  # type: ignore[import-not-found,unused-ignore]
    import run_philly  # type: ignore[import-not-found,unused-ignore]
except ImportError:  # imported as benchmarks.philly.deep_plan_cost
    from benchmarks.philly import cycle_bench, run_philly  # type: ignore[no-redef,unused-ignore]

EXACT = sys.maxsize


def philly(hosts: int, queued: int, seed: int = 0) -> QueueingScheduler:
    rng = random.Random(seed)
    eng = QueueingScheduler(uniform_cluster(hosts, 8), run_philly.tiered_policy((3600.0,), 60.0))
    cap, used, i = hosts * 8, 0, 0
    with eng.batch():
        while used < 0.9 * cap:
            n = rng.choice(cycle_bench.SIZES)
            eng.submit(JobSpec(id=f"run{i}", tenant="vc", devices=n, estimate_s=rng.uniform(600, 86400)), 0.0)
            used, i = used + n, i + 1
        eng.cycle(0.0)
    with eng.batch():
        for k in range(queued):
            eng.submit(JobSpec(id=f"q{k}", tenant="vc", devices=rng.choice(cycle_bench.SIZES),
                               estimate_s=rng.uniform(60, 86400)), 1.0)
    return eng


def timed(eng: QueueingScheduler, name: str, at: float, depth: int | None, kept: bool) -> tuple[float, float]:
    _walk.KEEP_PLANS = kept
    spec = JobSpec(id=name, tenant="vc" if name.endswith("philly") else "a", devices=8, estimate_s=3600.0)
    t0 = time.process_time()
    est = eng.quote(spec, at, depth=depth)
    return time.process_time() - t0, est[0].start_at - at


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hosts", type=int, default=5000)
    ap.add_argument("--queued", type=int, default=10_000)
    args = ap.parse_args(argv)
    for name, eng in (("philly", philly(args.hosts, args.queued)),
                      ("cycle_bench", cycle_bench.build(args.hosts, args.queued, mode=BackfillMode.CONSERVATIVE,
                                                        tiers=(3600.0,)))):
        eng.cycle(2.0)
        t = 3.0
        waiting = len(eng.queue(t))
        # the kept plan is made by an exact estimate at one instant and carried to the next
        timed(eng, f"warm-{name}", t, EXACT, True)
        eng.cycle(t)
        t += 1.0
        rows = [("depth 64 (fluid past it)", *timed(eng, f"a-{name}", t, 64, True)),
                ("every job ahead, full walk", *timed(eng, f"b-{name}", t, EXACT, False)),
                ("every job ahead, kept plan", *timed(eng, f"c-{name}", t, EXACT, True))]
        # the engine's default depth, one cycle later (as the kept-plan row: the plan of the
        # estimate before, at the previous instant, carried forward where it serves)
        eng.cycle(t)
        rows.append(("the default depth", *timed(eng, f"d-{name}", t + 1.0, None, True)))
        _walk.KEEP_PLANS = True
        base = rows[1][1]
        for label, cpu, wait in rows:
            print(f"{name:12s} waiting {waiting:6d}  {label:28s} {cpu * 1000:9.1f} ms  ({cpu / base:5.2f}x the full "
                  f"walk)  estimated wait {wait:10.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
