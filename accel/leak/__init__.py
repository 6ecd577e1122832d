"""Memory-leak detection: used memory creeping up until the device is full.

The classic inference-node failure is a slow leak: each request leaves a little device memory
behind, and hours later the card runs out and every request on it fails.  This package watches
the *floor* of used memory per device, and per process where the backend reports processes, and
raises a ``MemoryLeakSuspected`` warning condition with the estimated time to full, while telling
a leak from what is not one: a caching allocator growing to its working set and holding it,
garbage collection's sawtooth, and steps at model load.

* :class:`LeakDetector`: the test on raw samples (any key, any clock), documented in
  ``accel/leak/_detector.py`` and measured in ``benchmarks/leak``.
* :class:`LeakWatch`: feeds a detector from successive :class:`~accel.model.HostInventory`
  readings and puts the conditions into device health (``annotate``).
* :class:`LeakHistory`: the detector's state in SQLite, for runs that take one reading each.

The condition is a warning with action ``investigate``: it does not change a device's state
(a device that leaks still works, until it does not); the exporter exports it as
``accel_health_condition{reason="MemoryLeakSuspected"}`` with
``accel_memory_leak_seconds_to_full``, and the scheduler counts such a device as degraded, so
new work goes elsewhere first.
"""

from ._detector import LeakDetector, LeakVerdict, mann_kendall_z
from ._history import LeakHistory
from ._watch import LEAK_REASON, LeakWatch, leak_condition, with_leak_conditions

__all__ = [
    "LEAK_REASON",
    "LeakDetector",
    "LeakHistory",
    "LeakVerdict",
    "LeakWatch",
    "leak_condition",
    "mann_kendall_z",
    "with_leak_conditions",
]
