"""Queueing engine A/B: the same workloads on a baseline git ref and on the working tree.

The baseline (default ``aa6be7c``, the engine before it was split into stages, issue 19) is
extracted with ``git archive`` into a temporary directory; each side runs in its own subprocess
with ``PYTHONPATH`` pointing at a package layout of that tree (``accel``, with ``scheduler``,
``plugins`` and ``conformance`` mapped in as ``pyproject.toml`` maps them), so the two never
share imported code.  Runs alternate old/new; each prints wall and CPU seconds of the timed
part, and the summary gives the medians and the ratio new/old per workload.

Workloads (sized for a 2-core machine):
  ``cycle``: cycle_bench's full cycle at ``--hosts`` hosts and ``--queued`` queued jobs (90%
  filled, two classes, three tenants), first and follow-up cycle timed together;
  ``cycle-tiers``: the same with attained-service tiers (3,600 device-s, conservative backfill)
  and running jobs aged past their first tier, so the cycle preempts (cycle_bench ``--tiers 3600
  --age 4000 --mode conservative``: the preemption storm);
  ``cycle-tiered``: the tiered cycle without the storm (the running jobs just started, cycle_bench
  ``--tiers 3600 --mode conservative``);
  ``philly-quick``: ``run_philly.py --quick``'s 36 replays, serially;
  ``philly-vc``: one Philly VC (``--vc``, ``--vc-jobs`` jobs) with the ``default`` policy
  (attained-service tiers, suspend/resume, conservative backfill) and true durations;
  ``philly-deep``: a deep-queue prefix of the biggest VC as ``cv.py`` replays it: 6214e9's first
  ``--deep-jobs`` jobs on the 200 devices of cv.py's sizing rule (for the whole trace), tier
  threshold ``--deep-tier`` device-s, guard off, true durations, a start estimate at every
  submission (``cv.simulate``, the tree's own copy).

    python benchmarks/scheduler_speed/engine_ab.py                  # baseline aa6be7c, 3 rounds
    python benchmarks/scheduler_speed/engine_ab.py --ref HEAD~3 --rounds 5 --only cycle
    python benchmarks/scheduler_speed/engine_ab.py --ref 615bd87 --hosts 5000 --queued 10000 \
        --only cycle,cycle-tiered,cycle-tiers --rounds 2 --repeat 4    # issue 35's cycle goal

``--repeat N`` (cycle workloads): each worker builds its engine once and times the two cycles
in N forked copies of itself, reporting the fastest; on a shared, loaded machine the fastest of
several copies of the same work is the steadier number.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# the shared data beside the checkout (or beside the folder of worktrees), or $ACCEL_SHARED
SHARED = Path(os.environ.get("ACCEL_SHARED", ROOT.parent / "shared"))
if "ACCEL_SHARED" not in os.environ and not (SHARED / "traces" / "philly").exists():
    SHARED = ROOT.parents[1] / "shared"
WORKLOADS = ("cycle", "cycle-tiered", "cycle-tiers", "philly-quick", "philly-vc", "philly-deep")
MAPPED = {"scheduler": "scheduler", "plugins": "plugins", "conformance": "conformance"}
# philly-deep: the biggest VC and the devices cv.py's sizing rule gives its whole trace
DEEP_VC, DEEP_DEVICES = "6214e9", 200


def layout(src: Path, dest: Path) -> Path:
    """A directory for ``PYTHONPATH`` that imports ``accel`` (and its mapped subpackages) from ``src``."""
    pkg = dest / "accel"
    pkg.mkdir(parents=True)
    for item in (src / "accel").iterdir():
        (pkg / item.name).symlink_to(item)
    for name, d in MAPPED.items():
        if (src / d).exists() and not (pkg / name).exists():
            (pkg / name).symlink_to(src / d)
    return dest


def worker(workload: str, tree: Path, args: argparse.Namespace) -> dict[str, float]:
    """Run one workload in this process (imports come from ``PYTHONPATH``); wall and CPU seconds."""
    if workload in ("cycle", "cycle-tiered", "cycle-tiers"):
        # cycle_bench's workload, built by this checkout's copy of it (identical for both trees:
        # the engine under test comes from ``PYTHONPATH``)
        sys.path.insert(0, str(ROOT / "benchmarks" / "philly"))
        import cycle_bench

        from accel.scheduler.queueing import BackfillMode

        tiered = workload != "cycle"
        t_q = 4001.0 if workload == "cycle-tiers" else 1.0
        mode = BackfillMode.CONSERVATIVE if tiered else BackfillMode.EASY
        eng = cycle_bench.build(args.hosts, args.queued, mode=mode, tiers=(3600.0,) if tiered else (), t_q=t_q, seed=0)

        def timed() -> dict[str, float]:
            w0, c0 = time.perf_counter(), time.process_time()
            eng.cycle(t_q + 1.0)
            first, first_cpu = time.perf_counter() - w0, time.process_time() - c0
            eng.cycle(t_q + 2.0)
            return {"wall": time.perf_counter() - w0, "cpu": time.process_time() - c0, "first": first,
                    "first_cpu": first_cpu}

        if args.repeat <= 1:
            return timed()
        # --repeat: the same two cycles on the same built engine, each in a forked copy of this
        # process (the build is paid once); the fastest copy counts (the least disturbed by load)
        runs = []
        for _ in range(args.repeat):
            rfd, wfd = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(rfd)
                os.write(wfd, json.dumps(timed()).encode())
                os._exit(0)
            os.close(wfd)
            with os.fdopen(rfd, "rb") as fh:
                data = fh.read()
            os.waitpid(pid, 0)
            runs.append(json.loads(data))
        return {k: min(r[k] for r in runs) for k in runs[0]}
    sys.path.insert(0, str(tree / "benchmarks" / "philly"))
    import run_philly as rp  # the tree's own copy

    traces = str(SHARED / "traces" / "philly")
    if workload == "philly-deep":
        import cv  # the tree's own copy

        key = cv.RunKey(DEEP_VC, "default", args.deep_tier, None, "true", DEEP_DEVICES, args.deep_jobs)
        w0, c0 = time.perf_counter(), time.process_time()
        run = cv.simulate(key, traces)
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        # every job's start, end, estimate and lost work: both sides must give the same schedule
        rows = [[o.id, o.start_s, o.end_s, o.estimate_s, o.lost_s] for o in run.outcomes]
        digest = int(hashlib.sha256(json.dumps(rows).encode()).hexdigest()[:12], 16)
        return {"wall": wall, "cpu": cpu, "schedule": float(digest)}
    if workload == "philly-quick":
        tasks = [rp.Task(vc, pol, est, 64, rp.QUICK["jobs"], traces, tuple(rp.HISTORY.items()))
                 for vc in rp.QUICK["vcs"] for pol in rp.POLICIES for est in ("true", "history")]
    else:
        tasks = [rp.Task(args.vc, "default", "true", 64, args.vc_jobs, traces, tuple(rp.HISTORY.items()))]
    w0, c0 = time.perf_counter(), time.process_time()
    for task in tasks:
        rp.run_one(task)
    return {"wall": time.perf_counter() - w0, "cpu": time.process_time() - c0}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ref", default="aa6be7c", help="baseline git ref (default: aa6be7c)")
    ap.add_argument("--rounds", type=int, default=3, help="old/new pairs per workload (alternating)")
    ap.add_argument("--only", default=",".join(WORKLOADS), help="comma-separated workloads")
    ap.add_argument("--repeat", type=int, default=1,
                    help="cycle workloads: time the cycles this many times on one built engine (forked "
                         "copies), keep the fastest (a loaded machine)")
    ap.add_argument("--hosts", type=int, default=2000)
    ap.add_argument("--queued", type=int, default=6000)
    ap.add_argument("--vc", default="0e4a51")
    ap.add_argument("--vc-jobs", type=int, default=2000)
    ap.add_argument("--deep-jobs", type=int, default=4000, help="philly-deep: first N jobs of 6214e9")
    ap.add_argument("--deep-tier", type=float, default=3600.0, help="philly-deep: tier threshold, device-s")
    ap.add_argument("--worker", nargs=2, metavar=("WORKLOAD", "TREE"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        import accel.scheduler.queueing as q

        tree = Path(args.worker[1]).resolve()
        if not Path(q.__file__).resolve().is_relative_to(tree):
            raise SystemExit(f"imported {q.__file__}, not the tree under test {tree}")
        print(json.dumps(worker(args.worker[0], tree, args)))
        return 0
    names = [w for w in args.only.split(",") if w]
    bad = [w for w in names if w not in WORKLOADS]
    if bad:
        ap.error(f"unknown workload(s) {bad}; known: {list(WORKLOADS)}")
    if any(w.startswith("philly") for w in names) and not (SHARED / "traces" / "philly").exists():
        ap.error(f"no Philly traces under {SHARED} (set ACCEL_SHARED)")
    with tempfile.TemporaryDirectory() as tmp:
        old_src = Path(tmp) / "old-src"
        old_src.mkdir()
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.ref], check=True, capture_output=True)
        subprocess.run(["tar", "-x", "-C", str(old_src)], input=archive.stdout, check=True)
        trees = {"old": old_src, "new": ROOT}
        paths = {side: layout(src, Path(tmp) / f"{side}-path") for side, src in trees.items()}
        passthrough = ["--repeat", str(args.repeat), "--hosts", str(args.hosts), "--queued", str(args.queued),
                       "--vc", args.vc, "--vc-jobs", str(args.vc_jobs), "--deep-jobs", str(args.deep_jobs),
                       "--deep-tier", str(args.deep_tier)]
        results: dict[tuple[str, str], list[dict[str, float]]] = {}
        for w in names:
            for r in range(args.rounds):
                for side in (("old", "new") if r % 2 == 0 else ("new", "old")):
                    env = {**os.environ, "PYTHONPATH": str(paths[side])}
                    out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--worker", w,
                                          str(trees[side]), *passthrough], env=env, check=True,
                                         capture_output=True, text=True)
                    m = json.loads(out.stdout.strip().splitlines()[-1])
                    results.setdefault((w, side), []).append(m)
                    print(f"{w:13s} round {r} {side}: wall {m['wall']:.3f} s, cpu {m['cpu']:.3f} s"
                          + (f", first cycle {m['first']:.3f} s" if "first" in m else ""), flush=True)
    for w in names:
        digests = {m["schedule"] for side in ("old", "new") for m in results[(w, side)] if "schedule" in m}
        if len(digests) > 1:
            print(f"{w}: the two trees gave DIFFERENT schedules", file=sys.stderr)
            return 1
        if digests:
            print(f"{w}: both trees gave the same schedule (every job's start, end, estimate, lost work)")
    print(f"\nbaseline {args.ref} vs working tree, medians of {args.rounds} alternating rounds:")
    cols = ("old wall", "new wall", "ratio", "old cpu", "new cpu", "ratio")
    print(f"{'workload':13s} " + " ".join(f"{c:>{6 if c == 'ratio' else 9}s}" for c in cols))
    for w in names:
        med = {(side, k): statistics.median(m[k] for m in results[(w, side)])
               for side in ("old", "new") for k in ("wall", "cpu")}
        print(f"{w:13s} {med['old', 'wall']:9.3f} {med['new', 'wall']:9.3f} "
              f"{med['new', 'wall'] / med['old', 'wall']:6.3f} {med['old', 'cpu']:9.3f} {med['new', 'cpu']:9.3f} "
              f"{med['new', 'cpu'] / med['old', 'cpu']:6.3f}")
    firsts = [w for w in names if all("first_cpu" in m for side in ("old", "new") for m in results[(w, side)])]
    if firsts:
        print("\nthe first (full) cycle alone, wall seconds, medians:")
        for w in firsts:
            old = statistics.median(m["first"] for m in results[(w, "old")])
            new = statistics.median(m["first"] for m in results[(w, "new")])
            print(f"{w:13s} {old:9.3f} {new:9.3f} {new / old:6.3f}")
        print("the first (full) cycle alone, CPU seconds, medians:")
        for w in firsts:
            old = statistics.median(m["first_cpu"] for m in results[(w, "old")])
            new = statistics.median(m["first_cpu"] for m in results[(w, "new")])
            print(f"{w:13s} {old:9.3f} {new:9.3f} {new / old:6.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
