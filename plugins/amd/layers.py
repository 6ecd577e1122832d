"""The parts of the AMD plugin that other ROCm-derived stacks (Hygon DCU) reuse.

Nothing here imports pyrsmi or amdsmi: readings (:class:`GpuReading`), their merge, the health
mapping table, the model builder parameterised by a :class:`Flavor`, the amdgpu sysfs reader
and the ``rocm-smi --json`` parser (AMD bytes and Hygon MiB alike).
"""

from ._amdgpu_sysfs import driver_live, kfd_xgmi_pairs, read_cards
from ._build import (
    AMD,
    Flavor,
    architecture_of,
    build_devices,
    domains_for,
    health_for,
    links_for,
    processes_for,
    telemetry_for,
)
from ._health import conditions_for, health_monitored
from ._readings import (
    BadPage,
    EccCount,
    GpuReading,
    ProcessReading,
    decode_bdf_int,
    merge,
    normalize_unique_id,
    pcie_gen_from_speed,
)
from ._rocm_smi import parse_rocm_smi_json

__all__ = [
    "AMD",
    "BadPage",
    "EccCount",
    "Flavor",
    "GpuReading",
    "ProcessReading",
    "architecture_of",
    "build_devices",
    "conditions_for",
    "decode_bdf_int",
    "domains_for",
    "driver_live",
    "health_for",
    "health_monitored",
    "kfd_xgmi_pairs",
    "links_for",
    "merge",
    "normalize_unique_id",
    "parse_rocm_smi_json",
    "pcie_gen_from_speed",
    "processes_for",
    "read_cards",
    "telemetry_for",
]
