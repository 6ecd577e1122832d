"""AMD GPUs (Instinct, Radeon) for accel: backend ``amd``.

Reads in three layers and records in the inventory's ``sources`` which one gave each part:
``pyrsmi`` (names, ids, memory, utilisation, power), the ``amdsmi`` package where it imports
(RAS / ECC, bad pages, temperatures, power caps, clocks, firmware, serial, xGMI topology,
CPX / NPS partitions, processes) and the amdgpu sysfs interface (fallback and oracle).
Install the extra ``accel-sdk[amd]`` for pyrsmi; amdsmi ships with ROCm.

Importing this module loads neither library (``PLUGIN`` is light; ``open()`` loads them).
The layers shared with the Hygon DCU plugin are in :mod:`accel.plugins.amd.layers`; fakes
for tests (and the ``scenario`` option) in :mod:`accel.plugins.amd.testing`.
"""

from ._plugin import AmdPlugin

__all__ = ["PLUGIN", "AmdPlugin"]

#: The object the ``amd`` entry point names.
PLUGIN = AmdPlugin()
