"""The abstract device: the only description of an accelerator a scheduler ever sees."""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Any

from pydantic import Field, field_validator, model_validator

from ._base import (
    QUALIFIED_NAME,
    Bytes,
    BytesPerSecond,
    Celsius,
    Count,
    Hertz,
    Model,
    VendorExtras,
    Watts,
    extra_problem,
)
from ._pci import BUS_ID
from .health import Health

__all__ = [
    "Binding",
    "Capabilities",
    "ComputeInfo",
    "Device",
    "DeviceKind",
    "FormFactor",
    "MemoryKind",
    "MemoryRegion",
    "PartitionMode",
    "PartitionScheme",
    "PciInfo",
    "PowerLimits",
    "SharingInfo",
    "SharingMode",
    "ThermalLimits",
    "VersionInfo",
    "device_id_for",
    "is_placeholder_identity",
]

#: ``<vendor>:<uuid>`` or ``<vendor>:pci-<dddd:bb:dd.f>``; a partition adds ``/<suffix>``.
DEVICE_ID = re.compile(r"^[a-z][a-z0-9_-]*:[A-Za-z0-9._:/-]+$")


class DeviceKind(StrEnum):
    GPU = "gpu"
    NPU = "npu"
    TPU = "tpu"
    DCU = "dcu"
    MLU = "mlu"
    XPU = "xpu"
    GCU = "gcu"
    #: Intel Gaudi: an "HPU" in Habana's docs and in PyTorch's device type (``hpu``).
    HPU = "hpu"
    AI_ACCELERATOR = "ai_accelerator"
    FPGA = "fpga"


class FormFactor(StrEnum):
    SXM = "sxm"
    OAM = "oam"
    PCIE = "pcie"
    MODULE = "module"
    SOC = "soc"


class MemoryKind(StrEnum):
    HBM = "hbm"
    GDDR = "gddr"
    LPDDR = "lpddr"
    DDR = "ddr"
    SRAM = "sram"
    UNIFIED = "unified"
    UNKNOWN = "unknown"


class PartitionScheme(StrEnum):
    NONE = "none"
    MIG = "mig"
    AMD_XCP = "amd_xcp"
    ASCEND_VNPU = "ascend_vnpu"
    CAMBRICON_MIM = "cambricon_mim"
    VGPU = "vgpu"
    SRIOV = "sriov"
    SHARED = "shared"
    OTHER = "other"


class SharingMode(StrEnum):
    EXCLUSIVE = "exclusive"
    TIME_SLICING = "time_slicing"
    MPS = "mps"
    VENDOR_SHARE = "vendor_share"
    CONSUMABLE = "consumable"


#: Words tools print where an identity is not available (compared case-insensitively).
_PLACEHOLDER_WORDS = frozenset({
    "", "-", "--", "n/a", "na", "[n/a]", "none", "null", "nil", "unknown", "not available",
    "not supported", "[not supported]", "notsupported", "default", "invalid",
})

#: Firmware defaults that many cards of one vendor print alike (lower-case, prefixes stripped).
#: Each comes with the real sample that shows it; docs/identity.md lists them.
_VENDOR_PLACEHOLDERS: dict[str, frozenset[str]] = {
    # Hygon Z100L: ``"Unique ID": "a000000000000000"`` (tests/fixtures/hygon/rocm-smi-json_z100l_1dcu.txt,
    # from gpustack's detector docstring; every Z100L with unprogrammed fuses prints it).
    "hygon": frozenset({"a000000000000000"}),
}

#: Prefixes a tool or plugin puts before the identity proper.
_PREFIXES = ("gpu-", "mig-", "npu-", "dcu-", "sn-", "0x")
_MASKED = re.compile(r"[x*?#]{3,}", re.I)
_HEXDIGITS = re.compile(r"^[0-9a-f]{1,32}$")
_SEPARATORS = re.compile(r"[-:._\s]")


def is_placeholder_identity(vendor: str, value: object) -> bool:
    """True when ``value`` (a UUID, unique id or serial) does not tell one device from another.

    Placeholders are never made into a stable id: empty or ``N/A``-like words, author- or
    tool-masked values (``xxxx``, ``CPU-XX``, ``****``), all-zero and all-F hex (``0x0``,
    ``0xFFFFFFFFFFFFFFFF``, ``GPU-00000000-0000-...``), and per-vendor firmware defaults that
    whole fleets print alike (Hygon ``a000000000000000``).  ``vendor`` selects the defaults;
    see ``docs/identity.md`` for the list and the sample behind each entry.
    """
    if value is None:
        return True
    if isinstance(value, bool):
        return True
    if isinstance(value, int):
        if value <= 0 or value >= 0xFFFFFFFFFFFFFFFF:
            return True
        value = f"{value:016x}"
    if not isinstance(value, str):
        return True
    text = value.strip().lower()
    if text.startswith(f"{vendor.lower()}:"):
        text = text[len(vendor) + 1:]
    if text in _PLACEHOLDER_WORDS:
        return True
    if _MASKED.search(text) or text.endswith("-xx") or text == "xx":
        return True
    for prefix in _PREFIXES:
        if text.startswith(prefix):
            text = text[len(prefix):]
            break
    if text in _PLACEHOLDER_WORDS:
        return True
    bare = _SEPARATORS.sub("", text)
    if not bare:
        return True
    if set(bare) <= {"0"} or set(bare) <= {"f"}:
        return True
    defaults = _VENDOR_PLACEHOLDERS.get(vendor.lower(), frozenset())
    if bare in defaults:
        return True
    if _HEXDIGITS.match(bare):
        return any(int(bare, 16) == int(d, 16) for d in defaults if _HEXDIGITS.match(d))
    return False


def device_id_for(vendor: str, *, uuid: str | None = None, bus_id: str | None = None) -> str:
    """The canonical stable id: ``<vendor>:<uuid>`` for a real UUID, else ``<vendor>:pci-<bdf>``.

    Never the enumeration index: indices change with ``*_VISIBLE_DEVICES`` and reboots.  A
    placeholder ``uuid`` (:func:`is_placeholder_identity`: ``N/A``, masked, all-zero, all-F,
    a vendor's firmware default) is ignored, so the id falls back to the PCI address; with no
    bus id either this raises ``ValueError`` rather than give every such card one id.
    """
    if uuid and not is_placeholder_identity(vendor, uuid):
        return f"{vendor}:{uuid}"
    if bus_id:
        return f"{vendor}:pci-{bus_id}"
    if uuid:
        raise ValueError(f"{uuid!r} is a placeholder identity and there is no PCI bus id to fall back to")
    raise ValueError("a stable device id needs a UUID or a PCI bus id")


class PciInfo(Model):
    """PCI identity and place.  ``bus_id`` is lower-case ``dddd:bb:dd.f``."""

    bus_id: str
    vendor_id: str | None = Field(default=None, pattern=r"^[0-9a-f]{4}$")
    device_id: str | None = Field(default=None, pattern=r"^[0-9a-f]{4}$")
    subsystem_vendor_id: str | None = Field(default=None, pattern=r"^[0-9a-f]{4}$")
    subsystem_device_id: str | None = Field(default=None, pattern=r"^[0-9a-f]{4}$")
    class_code: str | None = Field(default=None, pattern=r"^(0x)?[0-9a-f]{4,6}$")
    #: The root complex, ``pci<domain>:<bus>`` (DRA ``resource.kubernetes.io/pcieRoot``).
    pcie_root: str | None = Field(default=None, pattern=r"^pci[0-9a-f]{4}:[0-9a-f]{2}$")
    #: Bus ids of the bridges from the root port down to (not including) the device.
    bridge_path: tuple[str, ...] | None = None
    link_gen_max: Count | None = None
    link_width_max: Count | None = None
    link_gen_current: Count | None = None
    link_width_current: Count | None = None
    is_virtual_function: bool | None = None
    parent_bus_id: str | None = None

    @field_validator("bus_id", "parent_bus_id")
    @classmethod
    def _canonical(cls, value: str | None) -> str | None:
        if value is not None and not BUS_ID.match(value):
            raise ValueError(f"PCI bus id must be lower-case dddd:bb:dd.f, got {value!r}")
        return value

    @field_validator("bridge_path")
    @classmethod
    def _path(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        for hop in value or ():
            if not BUS_ID.match(hop):
                raise ValueError(f"bridge_path entries must be dddd:bb:dd.f, got {hop!r}")
        return value


class MemoryRegion(Model):
    """One memory of a device (HBM, DDR...).  ``used_bytes`` is as of ``collected_at``."""

    kind: MemoryKind = MemoryKind.UNKNOWN
    total_bytes: Bytes | None = None
    #: What a job can allocate after driver and ECC reservations.
    usable_bytes: Bytes | None = None
    used_bytes: Bytes | None = None
    reserved_bytes: Bytes | None = None
    generation: str | None = None
    bus_width_bits: Count | None = None
    max_bandwidth_bytes_per_s: BytesPerSecond | None = None
    ecc_supported: bool | None = None
    ecc_enabled: bool | None = None
    ecc_pending: bool | None = None

    @model_validator(mode="after")
    def _consistent(self) -> MemoryRegion:
        if self.total_bytes is not None:
            for name in ("usable_bytes", "used_bytes", "reserved_bytes"):
                value = getattr(self, name)
                if value is not None and value > self.total_bytes:
                    raise ValueError(f"{name} ({value}) exceeds total_bytes ({self.total_bytes})")
        return self

    @property
    def free_bytes(self) -> int | None:
        """Free memory, when both total (or usable) and used are known."""
        cap = self.usable_bytes if self.usable_bytes is not None else self.total_bytes
        if cap is None or self.used_bytes is None:
            return None
        return max(cap - self.used_bytes, 0)


class ComputeInfo(Model):
    """Compute resources: SMs, CUs, AI cores, clusters... ``unit_kind`` says which."""

    units: Count | None = None
    unit_kind: str | None = None
    max_clock_hertz: Hertz | None = None
    memory_max_clock_hertz: Hertz | None = None
    engines: dict[str, Count] = Field(default_factory=dict)


class PowerLimits(Model):
    default_watts: Watts | None = None
    min_watts: Watts | None = None
    max_watts: Watts | None = None
    enforced_watts: Watts | None = None


class ThermalLimits(Model):
    slowdown_celsius: Celsius | None = None
    shutdown_celsius: Celsius | None = None
    max_operating_celsius: Celsius | None = None


class Capabilities(Model):
    """Feature flags: ``None`` means not known, never assume."""

    ecc: bool | None = None
    partitioning: tuple[PartitionScheme, ...] = ()
    sriov: bool | None = None
    p2p: bool | None = None
    rdma: bool | None = None
    mps: bool | None = None
    time_slicing: bool | None = None
    confidential_compute: bool | None = None


class PartitionMode(Model):
    """The active partitioning scheme (``mig``, or AMD ``amd_xcp`` with ``cpx`` + ``nps4``)."""

    scheme: PartitionScheme = PartitionScheme.NONE
    compute_mode: str | None = None
    memory_mode: str | None = None
    pending: bool | None = None


class SharingInfo(Model):
    """How the device may be shared by several workloads (software shares)."""

    mode: SharingMode = SharingMode.EXCLUSIVE
    replicas: Count | None = None
    #: The scheduler may divide memory and compute: a share is (memory bytes, compute ratio).
    divisible_memory: bool = False
    divisible_compute: bool = False


class Binding(Model):
    """How a runtime addresses this device: generated adapters use this, not vendor names."""

    visible_env: str | None = None
    visible_id: str | None = None
    torch_device_type: str | None = None
    collective_backend: str | None = None
    ray_resource: str | None = None
    device_nodes: tuple[str, ...] = ()


class VersionInfo(Model):
    """Host software versions as strings (``raw`` forms kept; parse with :mod:`packaging` if needed)."""

    driver: str | None = None
    runtime_name: str | None = None
    runtime: str | None = None
    firmware: dict[str, str] = Field(default_factory=dict)


class Device(Model):
    """A physical accelerator, or the unit the runtime schedules (an Ascend die, an MLU chip).

    ``id`` is stable across reboots and visibility masks (see :func:`device_id_for`); ``index``
    is the vendor tool's enumeration index and is informational only.  Fields that this backend
    can never report are named in ``unsupported``; ``None`` elsewhere means "not read this time".
    """

    id: str
    vendor: str = Field(pattern=r"^[a-z][a-z0-9_-]*$")
    kind: DeviceKind
    model: str = Field(min_length=1)
    index: Count | None = None
    uuid: str | None = None
    uuid_synthesized: bool = False
    serial_number: str | None = None
    brand: str | None = None
    family: str | None = None
    architecture: str | None = None
    compute_capability: str | None = None
    isa: str | None = None
    form_factor: FormFactor | None = None
    pci: PciInfo | None = None
    numa_node: Count | None = None
    cpu_affinity: str | None = Field(default=None, pattern=r"^[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*$")
    #: The board (card) this unit sits on, when one card carries several (Ascend 310P Duo, MLU370-X8).
    board_id: str | None = None
    versions: VersionInfo = Field(default_factory=VersionInfo)
    memory: tuple[MemoryRegion, ...] = ()
    compute: ComputeInfo = Field(default_factory=ComputeInfo)
    power: PowerLimits = Field(default_factory=PowerLimits)
    thermal: ThermalLimits = Field(default_factory=ThermalLimits)
    capabilities: Capabilities = Field(default_factory=Capabilities)
    partition_mode: PartitionMode = Field(default_factory=PartitionMode)
    sharing: SharingInfo = Field(default_factory=SharingInfo)
    binding: Binding = Field(default_factory=Binding)
    health: Health = Field(default_factory=Health)
    extras: VendorExtras = Field(default_factory=dict)
    unsupported: frozenset[str] = frozenset()

    @field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        if not DEVICE_ID.match(value):
            raise ValueError(f"device id must be '<vendor>:<uuid>' or '<vendor>:pci-<bdf>', got {value!r}")
        return value

    @field_validator("extras")
    @classmethod
    def _extras(cls, value: dict[str, Any]) -> dict[str, Any]:
        for key in value:
            if not QUALIFIED_NAME.match(key):
                raise ValueError(f"vendor extra keys are qualified names '<domain>/<name>', got {key!r}")
            why = extra_problem(key, value[key])
            if why is not None:
                raise ValueError(f"vendor extra {key!r} = {value[key]!r} is {why}")
        return value

    @field_validator("unsupported")
    @classmethod
    def _unsupported(cls, value: frozenset[str]) -> frozenset[str]:
        known = _device_field_paths()
        bad = sorted(v for v in value if v not in known)
        if bad:
            raise ValueError(f"unsupported names unknown fields: {', '.join(bad)}")
        return value

    @model_validator(mode="after")
    def _id_matches_vendor(self) -> Device:
        if not self.id.startswith(self.vendor + ":"):
            raise ValueError(f"device id {self.id!r} must start with its vendor {self.vendor!r}")
        return self

    # -- conveniences for schedulers -------------------------------------------------------
    @property
    def memory_total_bytes(self) -> int | None:
        """Total device memory over all on-device regions (``None`` when any is unknown)."""
        regions = [r for r in self.memory if r.kind is not MemoryKind.DDR] or list(self.memory)
        if not regions or any(r.total_bytes is None for r in regions):
            return None
        return sum(r.total_bytes or 0 for r in regions)

    @property
    def memory_used_bytes(self) -> int | None:
        regions = [r for r in self.memory if r.kind is not MemoryKind.DDR] or list(self.memory)
        if not regions or any(r.used_bytes is None for r in regions):
            return None
        return sum(r.used_bytes or 0 for r in regions)


def _device_field_paths() -> frozenset[str]:
    """Every field name of Device and its sub-models, as ``a`` or ``a.b`` paths."""
    global _FIELD_PATHS
    if _FIELD_PATHS is None:
        paths: set[str] = set()
        for name, info in Device.model_fields.items():
            paths.add(name)
            ann = info.annotation
            sub = getattr(ann, "model_fields", None)
            if isinstance(sub, dict):
                paths.update(f"{name}.{s}" for s in sub)
        paths.update(f"memory.{s}" for s in MemoryRegion.model_fields)
        _FIELD_PATHS = frozenset(paths)
    return _FIELD_PATHS


_FIELD_PATHS: frozenset[str] | None = None
