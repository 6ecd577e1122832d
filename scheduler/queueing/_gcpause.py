"""The cyclic garbage collector paused for the length of a scheduling cycle.

A cycle at 10,000 queued jobs on 5,000 hosts allocates hundreds of thousands of short-lived
objects (keys, requests, events, profile rows), none of them in reference cycles; each 700
allocations start a collection that walks the young objects, and the older generations' runs
walk the engine's whole state (every job record).  Measured on the cycle benchmark
(``benchmarks/scheduler_speed``): about a tenth of the cycle's CPU time.  Pausing the collector
for the cycle changes nothing the cycle decides; what is freed by reference counting is freed
as before, and cyclic garbage made during the cycle is collected after it.

Nested and concurrent cycles (several engines, threads) share one count: the collector is
re-enabled when the last of them ends, and only if it was enabled when the first began.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["gc_paused"]

_lock = threading.Lock()
_depth = 0
_was_enabled = False


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic collector while the block runs (see the module docstring)."""
    global _depth, _was_enabled
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            if _was_enabled:
                gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _was_enabled:
                gc.enable()
