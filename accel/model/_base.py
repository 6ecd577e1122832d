"""Shared base for every model: frozen, strict about unknown fields, JSON-ready."""

from __future__ import annotations

import functools
import re
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "BOUNDS",
    "QUALIFIED_NAME",
    "Bytes",
    "BytesPerSecond",
    "Celsius",
    "Count",
    "Counter",
    "Hertz",
    "Joules",
    "Model",
    "NonNegInt",
    "Ratio",
    "Seconds",
    "VendorExtras",
    "Watts",
    "bound_of",
    "extra_problem",
]


class Model(BaseModel):
    """Base of all accel models: immutable, no unknown keys, validated on assignment of defaults."""

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        validate_default=True,
        ser_json_inf_nan="constants",
        use_enum_values=False,
    )


# Units are in field names; these aliases carry the range rule of each unit.  The upper
# bounds are physical, not vendor limits: far above any device shipping or announced (the
# headroom is 50x or more), far below the garbage a mangled output or a "not available"
# sentinel turns into (a memory total of 1e29 bytes, a clock of 1.8e25 Hz, a 4,294,967,295 W
# power limit read from 0xFFFFFFFF).  A value outside them is not a reading: toolkit plugins
# drop it and report a ``field`` problem (:func:`accel.model.validate_reading`).

#: ``(low, high)`` of each unit, keyed by the suffix of the field names that carry it (the
#: longest matching suffix wins).  Documented in docs/hostile-input.md.
BOUNDS: dict[str, tuple[float, float]] = {
    # -40 C is the coldest rated ambient of any server part; a die is never colder.  200 C is
    # far above every shutdown threshold (105-125 C); 255 (0xFF) is a sentinel, not a heat.
    "_celsius": (-40.0, 200.0),
    # The largest accelerator modules draw ~2.7 kW (a whole superchip board); 10 kW per device.
    "_watts": (0.0, 10_000.0),
    # Core clocks are ~2-3 GHz, memory data clocks ~30 GHz; 100 GHz.
    "_hertz": (0.0, 100e9),
    # 1 PiB: device memory is < 300 GiB today, host memory < 64 TiB.
    "_bytes": (0.0, float(2**50)),
    # NVLink 5 is 1.8 TB/s per GPU; 1 PB/s.
    "_bytes_per_s": (0.0, 1e15),
    "_ratio": (0.0, 1.0),
    # NVML's energy counter is uint64 millijoules.
    "_joules": (0.0, (2**64 - 1) / 1000),
    # Durations and ages: 100 years.
    "_seconds": (0.0, 100 * 365.25 * 86400),
    # Memory bus widths are <= 8192 bits (HBM stacks); 65534.
    "_bits": (0.0, 65534.0),
    # Event counters (ECC, CRC, bytes moved) are uint64 in every vendor library.
    "_total": (0.0, float(2**64 - 1)),
    # Ids a tool prints as numbers (logic ids, die ids) are never negative: -1 is "none".
    "_id": (0.0, float(2**63 - 1)),
}


def bound_of(name: str) -> tuple[float, float] | None:
    """The :data:`BOUNDS` entry for a field or extra named ``name`` (longest suffix), if any."""
    best: tuple[int, tuple[float, float]] | None = None
    for suffix, bound in BOUNDS.items():
        if (name.endswith(suffix) or name == suffix[1:]) and (best is None or len(suffix) > best[0]):
            best = (len(suffix), bound)
    return best[1] if best is not None else None


_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


@functools.lru_cache(maxsize=1024)
def _extra_bound(key: str) -> tuple[float, float] | None:
    # Extras are often camelCase (``huawei.com/chipLogicId``, ``vMemoryTotalBytes``).  Cached:
    # every validation of a device checks each of its extras, and the keys are few (BOUNDS is
    # a constant table).
    return bound_of(_CAMEL.sub("_", key.rsplit("/", 1)[-1]).lower())


def extra_problem(key: str, value: object) -> str | None:
    """Why vendor extra ``key = value`` is not a reading (not finite, or outside the bound its
    name's unit suffix gives), or ``None`` when it is fine."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if (isinstance(value, float) and value != value) or value in (float("inf"), float("-inf")):
        return "not a finite number"
    bound = _extra_bound(key)
    if bound is not None and not bound[0] <= value <= bound[1]:
        return f"outside {bound[0]:g}..{bound[1]:g}"
    return None

_FINITE = {"allow_inf_nan": False}

Bytes = Annotated[int, Field(ge=0, le=2**50, description="bytes (SI base unit), at most 1 PiB")]
#: A counter of events or bytes (uint64 in every vendor library).
Counter = Annotated[int, Field(ge=0, le=2**64 - 1)]
#: A small count or number: an index, a link generation or width, compute units, a NUMA
#: node.  Below 0xFFFF, the uint16 "not available" sentinel.
Count = Annotated[int, Field(ge=0, lt=0xFFFF)]
#: A non-negative integer with no tighter physical bound (int64).
NonNegInt = Annotated[int, Field(ge=0, le=2**63 - 1)]
BytesPerSecond = Annotated[int, Field(ge=0, le=10**15, description="bytes per second, at most 1 PB/s")]
Watts = Annotated[float, Field(ge=0, le=10_000, description="watts, at most 10 kW", **_FINITE)]
Joules = Annotated[float, Field(ge=0, le=(2**64 - 1) / 1000, description="joules", **_FINITE)]
Hertz = Annotated[float, Field(ge=0, le=100e9, description="hertz, at most 100 GHz", **_FINITE)]
Seconds = Annotated[float, Field(ge=0, le=100 * 365.25 * 86400, description="seconds", **_FINITE)]
Celsius = Annotated[float, Field(ge=-40, le=200, description="degrees Celsius, -40..200", **_FINITE)]
Ratio = Annotated[float, Field(ge=0.0, le=1.0, description="ratio in 0..1", **_FINITE)]

#: ``<domain>/<name>``, the DRA qualified-name grammar used for vendor extras.
QUALIFIED_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z_][A-Za-z0-9_.-]{0,63}$")

VendorExtras = dict[str, str | int | float | bool]
