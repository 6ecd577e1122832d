"""Where the start-estimate error with true durations comes from (issue 19).

Replays VCs as ``run_philly.py`` does (same loader, cluster and policies; true durations
declared) and, after every scheduling cycle, asks the engine again for the start estimate of
every job that is still waiting for its first start, planning every job ahead exactly
(``--depth``).  A job's error (actual first start minus the engine's estimate at submission)
is then the *fluid tail* (the engine's estimate minus the exactly planned one, both at
submission: the engine plans only ``plan_depth`` jobs ahead exactly, the rest as fluid work)
plus the changes of the exact estimate from one cycle to the next (the last one being the step
to its actual start), each attributed to what happened at that instant:

``arrival``   later jobs were submitted at that instant (the cause the estimate cannot know);
``finish``    a running job ended (with true durations, earlier or later than booked);
``tier``      neither: a tier wake-up or a grace end (a running job was demoted / preempted).

A change at an instant with both arrivals and finishes is counted as ``arrival+finish``.  Every
change also records whether the cycle preempted something and whether a job submitted after the
waiting job started (first start or resume) in it: that job overtook it.  The instrumentation
only reads the engine (``estimate`` plans without committing); the script checks that the
outcomes equal an uninstrumented run's.  It is slow where queues are deep (every waiting job
is planned exactly after every cycle).

    python benchmarks/philly/estimate_decomp.py --quick            # 3 VCs x 150 jobs, default policy
    python benchmarks/philly/estimate_decomp.py --vcs 0e4a51 --jobs-per-vc 300 --detail 3
    python benchmarks/philly/estimate_decomp.py --vcs 2869ce --devices-per-vc 32 --policy fifo --plan-depth 2
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from accel.scheduler.queueing import JobOutcome, QueueingScheduler, Simulator, load_philly, uniform_cluster

try:  # run as a script: the sibling module is on sys.path
    from run_philly import POLICIES, QUICK, TRACES  # type: ignore[import-not-found,unused-ignore]
except ImportError:  # imported as benchmarks.philly.estimate_decomp
    from benchmarks.philly.run_philly import POLICIES, QUICK, TRACES  # type: ignore[no-redef,unused-ignore]


@dataclass
class Trail:
    """One job's estimate over its wait: the changes and what each instant held."""

    submit: float
    seq: int
    first: float
    last: float
    # each change: instant, delta, cause, whether the cycle preempted, whether a later job overtook
    changes: list[tuple[float, float, str, bool, bool]] = field(default_factory=list)


def _own_estimate(eng: QueueingScheduler, jid: str, now: float, depth: int | None = None) -> float | None:
    ests = eng.estimate(jid, now, depth=depth)
    return min((e.start_at for e in ests), default=None)


def replay(vc: str, policy: str, limit: int, devices: int, traces: Path,
           instrument: bool = True, depth: int | None = None,
           plan_depth: int | None = None) -> tuple[list[JobOutcome], dict[str, Trail]]:
    jobs = load_philly(traces / f"trace_{vc}.csv", limit=limit)
    pol = POLICIES[policy] if plan_depth is None else replace(POLICIES[policy], plan_depth=plan_depth)
    eng = QueueingScheduler(uniform_cluster(max(1, devices // 8), 8), pol)
    sim = Simulator(eng, jobs)
    trails: dict[str, Trail] = {}
    if not instrument:
        return sim.run().outcomes, trails
    inst: dict[str, Any] = {"arrived": [], "finished": 0}
    real_submit, real_finish, real_cycle = eng.submit, eng.finish, eng.cycle

    def submit(spec: Any, now: float, **kw: Any) -> Any:
        job = real_submit(spec, now, **kw)
        est = _own_estimate(eng, spec.id, now, depth) if job.estimate_at_submit is not None else None
        if est is not None:
            trails[spec.id] = Trail(now, job.seq, est, est)
        inst["arrived"].append(job.seq)
        return job

    def finish(job_id: str, now: float, **kw: Any) -> None:
        inst["finished"] += 1
        real_finish(job_id, now, **kw)

    def cycle(now: float) -> Any:
        res = real_cycle(now)
        started = {jid: eng.jobs[jid].seq for jid in res.started}
        for jid, tr in trails.items():
            job = eng.jobs[jid]
            if tr.last is None or (job.first_started_at is not None and jid not in started):
                continue  # done with (started in an earlier cycle) or no estimate
            later = [s for s in inst["arrived"] if s > tr.seq]
            if inst["finished"] and later:
                cause = "arrival+finish"
            elif later:
                cause = "arrival"
            elif inst["finished"]:
                cause = "finish"
            else:
                cause = "tier"
            overtaken = any(s > tr.seq and j != jid for j, s in started.items())
            new = now if jid in started else _own_estimate(eng, jid, now, depth)
            if new is None:
                continue
            if new != tr.last:
                tr.changes.append((now, new - tr.last, cause, bool(res.preempted), overtaken))
                tr.last = new
            if jid in started:
                tr.last = None  # type: ignore[assignment]
        inst["arrived"], inst["finished"] = [], 0
        return res

    eng.submit, eng.finish, eng.cycle = submit, finish, cycle  # type: ignore[method-assign]
    return sim.run().outcomes, trails


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="3 VCs x 150 jobs (run_philly.py --quick)")
    ap.add_argument("--vcs", default=None)
    ap.add_argument("--jobs-per-vc", type=int, default=None)
    ap.add_argument("--devices-per-vc", type=int, default=64)
    ap.add_argument("--policy", default="default", choices=sorted(POLICIES))
    ap.add_argument("--traces", default=str(TRACES))
    ap.add_argument("--detail", type=int, default=0, help="print the estimate changes of the N worst jobs")
    ap.add_argument("--depth", type=int, default=0,
                    help="the follow-up estimates plan this many jobs ahead exactly (default 0: every job)")
    ap.add_argument("--plan-depth", type=int, default=None,
                    help="the policy's plan_depth (the engine's exact depth; default: the policy's, 64)")
    ap.add_argument("--no-check", action="store_true", help="skip the uninstrumented replay that checks outcomes")
    args = ap.parse_args(argv)
    vcs = args.vcs.split(",") if args.vcs else list(QUICK["vcs"])  # type: ignore[arg-type]
    limit = args.jobs_per_vc or (int(QUICK["jobs"]) if args.quick or not args.vcs else 2000)  # type: ignore[call-overload]
    traces = Path(args.traces)
    depth = args.depth or sys.maxsize
    by_cause: dict[str, float] = defaultdict(float)
    by_flag: dict[str, float] = defaultdict(float)
    rel_all: list[float] = []
    rel_exact: list[float] = []
    rel_clean: list[float] = []
    abs_total = 0.0
    abs_clean = 0.0
    n_waited = 0
    worst: list[tuple[float, str, JobOutcome, Trail]] = []
    for vc in vcs:
        outs, trails = replay(vc, args.policy, limit, args.devices_per_vc, traces, depth=depth,
                              plan_depth=args.plan_depth)
        if not args.no_check:
            plain, _ = replay(vc, args.policy, limit, args.devices_per_vc, traces, instrument=False,
                              plan_depth=args.plan_depth)
            if [(o.id, o.start_s, o.end_s, o.estimate_s) for o in plain] != \
               [(o.id, o.start_s, o.end_s, o.estimate_s) for o in outs]:
                raise SystemExit(f"{vc}: the instrumented replay differs from a plain one")
        for o in outs:
            if o.start_s is None or o.estimate_s is None or o.start_s - o.submit_s < 60.0:
                continue  # run_philly's population: jobs that waited at least one minute
            n_waited += 1
            tr = trails[o.id]
            err = o.start_s - o.estimate_s  # the engine's estimate, as run_philly scores it
            total = sum(d for _t, d, *_ in tr.changes)
            assert abs(total - (o.start_s - tr.first)) < 1e-3, (o.id, total, o.start_s - tr.first)
            wait = o.start_s - o.submit_s
            rel = abs(err) / wait
            rel_all.append(rel)
            rel_exact.append(abs(o.start_s - tr.first) / wait)
            worst.append((abs(err), vc, o, tr))
            abs_total += abs(err)
            overtaken = any(ov for *_x, ov in tr.changes)
            if not overtaken:
                rel_clean.append(abs(o.start_s - tr.first) / wait)
                abs_clean += abs(err)
            # a job's |error| shared among causes in proportion to their net signed contributions;
            # "fluid tail": the engine's estimate minus the exactly planned one, both at submission
            net: dict[str, float] = defaultdict(float, {"fluid tail": tr.first - o.estimate_s})
            flags: dict[str, float] = defaultdict(float, {"fluid tail": tr.first - o.estimate_s})
            for _t, d, cause, pre, ov in tr.changes:
                net[cause] += d
                flags["overtaken" if ov else ("preemption" if pre else "other")] += d
            for table, parts in ((by_cause, net), (by_flag, flags)):
                weight = sum(abs(v) for v in parts.values())
                for k, v in parts.items():
                    if weight:
                        table[k] += abs(err) * abs(v) / weight
    print(f"policy {args.policy}, VCs {','.join(vcs)} x first {limit} jobs, {args.devices_per_vc} devices, "
          f"true durations; waited >= 1 min: {n_waited}")
    if not rel_all:
        return 0
    print(f"median relative error {statistics.median(rel_all):.3f} (engine's estimate), "
          f"{statistics.median(rel_exact):.3f} (every job ahead planned exactly, depth {args.depth or 'all'}); "
          f"total |error| {abs_total / 3600:.1f} h")
    if not abs_total:
        print("every estimate equals the actual start")
        return 0
    for name, table in (("instant's events", by_cause), ("cycle", by_flag)):
        print(f"share of total |error| by {name}:")
        for k, v in sorted(table.items(), key=lambda kv: -kv[1]):
            print(f"  {k:16s} {v / abs_total:6.1%}  ({v / 3600:.1f} h)")
    clean = statistics.median(rel_clean) if rel_clean else float("nan")
    print(f"jobs whose exact estimate no later starter moved: {len(rel_clean)} of {len(rel_all)}, their median "
          f"relative error (exact estimate) {clean:.3f}, their share of the engine's total |error| "
          f"{abs_clean / abs_total:.1%}")
    for e, vc, o, tr in sorted(worst, key=lambda w: -w[0])[:args.detail]:
        print(f"{vc} {o.id} ({o.devices} devices) submit {o.submit_s:.0f} estimate {o.estimate_s:.0f} "
              f"start {o.start_s:.0f} error {e:.0f} s; changes (t - submit, delta, cause, preempt, overtaken):")
        for t, d, cause, pre, ov in tr.changes:
            print(f"    {t - o.submit_s:10.0f} {d:+10.0f} {cause:14s} {pre!s:5s} {ov}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
