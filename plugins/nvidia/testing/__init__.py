"""A faithful fake NVML for tests, demos and CI without NVIDIA hardware (a test facility).

Importable as ``accel.plugins.nvidia.testing``.  :class:`FakeNVML` has the function names, return
shapes, error classes and quirks of the ``pynvml`` module of ``nvidia-ml-py``; scenarios are data
(:data:`SCENARIOS`, :func:`get_scenario`).  The NVIDIA backend uses it when opened with the
option ``scenario``::

    accel ls --backend nvidia --option scenario=h100-nvswitch-8

Tests can also install it over the real module's functions::

    with FakeNVML("a100-mig").installed():
        backend = PLUGIN.open(BackendConfig())   # the real code path, talking to the fake

Nothing here is used in production unless ``scenario`` is given.
"""

from ._fake import FakeNVML
from ._profiles import (
    SCENARIOS,
    SKUS,
    EventSpec,
    GpuSpec,
    LinkSpec,
    MigProfileSpec,
    MigSlot,
    ProcessSpec,
    Scenario,
    dgx_h100_serial,
    dgx_h100_uuid,
    get_scenario,
)

__all__ = [
    "SCENARIOS",
    "SKUS",
    "EventSpec",
    "FakeNVML",
    "GpuSpec",
    "LinkSpec",
    "MigProfileSpec",
    "MigSlot",
    "ProcessSpec",
    "Scenario",
    "dgx_h100_serial",
    "dgx_h100_uuid",
    "get_scenario",
]
