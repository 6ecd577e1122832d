"""Child process of the read-only journal tests: a scheduler that keeps writing its journal.

Usage: python _live_writer.py JOURNAL

It opens the journal as a writer, then reads commands from stdin, one a line:
``batch N`` runs N one-device jobs (submit, cycle, finish, cycle: one transaction each call)
and prints the journal's row count; ``close`` closes the journal and prints ``closed``.
"""

from __future__ import annotations

import sys

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from conftest import cluster, job

from accel.scheduler.queueing import Policy, PriceTable, QueueingScheduler


def main() -> None:
    eng = QueueingScheduler(cluster(hosts=2), Policy(), journal=sys.argv[1],
                            prices=PriceTable(per_device_hour={"A100": 2.0}))
    print("open", flush=True)
    t, n = 0.0, 0
    for line in sys.stdin:
        cmd = line.split()
        if cmd[0] == "batch":
            for _ in range(int(cmd[1])):
                eng.submit(job(f"j{n}", 1, 60.0), t)
                eng.cycle(t)
                t += 1.0
                eng.finish(f"j{n}", t)
                eng.cycle(t)
                n += 1
            print(eng.journal.count(), flush=True)
        elif cmd[0] == "close":
            eng.journal.close()
            print("closed", flush=True)
            return


if __name__ == "__main__":
    main()
