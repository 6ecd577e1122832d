"""``accel dmon``: one row per device per interval, like ``nvidia-smi dmon``, for every vendor.

Field groups (``-s``, default ``pum``): ``p`` power and temperature, ``u`` utilisation, ``c``
clocks, ``m`` memory, ``e`` ECC counters.  Two ``#`` header lines (names, units), printed once:
the output is clean when piped (no screen control, one row per device per sample, a
timestamp first).  A value the backend did not read is ``-``, never 0.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..errors import ConfigError
from ..model import Telemetry

__all__ = ["CORE_CLOCKS", "GROUPS", "Column", "columns", "core_clock", "header", "row"]


@dataclass(frozen=True)
class Column:
    name: str
    unit: str
    get: Callable[[Telemetry], str]


#: What vendors call the core clock in ``Telemetry.clocks_hertz``, in order of preference.
CORE_CLOCKS = ("sm", "graphics", "gfx", "compute", "aicore")


def core_clock(t: Telemetry) -> float | None:
    """The core (compute) clock of a sample, whatever the vendor names it."""
    return next((t.clocks_hertz[k] for k in CORE_CLOCKS if k in t.clocks_hertz), None)


def _num(value: float | None, scale: float = 1.0, fmt: str = "{:.0f}") -> str:
    return "-" if value is None else fmt.format(value * scale)


GROUPS: dict[str, tuple[Column, ...]] = {
    "p": (
        Column("pwr", "W", lambda t: _num(t.power_watts, fmt="{:.1f}")),
        Column("temp", "C", lambda t: _num(t.temperature_celsius)),
    ),
    "u": (
        Column("util", "%", lambda t: _num(t.utilization_ratio, 100)),
        Column("memutil", "%", lambda t: _num(t.memory_utilization_ratio, 100)),
    ),
    "c": (
        Column("pclk", "MHz", lambda t: _num(core_clock(t), 1e-6)),
        Column("mclk", "MHz", lambda t: _num(t.clocks_hertz.get("memory"), 1e-6)),
    ),
    "m": (
        Column("used", "MiB", lambda t: _num(t.memory_used_bytes, 1 / 2**20)),
        Column("free", "MiB", lambda t: _num(t.memory_free_bytes, 1 / 2**20)),
    ),
    "e": (
        Column("sbecc", "count", lambda t: _num(t.ecc_corrected_total)),
        Column("dbecc", "count", lambda t: _num(t.ecc_uncorrected_total)),
    ),
}


def columns(select: str) -> list[Column]:
    """The columns of ``-s`` letters, in the order given; an unknown letter is a ConfigError."""
    bad = sorted(set(select) - set(GROUPS))
    if not select or bad:
        raise ConfigError(f"-s: field groups are letters of {''.join(GROUPS)} (p power, u utilization, "
                          f"c clocks, m memory, e ECC), got {select!r}")
    seen: list[Column] = []
    for letter in dict.fromkeys(select):
        seen.extend(GROUPS[letter])
    return seen


_WIDTH = 9


def header(cols: Sequence[Column]) -> str:
    names = "".join(f"{c.name:>{_WIDTH}}" for c in cols)
    units = "".join(f"{c.unit:>{_WIDTH}}" for c in cols)
    return f"# {'time':<19} {'#':>3}{names}\n# {'':<19} {'idx':>3}{units}"


def row(t: Telemetry, position: int | str, cols: Sequence[Column]) -> str:
    stamp = t.timestamp.strftime("%Y-%m-%dT%H:%M:%S")
    cells = "".join(f"{c.get(t):>{_WIDTH}}" for c in cols)
    return f"  {stamp:<19} {position!s:>3}{cells}"
