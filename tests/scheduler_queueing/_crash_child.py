"""Child process of the crash test: replay a small trace with a file journal, slowly.

Usage: python _crash_child.py JOURNAL [resume]
"""

from __future__ import annotations

import sys
import time

from accel.scheduler.queueing import QueueingScheduler

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _crash_common import HEALTH, POLICY, PRICES, make_cluster, make_jobs

from accel.scheduler.queueing import Simulator


def main() -> None:
    path = sys.argv[1]
    if len(sys.argv) > 2 and sys.argv[2] == "resume":
        eng = QueueingScheduler.recover(make_cluster(), path, POLICY, prices=PRICES)
        sim = Simulator.resume(eng, make_jobs(), health_events=HEALTH)
    else:
        eng = QueueingScheduler(make_cluster(), POLICY, prices=PRICES, journal=path)
        sim = Simulator(eng, make_jobs(), health_events=HEALTH)
    while sim.step():
        time.sleep(0.002)  # give the parent time to kill us mid-run
    print("done", flush=True)


if __name__ == "__main__":
    main()
