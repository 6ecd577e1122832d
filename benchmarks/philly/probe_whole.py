"""Replay one Philly VC's whole trace as ``cv.py`` does, logging how far it got, and cache the run.

``cv.py`` replays each VC in one call and says nothing until it ends; a VC with a deep queue
(6214e9: 51,258 jobs on 200 devices) can take longer than a session has.  This replays the same
run (``cv.simulate``'s engine, policy, sizing and estimator, built by ``cv.simulate`` itself)
one scheduling instant at a time, prints a JSON line every ``--every`` CPU-seconds (jobs
submitted, waiting, running, simulated day, CPU and wall seconds), and when the replay
completes writes it into a ``cv.py`` cache directory under the key ``cv.py`` would use, so a
later ``cv.py --cache DIR`` reads it instead of replaying it.  A replay that is killed leaves no
cache file.

    python benchmarks/philly/probe_whole.py --vc 6214e9 --policy fifo --cache cv-cache
    python benchmarks/philly/probe_whole.py --vc 6214e9 --policy default --tier 14400 --cache cv-cache
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import cv  # noqa: E402  (the benchmark's own modules, beside this file)
import run_philly  # noqa: E402

from accel.scheduler.queueing import Simulator, load_philly  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vc", required=True)
    ap.add_argument("--policy", choices=("fifo", "default"), default="default")
    ap.add_argument("--tier", type=float, default=None, help="tier threshold, device-s (default policy)")
    ap.add_argument("--guard", type=float, default=None, help="starvation guard ratio (default: off)")
    ap.add_argument("--estimator", choices=("true", "history"), default="true")
    ap.add_argument("--devices", type=int, default=None, help="default: cv.py's sizing rule for the whole trace")
    ap.add_argument("--limit", type=int, default=None, help="only the first N jobs (a check against cv.simulate)")
    ap.add_argument("--traces", default=str(run_philly.TRACES))
    ap.add_argument("--cache", type=Path, required=True, help="cv.py cache directory to write the run into")
    ap.add_argument("--every", type=float, default=30.0, help="CPU seconds between progress lines")
    args = ap.parse_args(argv)
    if args.policy == "default" and args.tier is None:
        ap.error("--policy default needs --tier")
    for name, value in (("--tier", args.tier), ("--guard", args.guard), ("--every", args.every)):
        if value is not None and not (math.isfinite(value) and value > 0):
            ap.error(f"argument {name}: must be a finite number > 0, got {value}")
    for name, count in (("--devices", args.devices), ("--limit", args.limit)):
        if count is not None and count < 1:
            ap.error(f"argument {name}: must be at least 1, got {count}")
    trace = Path(args.traces) / f"trace_{args.vc}.csv"
    if not trace.is_file():
        ap.error(f"argument --vc: no trace file {trace}")
    # cv.py sizes a VC on its whole trace (a --limit check keeps the whole trace's size)
    devices = args.devices if args.devices is not None else \
        cv.size_cluster(load_philly(trace))
    key = cv.RunKey(args.vc, args.policy, None if args.policy == "fifo" else args.tier,
                    None if args.policy == "fifo" else args.guard, args.estimator, devices, args.limit)
    built: dict[str, Any] = {}

    def capture(sim: Simulator) -> Any:
        built["sim"] = sim
        raise _Built

    # cv.simulate builds the engine and the simulator and then runs it: stop it at ``run`` and
    # step the very same objects here
    real_run = Simulator.run
    Simulator.run = capture  # type: ignore[method-assign,assignment]
    try:
        cv.simulate(key, args.traces)
    except _Built:
        pass
    finally:
        Simulator.run = real_run  # type: ignore[method-assign]
    sim: Simulator = built["sim"]
    eng = sim.engine
    first = min((j.submit_s for j in sim.jobs), default=0.0)
    w0, c0 = time.perf_counter(), time.process_time()
    shown, cycles = 0.0, 0

    def line(**extra: Any) -> None:
        print(json.dumps({"cpu_s": round(time.process_time() - c0, 1), "wall_s": round(time.perf_counter() - w0, 1),
                          "cycles": cycles, "submitted": len(eng.jobs), "waiting": len(eng.queue()),
                          "running": len(eng.running()), "sim_day": round((eng.now - first) / 86400, 1),
                          **extra}), flush=True)

    while sim.step():
        cycles += 1
        if time.process_time() - c0 - shown >= args.every:
            shown = time.process_time() - c0
            line()
    res = sim.result()
    run = cv.Run(key, res.outcomes, res.busy_device_s, res.makespan_s, time.perf_counter() - w0)
    cv.save(run, args.cache)
    line(done=True, cache=str(args.cache / key.filename()))
    return 0


class _Built(Exception):
    """Raised by the stand-in ``Simulator.run`` once ``cv.simulate`` has built its simulator."""


if __name__ == "__main__":
    raise SystemExit(main())
