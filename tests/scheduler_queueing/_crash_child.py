"""Child process of the crash tests: replay a workload with a file journal, slowly.

Usage: python _crash_child.py JOURNAL WORKLOAD [KILL_AT]

It starts afresh when the journal has no event and otherwise rebuilds the engine from it and
resumes.  With ``KILL_AT`` it SIGKILLs itself right after the commit that brings the journal
to at least that many events.
"""

from __future__ import annotations

import os
import signal
import sys
import time

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _crash_common import WORKLOADS, make_cluster

from accel.scheduler.queueing import Journal, QueueingScheduler, Simulator


def main() -> None:
    path, name = sys.argv[1], sys.argv[2]
    kill_at = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    w = WORKLOADS[name]
    jr = Journal(path)
    if kill_at:
        commit = jr.flush

        def flush_then_die() -> None:
            commit()
            if jr.count() >= kill_at:
                os.kill(os.getpid(), signal.SIGKILL)

        jr.flush = flush_then_die  # type: ignore[method-assign]
    if jr.count() == 0:
        eng = QueueingScheduler(make_cluster(), w.policy, tenants=w.tenants, prices=w.prices, journal=jr)
        sim = Simulator(eng, w.jobs(), health_events=w.health)
    else:
        eng = QueueingScheduler.recover(make_cluster(), jr, w.policy, tenants=w.tenants, prices=w.prices)
        sim = Simulator.resume(eng, w.jobs(), health_events=w.health)
    while sim.step():
        time.sleep(0.002)  # give the parent time to kill us mid-run
    jr.close()
    print("done", flush=True)


if __name__ == "__main__":
    main()
