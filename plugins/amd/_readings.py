"""Layer-neutral readings of one ROCm-family GPU handle, and how layers are merged.

Every layer (pyrsmi, amdsmi, amdgpu sysfs, a CLI parser) turns what it read into a
:class:`GpuReading` whose fields are already in SI units and already free of vendor sentinels
(``-1``, ``'N/A'``, ``''``): a value that could not be read is ``None``.  Readings of the same
handle from several layers are merged by :func:`merge`, first non-``None`` wins, and the layer
that gave each part is remembered in ``sources`` so the inventory can say who reported what.

Nothing here imports a vendor library; the Hygon plugin builds the same readings from its CLI.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "BadPage",
    "EccCount",
    "GpuReading",
    "ProcessReading",
    "decode_bdf_int",
    "merge",
    "normalize_unique_id",
    "pcie_gen_from_speed",
]


@dataclass(frozen=True)
class EccCount:
    """Error counts of one RAS block (or the device total)."""

    correctable: int | None = None
    uncorrectable: int | None = None
    deferred: int | None = None


@dataclass(frozen=True)
class BadPage:
    """One retired (bad) VRAM page.  ``status`` is ``reserved``, ``pending`` or ``unreservable``."""

    address: int
    size_bytes: int | None
    status: str


@dataclass(frozen=True)
class ProcessReading:
    pid: int
    name: str | None = None
    vram_bytes: int | None = None


@dataclass
class GpuReading:
    """What one layer knows about one GPU handle (one partition in CPX mode).

    ``index`` is the handle's enumeration index (the HIP / ``HIP_VISIBLE_DEVICES`` order), not an
    identity.  ``partition_index`` is the partition number inside its physical device (0 in SPX).
    ``not_supported`` names the parts the layer asked for and was told "not supported", so the
    backend can list them as unsupported rather than as merely unread.
    """

    index: int | None = None
    bus_id: str | None = None
    partition_index: int | None = None
    name: str | None = None
    vendor_id: str | None = None
    pci_device_id: str | None = None
    pci_revision: str | None = None
    subsystem_id: str | None = None
    unique_id: str | None = None
    uuid: str | None = None
    uuid_synthesized: bool = False
    serial_number: str | None = None
    isa: str | None = None
    compute_units: int | None = None
    form_factor: str | None = None
    memory_total_bytes: int | None = None
    memory_used_bytes: int | None = None
    memory_kind: str | None = None
    memory_generation: str | None = None
    memory_bus_width_bits: int | None = None
    utilization_ratio: float | None = None
    memory_utilization_ratio: float | None = None
    power_watts: float | None = None
    energy_joules: float | None = None
    power_cap_watts: float | None = None
    power_cap_default_watts: float | None = None
    power_cap_min_watts: float | None = None
    power_cap_max_watts: float | None = None
    temperatures_celsius: dict[str, float] = field(default_factory=dict)
    temp_slowdown_celsius: float | None = None
    temp_shutdown_celsius: float | None = None
    clocks_hertz: dict[str, float] = field(default_factory=dict)
    max_clock_hertz: float | None = None
    memory_max_clock_hertz: float | None = None
    fan_ratio: float | None = None
    driver_version: str | None = None
    vbios_version: str | None = None
    firmware: dict[str, str] = field(default_factory=dict)
    numa_node: int | None = None
    pcie_gen_current: int | None = None
    pcie_width_current: int | None = None
    pcie_gen_max: int | None = None
    pcie_width_max: int | None = None
    pcie_replay_total: int | None = None
    xgmi_hive_id: str | None = None
    xgmi_node_id: int | None = None
    xgmi_link_status: tuple[str, ...] | None = None
    xgmi_error_status: int | None = None
    ecc_supported: bool | None = None
    ecc_enabled: bool | None = None
    ecc_total: EccCount | None = None
    ecc_blocks: dict[str, EccCount] = field(default_factory=dict)
    ras_states: dict[str, str] = field(default_factory=dict)
    bad_pages: tuple[BadPage, ...] | None = None
    bad_page_threshold: int | None = None
    throttle_reasons: tuple[str, ...] | None = None
    compute_partition: str | None = None
    memory_partition: str | None = None
    processes: tuple[ProcessReading, ...] | None = None
    render_node: str | None = None
    card_node: str | None = None
    performance_level: str | None = None
    mode: str | None = None
    not_supported: set[str] = field(default_factory=set)
    #: Part name -> the layer that gave it (``pyrsmi``, ``amdsmi``, ``sysfs``, ``hy-smi``...).
    sources: dict[str, str] = field(default_factory=dict)
    #: Problems met while reading (part -> message); they never stop the other parts.
    errors: dict[str, str] = field(default_factory=dict)


_META = {"index", "not_supported", "sources", "errors", "uuid_synthesized", "partition_index"}


def _empty(value: Any) -> bool:
    return value is None or value == {} or value == ()


def merge(readings: list[tuple[str, GpuReading]]) -> GpuReading:
    """Merge readings of one handle, highest priority first: the first non-empty value wins.

    ``readings`` pairs each reading with its layer name.  Dict fields (temperatures, clocks,
    ECC blocks, RAS states, firmware) are merged key by key.  ``sources`` records, per field,
    the layer whose value was kept; ``not_supported`` keeps only what *no* layer could give.
    """
    out = GpuReading()
    supported_somewhere: set[str] = set()
    unsupported: set[str] = set()
    for layer, reading in readings:
        for f in dataclasses.fields(GpuReading):
            name = f.name
            if name in _META:
                continue
            value = getattr(reading, name)
            if _empty(value):
                continue
            supported_somewhere.add(name)
            current = getattr(out, name)
            if isinstance(value, dict) and isinstance(current, dict):
                added = {k: v for k, v in value.items() if k not in current}
                if added:
                    current.update(added)
                    out.sources.setdefault(name, layer)
            elif _empty(current):
                setattr(out, name, value)
                out.sources[name] = layer
                if name == "uuid":
                    out.uuid_synthesized = reading.uuid_synthesized
        unsupported |= reading.not_supported
        for part, msg in reading.errors.items():
            out.errors.setdefault(part, f"{layer}: {msg}")
        if out.index is None:
            out.index = reading.index
        if out.partition_index is None:
            out.partition_index = reading.partition_index
    out.not_supported = unsupported - supported_somewhere
    return out


_HEX = re.compile(r"^(0x)?([0-9a-fA-F]{1,16})$")


def normalize_unique_id(raw: object) -> str | None:
    """``0x`` plus 16 lower-case hex digits, or ``None`` for a sentinel / placeholder.

    amdsmi prints ``asic_serial`` as ``0x%016X``, sysfs ``unique_id`` and Hygon print bare hex,
    rocm-smi prints ``0x...``.  All-zero and all-F values are "not available" sentinels.
    """
    if isinstance(raw, int) and not isinstance(raw, bool):
        if raw <= 0 or raw >= 0xFFFFFFFFFFFFFFFF:
            return None
        return f"0x{raw:016x}"
    if not isinstance(raw, str):
        return None
    m = _HEX.match(raw.strip())
    if not m:
        return None
    value = int(m.group(2), 16)
    if value == 0 or value == 0xFFFFFFFFFFFFFFFF:
        return None
    return f"0x{value:016x}"


def decode_bdf_int(value: int) -> str | None:
    """Canonical bus id from the 64-bit BDF integer pyrsmi and amdsmi return.

    pyrsmi's package mode encodes ``domain << 32 | bus << 8 | dev << 3 | fn``; the ctypes
    ``amdsmi_bdf_t`` bitfield puts the domain at bit 16.  Both agree for domain 0; a value
    with bits above 31 set is read the package-mode way.
    """
    if value < 0:
        return None
    fn = value & 0x7
    dev = (value >> 3) & 0x1F
    bus = (value >> 8) & 0xFF
    domain = value >> 32 if value >> 32 else (value >> 16) & 0xFFFF
    if domain > 0xFFFF:
        return None
    return f"{domain:04x}:{bus:02x}:{dev:02x}.{fn}"


#: PCIe generation by per-lane transfer rate in GT/s.
_GEN_BY_GTS = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}


def pcie_gen_from_speed(gts: float | None) -> int | None:
    """PCIe generation from a per-lane rate in GT/s (``16.0`` -> 4); ``None`` when unknown."""
    if gts is None:
        return None
    for rate, gen in _GEN_BY_GTS.items():
        if abs(gts - rate) < 0.01:
            return gen
    return None
