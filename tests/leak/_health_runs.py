"""Child process of the leak-history test: ``accel health --json ARGS`` run N times in a row, as
cron would run it (each run its own session, detector and history load/save).

Usage: python _health_runs.py N DEVICE_INDEX ARGS...

Prints one line per run: the run's number and device DEVICE_INDEX's MemoryLeakSuspected message,
or ``-`` when it has none.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys

from accel.cli import main as accel_main
from accel.leak import LEAK_REASON


def main() -> None:
    n, pos, argv = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
    for run in range(n):
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            code = accel_main(["health", *argv, "--json"])
        assert code == 0, code
        devices = json.loads(buf.getvalue())["devices"]
        dev = devices[sorted(devices)[pos]]
        msgs = [c["message"] for c in dev["conditions"] if c["reason"] == LEAK_REASON]
        print(run, msgs[0] if msgs else "-", flush=True)


if __name__ == "__main__":
    main()
