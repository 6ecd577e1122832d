"""Run ``accel ARGS...`` under cProfile in every thread; on exit write the merged stats to FILE.

    python benchmarks/service/_profiled.py FILE serve --state ... --sim ...

For ``bench_api.py --profile``: the service's time is spread over uvicorn's event loop (the main
thread), the thread pool of the handlers and the live loop's thread, so each thread gets its own
profiler (started where the thread starts) and the stats are merged when the process exits.
"""

from __future__ import annotations

import atexit
import cProfile
import pstats
import sys
import threading
from typing import Any

_profiles: list[cProfile.Profile] = []
_lock = threading.Lock()


def _new() -> cProfile.Profile:
    prof = cProfile.Profile()
    with _lock:
        _profiles.append(prof)
    return prof


def _wrap_threads() -> None:
    inner = threading.Thread._bootstrap_inner  # type: ignore[attr-defined]

    def profiled(self: threading.Thread) -> Any:
        prof = _new()
        prof.enable()
        try:
            return inner(self)
        finally:
            prof.disable()

    threading.Thread._bootstrap_inner = profiled  # type: ignore[attr-defined]


def _dump(path: str) -> None:
    merged: pstats.Stats | None = None
    with _lock:
        profs = list(_profiles)
    for prof in profs:
        try:
            prof.create_stats()
            stats = pstats.Stats(prof)
        except (TypeError, ValueError):  # a profile of a thread that never ran anything
            continue
        if merged is None:
            merged = stats
        else:
            merged.add(stats)
    if merged is not None:
        merged.dump_stats(path)


def main() -> None:
    path = sys.argv[1]
    sys.argv = ["accel", *sys.argv[2:]]
    _wrap_threads()
    atexit.register(_dump, path)
    from accel.cli import main as accel_main

    prof = _new()
    prof.enable()
    try:
        code = accel_main()
    finally:
        prof.disable()
    sys.exit(code)


if __name__ == "__main__":
    main()
