"""One full scheduling cycle (admission, backfill, placement) with 10,000 queued jobs on a
5,000-host cluster (8 devices each, 40,000 devices).

The cluster is first filled to ``--fill`` of its devices with running jobs of mixed sizes and
estimates; then ``--queued`` jobs are submitted (sizes 1..16 devices, Philly-like mix,
estimates 1 min..1 day, three tenants with quotas, two priority classes) and one cycle is timed.
A second cycle (nothing fits any more: every job is examined and skipped or reserved) is timed
too.  The journal is a WAL SQLite file, as in production, unless ``--memory-journal``.
``--tiers 3600`` uses attained-service tiers (the Philly benchmark's default policy); with
``--age 4000`` the running jobs have run that long before the queue arrives, so they are all past
their tier-0 share and the cycle preempts them for the new jobs (the worst case: thousands of
preemptions in one cycle).

    python benchmarks/philly/cycle_bench.py
    python benchmarks/philly/cycle_bench.py --tiers 3600 --age 4000 --mode conservative
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path

from accel.scheduler.queueing import (
    BackfillMode,
    InClassOrder,
    JobSpec,
    Policy,
    PreemptMode,
    PriorityClass,
    QueueingScheduler,
    Quota,
    Tenant,
    uniform_cluster,
)

SIZES = [1] * 70 + [2] * 10 + [4] * 10 + [8] * 8 + [16] * 2


def build(hosts: int, queued: int, *, fill: float = 0.9, mode: BackfillMode = BackfillMode.EASY,
          tiers: tuple[float, ...] = (), t_q: float = 1.0, seed: int = 0,
          journal: Path | None = None) -> QueueingScheduler:
    """The benchmark's engine, ready for the measured cycle at ``t_q + 1``: ``hosts`` x 8 devices
    filled to ``fill`` by jobs started at 0, then ``queued`` jobs submitted at ``t_q`` (every
    tenth in the class ``prod``).  ``benchmarks/scheduler_speed/engine_ab.py`` builds its
    ``cycle`` workloads with it too."""
    rng = random.Random(seed)
    cap = hosts * 8
    eng = QueueingScheduler(uniform_cluster(hosts, 8), Policy(
        classes=(PriorityClass("prod", 10, InClassOrder.FIFO, preempts=False),
                 PriorityClass("batch", 0, InClassOrder.SHORTEST, band_ratio=4.0)),
        backfill=mode, default_class="batch", demote_after_device_s=tiers, preempt_mode=PreemptMode.SUSPEND),
        tenants=[Tenant("a", guaranteed={"P100": Quota(devices=cap // 2)}),
                 Tenant("b", guaranteed={"P100": Quota(devices=cap // 4)}),
                 Tenant("c", max_running_jobs=20_000)], journal=journal)
    with eng.batch():
        used, i = 0, 0
        while used < fill * cap:
            n = rng.choice(SIZES)
            eng.submit(JobSpec(id=f"run{i}", tenant=rng.choice("abc"), devices=n,
                               estimate_s=rng.uniform(600, 86400)), 0.0)
            used += n
            i += 1
        eng.cycle(0.0)
    with eng.batch():
        for k in range(queued):
            eng.submit(JobSpec(id=f"q{k}", tenant=rng.choice("abc"), devices=rng.choice(SIZES),
                               estimate_s=rng.uniform(60, 86400),
                               priority_class="prod" if k % 10 == 0 else "batch"), t_q)
    return eng


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hosts", type=int, default=5000)
    ap.add_argument("--queued", type=int, default=10_000)
    ap.add_argument("--fill", type=float, default=0.9)
    ap.add_argument("--mode", choices=[m.value for m in BackfillMode], default="easy")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--memory-journal", action="store_true")
    ap.add_argument("--tiers", default="", help="attained-service thresholds, device-seconds (comma-separated)")
    ap.add_argument("--age", type=float, default=0.0, help="seconds the running jobs ran before the queue arrives")
    args = ap.parse_args(argv)
    tiers = tuple(float(x) for x in args.tiers.split(",") if x)
    t_q = 1.0 + args.age
    times, started, reserved = [], [], []
    second = []
    for rep in range(args.repeat):
        with tempfile.TemporaryDirectory() as tmp:
            journal = None if args.memory_journal else Path(tmp) / "sched.db"
            t0 = time.perf_counter()
            eng = build(args.hosts, args.queued, fill=args.fill, mode=BackfillMode(args.mode), tiers=tiers,
                        t_q=t_q, seed=rep, journal=journal)
            build_s = time.perf_counter() - t0
            queued = len(eng.queue())
            t0 = time.perf_counter()
            res = eng.cycle(t_q + 1.0)
            times.append(time.perf_counter() - t0)
            started.append(len(res.started))
            reserved.append(len(res.reservations))
            t0 = time.perf_counter()
            eng.cycle(t_q + 2.0)
            second.append(time.perf_counter() - t0)
            print(f"rep {rep}: setup (engine, fill, queue) {build_s:.2f} s, running {len(eng.running())}, "
                  f"queued before {queued}, "
                  f"cycle {times[-1] * 1000:.0f} ms (started {started[-1]}, preempted {len(res.preempted)}, "
                  f"reservations {reserved[-1]}), "
                  f"next cycle {second[-1] * 1000:.0f} ms, free devices {eng.pool_free('P100')}")
    print(f"full cycle, {args.queued} queued on {args.hosts} hosts ({args.mode}"
          f"{', tiers ' + args.tiers + f', age {args.age:g} s' if tiers else ''}, "
          f"{'memory' if args.memory_journal else 'WAL file'} journal): "
          f"median {statistics.median(times) * 1000:.0f} ms,"
          f" max {max(times) * 1000:.0f} ms; follow-up cycle median {statistics.median(second) * 1000:.0f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
