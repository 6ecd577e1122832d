"""Deterministic workloads whose full behaviour the golden test pins (issue 19, the engine in stages).

Each workload runs the queueing engine and returns a canonical record: every journaled event
(time, job, kind, reason, data), the bill, and ``estimate()`` answers taken at fixed points.  The
golden test stores a sha256 of each record plus a short hash per entry, so a change in
behaviour fails with the first entry that differs.  Regenerate the stored digests with
``python -m tests.scheduler_queueing._golden --write`` only when a behaviour change is meant.

Workloads: ``rich`` (the crash tests' rich workload through the simulator); ``random-<seed>``
(a small two-pool cluster driven directly: priority classes, EASY/conservative/no backfill,
attained-service tiers, grace periods, quotas and a cohort, fair shares, gangs, failures,
cancellations, device health changes and estimates); ``philly-quick`` (the per-job CSVs of
``benchmarks/philly/run_philly.py --quick``).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from accel.scheduler import ClusterState, DeviceSpec, HostSpec, InvalidRequestError, Share
from accel.scheduler.queueing import (
    BackfillMode,
    InClassOrder,
    JobSpec,
    JobState,
    Policy,
    PreemptMode,
    PriceTable,
    PriorityClass,
    QueueingScheduler,
    Quota,
    Simulator,
    Tenant,
)

from ._crash_common import WORKLOADS, make_cluster

ROOT = Path(__file__).resolve().parents[2]
# the shared data beside the checkout (or beside the folder of worktrees), or $ACCEL_SHARED
_SHARED = [Path(os.environ["ACCEL_SHARED"])] if "ACCEL_SHARED" in os.environ else [ROOT.parent / "shared",
                                                                                  ROOT.parents[1] / "shared"]
TRACES = next((p / "traces" / "philly" for p in _SHARED if (p / "traces" / "philly" / "trace_e13805.csv").exists()),
              None)
STORE = Path(__file__).resolve().parent / "fixtures" / "golden.json"
GIB = 1024**3
SEEDS = (1, 2, 3, 4, 5, 6)


def _canon(x: Any) -> str:
    # floats as repr (json does): bit-for-bit; inf/nan allowed
    return json.dumps(x, sort_keys=True, separators=(",", ":"), default=str)


def _events(eng: QueueingScheduler) -> list[Any]:
    return [["ev", e.t, e.job, e.kind, e.reason, e.data] for e in eng.journal.events()]


def _bill(eng: QueueingScheduler) -> list[Any]:
    return [["bill", *row] for row in eng.bill().as_rows()]


def rich() -> list[Any]:
    w = WORKLOADS["rich"]
    eng = QueueingScheduler(make_cluster(), w.policy, tenants=w.tenants, prices=w.prices)
    Simulator(eng, w.jobs(), health_events=w.health, estimate_at_submit=True).run()
    return [*_events(eng), *_bill(eng)]


def _cluster(rng: random.Random) -> ClusterState:
    specs = []
    for h in range(rng.randint(3, 5)):
        model = "A100" if h % 3 == 2 else "V100"
        name = f"h{h}"
        devs = tuple(DeviceSpec(id=f"{name}/{model}-{d}", vendor="nvidia", model=model, memory_bytes=16 * GIB,
                                link_domain="nvlink", numa=d // 2) for d in range(rng.choice((4, 8))))
        specs.append(HostSpec(name=name, cpu_milli=64_000, memory_bytes=256 * GIB, devices=devs, rack="r0"))
    return ClusterState.from_specs(specs)


def _policy(seed: int) -> Policy:
    backfill = (BackfillMode.EASY, BackfillMode.CONSERVATIVE, BackfillMode.NONE)[seed % 3]
    tiers = (1800.0, 20_000.0) if seed % 2 == 0 else ()
    return Policy(
        classes=(PriorityClass("prod", 20, InClassOrder.FIFO, preempts=True, preemptible=False),
                 PriorityClass("dev", 10, InClassOrder.SHORTEST, preempts=True, band_ratio=4.0),
                 PriorityClass("batch", 0, InClassOrder.FAIR if seed % 4 < 2 else InClassOrder.FIFO)),
        backfill=backfill, preempt_mode=(PreemptMode.CHECKPOINT, PreemptMode.SUSPEND, PreemptMode.REQUEUE)[seed % 3],
        grace_s=(0.0, 300.0)[seed % 2 if seed < 5 else 1], demote_after_device_s=tiers,
        plan_depth=(64, 4)[seed % 2], default_class="batch", preempt_overhead_s=30.0,
        promote_after_wait_s=40_000.0 if seed % 3 == 1 else None,
        promote_after_wait_ratio=6.0 if seed % 3 == 2 else None, calibrate_window=8 if seed == 3 else 0)


TENANTS = (
    Tenant("a", guaranteed={"V100": Quota(devices=8)}, limit={"V100": Quota(devices=16)}, cohort="lab"),
    Tenant("b", guaranteed={"V100": Quota(devices=8)}, limit={"V100": Quota(devices=14)}, cohort="lab"),
    Tenant("c", guaranteed={"V100": Quota(devices=4), "A100": Quota(devices=4)}, max_running_jobs=3),
    Tenant("d", weight=2.0),
)


def random_workload(seed: int) -> list[Any]:
    rng = random.Random(seed)
    cluster = _cluster(rng)
    eng = QueueingScheduler(cluster, _policy(seed), tenants=TENANTS,
                            prices=PriceTable(per_device_hour={"V100": 2.0, "A100": 4.0}))
    devices = [d for ids in cluster.dev_ids for d in ids]
    true_s: dict[str, float] = {}
    out: list[Any] = []
    t = 0.0
    for step in range(160):
        t += rng.choice((0.0, 30.0, 120.0, 600.0, 1800.0))
        for _ in range(rng.choice((0, 1, 1, 2, 3))):
            jid = f"j{len(true_s)}"
            n = rng.choice((1, 1, 2, 4, 8, 12)) if rng.random() < 0.85 else 1
            share = Share(compute_milli=rng.choice((250, 500)), memory_bytes=4 * GIB) \
                if n == 1 and rng.random() < 0.15 else None
            pool = rng.choice(("", "", "V100", "A100"))
            spec = JobSpec(jid, tenant=rng.choice("abcd"), devices=n, pool=pool,
                           estimate_s=rng.choice((300.0, 1200.0, 3600.0, 14_400.0, 40_000.0)),
                           priority_class=rng.choice(("prod", "dev", "batch", "batch", "")),
                           same_host=n <= 8 and rng.random() < 0.3,
                           checkpoint_interval_s=rng.choice((None, 600.0, 1800.0)),
                           cpu_milli=rng.choice((0, 0, 2000)), preemptible=rng.random() < 0.9, share=share)
            try:
                eng.submit(spec, t, estimate=rng.random() < 0.5, estimate_depth=rng.choice((None, 2)))
            except InvalidRequestError as exc:  # an over-sized request is refused: the refusal is part of the record
                out.append(["refused", jid, type(exc).__name__, str(exc)])
                continue
            true_s[jid] = spec.estimate_s * rng.choice((0.3, 0.8, 1.0, 1.5))
        for job in eng.running():
            if job.state == JobState.RUNNING and job.started_at is not None \
                    and job.progress(t) >= true_s[job.id] - job.work_s + job.work_s:
                r = rng.random()
                eng.finish(job.id, t, ok=r > 0.1, reason="" if r > 0.1 else "crashed")
        if rng.random() < 0.05:
            waiting = eng.queue(t)
            if waiting:
                eng.cancel(rng.choice(waiting).id, t)
        if rng.random() < 0.06:
            did = rng.choice(devices)
            eng.update_health(t, {did: rng.random() < 0.4})
        eng.cycle(t)
        eng.check_invariants()
        eng.verify_reservations(t)
        if step % 20 == 10:
            for job in eng.queue(t)[:4]:
                for e in eng.estimate(job.id, t):
                    out.append(["est", step, job.id, e.pool, e.start_at, e.wait_s, e.reason.value, e.price_per_hour])
        wake = eng.next_wakeup(t)
        out.append(["wake", step, wake])
    return [*_events(eng), *_bill(eng), *out]


def philly_quick() -> list[Any]:
    if TRACES is None:
        raise FileNotFoundError("the Philly traces (shared/traces/philly) are not here")
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, str(ROOT / "benchmarks" / "philly" / "run_philly.py"), "--quick",
                        "--no-plot", "--workers", "1", "--out", tmp,
                        "--traces", str(TRACES)], check=True, cwd=ROOT,
                       stdout=subprocess.DEVNULL)
        return [["csv", p.name, line] for p in sorted(Path(tmp).glob("jobs_*.csv"))
                for line in p.read_text().splitlines()]


def workloads() -> dict[str, Any]:
    out: dict[str, Any] = {"rich": rich}
    for s in SEEDS:
        out[f"random-{s}"] = lambda s=s: random_workload(s)
    out["philly-quick"] = philly_quick
    return out


def record(entries: list[Any]) -> dict[str, Any]:
    hashes = [hashlib.sha256(_canon(e).encode()).hexdigest()[:12] for e in entries]
    return {"sha256": hashlib.sha256(_canon(entries).encode()).hexdigest(), "entries": hashes}


def first_difference(name: str, entries: list[Any], stored: dict[str, Any]) -> str:
    got = record(entries)["entries"]
    want = stored["entries"]
    for i, (g, w) in enumerate(zip(got, want, strict=False)):
        if g != w:
            return f"{name}: entry {i} differs from the stored run; now it is {_canon(entries[i])[:600]}"
    return f"{name}: {len(got)} entries now, {len(want)} stored (the first {min(len(got), len(want))} agree)"


def main() -> int:
    if "--write" not in sys.argv:
        print("usage: python -m tests.scheduler_queueing._golden --write", file=sys.stderr)
        return 2
    store = {name: record(fn()) for name, fn in workloads().items()}
    STORE.write_text(json.dumps(store, indent=0, sort_keys=True) + "\n")
    for name, r in store.items():
        print(name, r["sha256"], len(r["entries"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
