"""What the ``local`` executor's supervisor costs per job, against a bare process start.

Times, median of N, in the same run: ``subprocess.run(["true"])`` (the baseline: one fork and
exec), and the ``local`` executor's ``start`` of the same ``true`` (launcher, forked supervisor,
the job, the run file written and fsynced) followed by polls until its exit record is there.
Prints milliseconds per job and the ratio.  A simulated host stands in for this one's devices.

    python benchmarks/service_local_start.py [--runs 30]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30, help="jobs per measurement (default 30)")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")

    from accel.service import LaunchSpec
    from accel.service.executors._local import LocalExecutor
    from accel.sim.cluster import generate_cluster

    inv = generate_cluster(1, "rtx4090-4")[0]
    bare: list[float] = []
    for _ in range(args.runs):
        t = time.perf_counter()
        subprocess.run(["true"], check=True)
        bare.append(time.perf_counter() - t)
    with tempfile.TemporaryDirectory(prefix="accel-bench-") as tmp:
        ex = LocalExecutor(Path(tmp) / "state", inventory=lambda: inv, allow_root=os.geteuid() == 0)
        supervised: list[float] = []
        for i in range(args.runs):
            log_dir = Path(tmp) / f"job-{i}"
            log_dir.mkdir()
            spec = LaunchSpec(job_id=f"job-{i}", tenant="t", argv=("true",), devices=(), log_dir=log_dir)
            t = time.perf_counter()
            handle = ex.start(spec)
            while ex.poll(handle).running:
                time.sleep(0.001)
            supervised.append(time.perf_counter() - t)
    b, s = statistics.median(bare) * 1e3, statistics.median(supervised) * 1e3
    print(f"bare fork+exec of true:            {b:8.2f} ms (median of {args.runs})")
    print(f"local executor, start to exit rec: {s:8.2f} ms (median of {args.runs})")
    print(f"ratio: {s / b:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
