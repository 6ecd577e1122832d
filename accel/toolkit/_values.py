"""Values in vendor text: placeholders, numbers, units and PCI bus ids.

Rules every helper follows:

* **Placeholders are unknown, never 0.**  ``N/A``, ``NA``, ``-``, ``--``, the empty string,
  ``Not Supported``, ``Unknown`` and author-masked values (``xxx``, ``xxxxx``, ``02Kxxx``) give
  ``None``.  :func:`is_placeholder` / :func:`is_masked` say which.
* **Units are read, never guessed.**  A unit printed next to the number wins.  A bare number
  gets ``bare_unit`` (the caller states what the vendor means, usually from the column header
  ``Memory-Usage(MB)``); a bare number with no ``bare_unit`` is an error.
* **MB is ambiguous.**  Ascend and old Kunlunxin tools print ``MB`` meaning MiB.  A byte parser
  seeing ``MB``/``GB``/``KB`` needs ``binary_prefixes=True`` (vendor means 2**20) or ``False``
  (SI, 10**6); left as ``None`` the text is refused rather than guessed.  ``MiB``/``GiB``/``KiB``
  are always binary.
* **Sentinels are unknown, never a value.**  Tools built on NVML-style libraries print the
  integer they got back for "not available": ``65535`` (uint16 max), ``0xFFFF``,
  ``0xFFFFFFFF`` / ``4294967295`` (uint32 max), ``-1`` and the 64-bit forms.  Every unit parser
  here gives ``None`` for them (:func:`is_sentinel`), whatever unit follows (``65535W``).
* **Plausible, not only possible.**  The model refuses what no device can have
  (:data:`accel.model.BOUNDS`); a reading from a running device must also be one the hardware
  can report (:data:`PLAUSIBLE`, :func:`implausible`): no die of a running server is below
  0 C, and no count is negative.  :func:`~accel.toolkit.bounded` applies both to every
  reading, so an implausible value becomes unknown (``None``) and a typed ``field`` problem,
  never a number.
* Failures raise :class:`accel.errors.ParseError` without a location; wrap the call in
  :meth:`ParseContext.at` to name tool, command and line.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import TypeVar

from accel.errors import ParseError, ValidationError
from accel.model import BOUNDS, extra_problem, normalize_bus_id

__all__ = [
    "PLACEHOLDERS",
    "PLAUSIBLE",
    "SENTINELS",
    "clean",
    "extra_implausible",
    "implausible",
    "is_masked",
    "is_placeholder",
    "is_sentinel",
    "parse_bus_id",
    "parse_bytes",
    "parse_celsius",
    "parse_float",
    "parse_hertz",
    "parse_int",
    "parse_pair",
    "parse_power_pair",
    "parse_quantity",
    "parse_ratio",
    "parse_used_total",
    "parse_watts",
]

#: Texts that mean "no value" in some vendor tool (compared case-insensitively, trimmed).
PLACEHOLDERS: frozenset[str] = frozenset(
    {
        "",
        "n/a",
        "na",
        "-",
        "--",
        "---",
        "none",
        "null",
        "unknown",
        "not supported",
        "[not supported]",
        "not available",
        "unsupported",
        "/",
    }
)

#: Integers that mean "not available" in NVML-style tools (uint16/uint32/uint64 max, -1).
SENTINELS: frozenset[int] = frozenset({0xFFFF, 0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF, 0x7FFFFFFF, 0x7FFFFFFFFFFFFFFF, -1})
_SENTINEL_TEXT = re.compile(r"^\s*(?P<num>-?(?:0[xX][0-9a-fA-F]+|[0-9]+)(?:\.0*)?)\s*(?P<unit>[^\s\d.].*)?$")

_MASK = re.compile(r"x{3,}", re.IGNORECASE)
# A number: sign, digits, optional fraction, optional exponent.  Thousands separators are not
# accepted: none of the sampled tools prints them, and "1,024" would be ambiguous.
_NUMBER = re.compile(r"^[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_MAX_MAGNITUDE = 1e30  # anything larger is garbage, not a measurement


#: What a running device can report, per unit or kind of field (the suffix of the field's name,
#: or of a vendor extra's key in snake case: ``huawei.com/hugepagesUsed`` is ``hugepages_used``),
#: where that is narrower than what any device can have (:data:`accel.model.BOUNDS`).  Each
#: entry is ``(low, high, why)``; the reasons are in docs/hostile-input.md.
PLAUSIBLE: dict[str, tuple[float, float, str]] = {
    # A die, its HBM and the board's sensors sit in a powered, cooled chassis: the coolant that
    # reaches them is above freezing (ASHRAE's air classes A1-A4 allow 5-45 C inlet, its liquid
    # classes W17-W+ a 2 C supply at the coldest) and a working die is warmer than its coolant.
    # A negative reading is a sensor fault or a signed-byte wrap (0xD9 read as -39), not a heat.
    "_celsius": (0.0, BOUNDS["_celsius"][1], "below 0 C: no sensor of a running device is below freezing"),
    # Counts and amounts (pages, processes, events): a negative one is never a reading.
    "_count": (0.0, float(2**63 - 1), "a count is never negative"),
    "_used": (0.0, float(2**63 - 1), "an amount in use is never negative"),
    "_free": (0.0, float(2**63 - 1), "an amount free is never negative"),
    "_pages": (0.0, float(2**63 - 1), "a count of pages is never negative"),
}

_CAMEL_CASE = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def _plausible_entry(name: str) -> tuple[float, float, str] | None:
    best: tuple[int, tuple[float, float, str]] | None = None
    for suffix, entry in PLAUSIBLE.items():
        if (name.endswith(suffix) or name == suffix[1:]) and (best is None or len(suffix) > best[0]):
            best = (len(suffix), entry)
    return best[1] if best is not None else None


def implausible(name: str, value: object) -> str | None:
    """Why reading ``name = value`` is not one a running device reports (:data:`PLAUSIBLE`), or
    ``None``: a number of a field that has no entry, or within its entry, is plausible (the
    model's own bounds are checked by the model).  Not a number: ``None``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    entry = _plausible_entry(name)
    if entry is None or (isinstance(value, float) and not math.isfinite(value)):
        return None  # a non-finite number is the model's to refuse
    low, high, why = entry
    return None if low <= value <= high else why


def extra_implausible(key: str, value: object) -> str | None:
    """Why vendor extra ``key = value`` is not a reading: outside the model's bounds
    (:func:`accel.model.extra_problem`) or not plausible (:func:`implausible` of its name in
    snake case), or ``None``."""
    problem = extra_problem(key, value)
    if problem is not None:
        return problem
    return implausible(_CAMEL_CASE.sub("_", key.rsplit("/", 1)[-1]).lower(), value)


def is_placeholder(text: str | None) -> bool:
    """True for ``None`` and every placeholder in :data:`PLACEHOLDERS`."""
    return text is None or text.strip().lower() in PLACEHOLDERS


def is_masked(text: str | None) -> bool:
    """True when a doc author masked the value (``xxx``, ``Ascend xxx``, ``02Kxxx``, ``MLUXXX-XX``)."""
    return text is not None and _MASK.search(text) is not None


def clean(text: str | None) -> str | None:
    """The stripped text, or ``None`` for a placeholder.  Masked *names* are kept (they are what
    the output says); use :func:`is_masked` to flag them."""
    if is_placeholder(text):
        return None
    assert text is not None
    return " ".join(text.split())


def is_sentinel(text: str | None) -> bool:
    """True when the text is a "not available" integer of :data:`SENTINELS`, with or without
    a unit: ``65535``, ``65535W``, ``0xFFFFFFFF``, ``4294967295 MHz``, ``-1``, ``-1 C``."""
    if text is None:
        return False
    m = _SENTINEL_TEXT.match(text)
    if m is None:
        return False
    num = m.group("num").split(".")[0]
    try:
        value = int(num, 16) if num.lower().lstrip("-").startswith("0x") else int(num)
    except ValueError:
        return False
    return value in SENTINELS


def _unknown(text: str | None) -> bool:
    return is_placeholder(text) or is_masked(text) or is_sentinel(text)


def parse_quantity(text: str) -> tuple[float, str]:
    """Split ``"106 W"``, ``"34℃"``, ``"23374MiB"``, ``"0%"`` into ``(106.0, "W")``... .

    The unit is what follows the number, stripped (``""`` for a bare number).  Raises
    :class:`ParseError` when the text does not start with a number or the number is absurd.
    """
    s = text.strip()
    m = _NUMBER.match(s)
    if not m or m.group(0) in {"+", "-", "."}:
        raise ParseError(f"expected a number, got {text!r}")
    value = float(m.group(0))
    if not math.isfinite(value) or abs(value) > _MAX_MAGNITUDE:
        raise ParseError(f"number out of range: {text!r}")
    return value, s[m.end() :].strip()


def parse_float(text: str | None) -> float | None:
    """A plain number (no unit allowed), ``None`` for a placeholder or masked value."""
    if _unknown(text):
        return None
    assert text is not None
    value, unit = parse_quantity(text)
    if unit:
        raise ParseError(f"expected a plain number, got {text!r}")
    return value


def parse_int(text: str | None, *, base: int = 10) -> int | None:
    """A plain integer (``base=16`` accepts ``0x``), ``None`` for a placeholder or masked value."""
    if _unknown(text):
        return None
    assert text is not None
    s = text.strip()
    try:
        value = int(s, base)
    except ValueError:
        raise ParseError(f"expected an integer, got {text!r}") from None
    if abs(value) > _MAX_MAGNITUDE:
        raise ParseError(f"integer out of range: {text!r}")
    return value


def _scaled(text: str | None, units: Mapping[str, float], bare_unit: str | None, what: str) -> float | None:
    if _unknown(text):
        return None
    assert text is not None
    value, unit = parse_quantity(text)
    if not unit:
        if bare_unit is None:
            raise ParseError(f"{what} {text!r} has no unit and the caller gave none")
        unit = bare_unit
    factor = units.get(unit) if unit in units else units.get(unit.lower())
    if factor is None:
        raise ParseError(f"unknown {what} unit {unit!r} in {text!r} (known: {', '.join(sorted(units))})")
    return value * factor


_BINARY = {"b": 1, "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
_AMBIGUOUS = {"kb": 10, "k": 10, "mb": 20, "m": 20, "gb": 30, "g": 30, "tb": 40, "t": 40}


def parse_bytes(text: str | None, *, bare_unit: str | None = None, binary_prefixes: bool | None = None) -> int | None:
    """Bytes from ``"23374 MiB"``, ``"8192"`` (with ``bare_unit="MB"``), ``"32 GB"``...

    :param bare_unit: the unit of a number printed without one (from the column header).
    :param binary_prefixes: what ``KB``/``MB``/``GB`` mean for this vendor: ``True`` = 2**10
        steps (Ascend ``MB`` is MiB), ``False`` = SI.  ``None`` refuses such text.
    """
    if _unknown(text):
        return None
    assert text is not None
    value, unit = parse_quantity(text)
    unit = (unit or bare_unit or "").strip()
    if not unit:
        raise ParseError(f"byte value {text!r} has no unit and the caller gave none")
    key = unit.lower()
    if key in _BINARY:
        factor = float(_BINARY[key])
    elif key in _AMBIGUOUS:
        if binary_prefixes is None:
            raise ParseError(f"{unit!r} in {text!r} is ambiguous: the caller must say whether it is binary")
        exp = _AMBIGUOUS[key]
        factor = float(2**exp) if binary_prefixes else 10.0 ** (exp // 10 * 3)
    else:
        raise ParseError(f"unknown byte unit {unit!r} in {text!r}")
    if value < 0:
        raise ParseError(f"negative byte value {text!r}")
    return round(value * factor)


_WATTS = {"w": 1.0, "mw": 1e-3, "kw": 1e3, "uw": 1e-6}
_HERTZ = {"hz": 1.0, "khz": 1e3, "mhz": 1e6, "ghz": 1e9}


def parse_watts(text: str | None, *, bare_unit: str | None = None) -> float | None:
    """Watts from ``"106 W"``, ``"45.2"`` (``bare_unit="W"``), ``"5000 mW"``."""
    value = _scaled(text, _WATTS, bare_unit, "power")
    if value is not None and value < 0:
        raise ParseError(f"negative power {text!r}")
    return value


def parse_hertz(text: str | None, *, bare_unit: str | None = None) -> float | None:
    """Hertz from ``"1000 MHz"``, ``"1000"`` (``bare_unit="MHz"``; ``MHZ`` is accepted)."""
    value = _scaled(text, _HERTZ, bare_unit, "frequency")
    if value is not None and value < 0:
        raise ParseError(f"negative frequency {text!r}")
    return value


_CELSIUS_UNITS = {"c", "℃", "°c", "degc", "deg c"}


def parse_celsius(text: str | None, *, bare_unit: str | None = None) -> float | None:
    """Degrees Celsius from ``"32C"``, ``"34℃"``, ``"35 °C"``, ``"46"`` (``bare_unit="C"``).

    Refuses ``F`` and anything outside -273.15..1000 (a garbage value, not a reading).
    """
    if _unknown(text):
        return None
    assert text is not None
    value, unit = parse_quantity(text)
    unit = unit or (bare_unit or "")
    if unit.lower() not in _CELSIUS_UNITS:
        raise ParseError(f"temperature {text!r} is not in Celsius (unit {unit!r})")
    if not -273.15 <= value <= 1000:
        raise ParseError(f"temperature out of range: {text!r}")
    return value


def parse_ratio(text: str | None, *, bare_unit: str | None = None) -> float | None:
    """A 0..1 ratio from ``"35%"`` or ``"35"`` with ``bare_unit="%"`` (a header ``AICore(%)``).

    Values slightly above 100 % (rounding in some tools) are clamped; far above is an error.
    """
    if _unknown(text):
        return None
    assert text is not None
    value, unit = parse_quantity(text)
    unit = unit or (bare_unit or "")
    if unit != "%":
        raise ParseError(f"expected a percentage, got {text!r}")
    if value < 0 or value > 101:
        raise ParseError(f"percentage out of range: {text!r}")
    return min(value / 100.0, 1.0)


_T = TypeVar("_T")
_NA_TOKEN = re.compile(r"(?<![A-Za-z])N/A(?![A-Za-z])", re.IGNORECASE)
_NA_MARK = "\x00"


def _split_pair(text: str, *, space_separated: bool) -> tuple[str, str] | None:
    # "N/A" has a slash of its own: hide it before splitting ("N/A / N/A", "N/A/250W").
    s = _NA_TOKEN.sub(_NA_MARK, text.strip())
    if "/" in s:
        left, _, right = s.partition("/")
        if "/" in right:
            raise ParseError(f"expected 'used / total', got {text!r}")
    elif s.endswith(")") and "(" in s:
        left, _, right = s[:-1].partition("(")
    elif space_separated and len(s.split()) == 2:
        left, right = s.split()
    else:
        return None
    return left.strip().replace(_NA_MARK, "N/A"), right.strip().replace(_NA_MARK, "N/A")


def parse_pair(
    text: str | None,
    parse_one: Callable[..., _T | None],
    *,
    bare_unit: str | None = None,
    space_separated: bool = False,
    single: bool = False,
    **options: object,
) -> tuple[_T | None, _T | None]:
    """``(used, total)`` from a pair printed as ``"93W / 350W"``, ``"3318 / 65536"``,
    ``"0MiB(81920MiB)"``, ``"N/A / N/A"``, ``"65535W / 250"`` or (``space_separated=True``)
    ``"105W  300W"``, each side read by ``parse_one`` (:func:`parse_watts`, :func:`parse_bytes`...).

    Either side may be a placeholder, masked or a sentinel: that side is ``None`` (not a value,
    not an error).  A unit printed after the total applies to a bare used value and the other
    way round (``"810/65536 MiB"``, ``"65535W / 250"``); ``bare_unit`` applies when neither side
    prints one.  ``single=True`` accepts a lone value as ``(value, None)``.  Anything else
    raises :class:`ParseError`.  ``options`` go to ``parse_one`` (``binary_prefixes=...``).
    """
    if text is None or (is_placeholder(text) and _NA_TOKEN.sub("", text).strip(" /") == ""):
        return None, None
    parts = _split_pair(text, space_separated=space_separated)
    if parts is None:
        if single:
            return parse_one(text.strip(), bare_unit=bare_unit, **options), None
        raise ParseError(f"expected 'used / total', got {text!r}")
    left, right = parts
    unit = bare_unit
    for side in (right, left):
        if not _unknown(side):
            _, side_unit = parse_quantity(side)
            if side_unit:
                unit = side_unit
                break
    return (
        parse_one(left, bare_unit=unit, **options),
        parse_one(right, bare_unit=unit, **options),
    )


def parse_used_total(
    text: str | None, *, bare_unit: str | None = None, binary_prefixes: bool | None = None
) -> tuple[int | None, int | None]:
    """``(used_bytes, total_bytes)`` from ``"3318 / 65536"``, ``"0 MiB/ 23374 MiB"``,
    ``"46536/ 65536"``, ``"0MiB(81920MiB)"``.  A unit after the total applies to a bare used
    value too (``"810/65536 MiB"``).  Either side may be a placeholder, masked or a sentinel
    (``None``); see :func:`parse_pair`.
    """
    return parse_pair(text, parse_bytes, bare_unit=bare_unit, binary_prefixes=binary_prefixes)


def parse_power_pair(
    text: str | None, *, bare_unit: str | None = "W", space_separated: bool = False, single: bool = True
) -> tuple[float | None, float | None]:
    """``(usage_watts, cap_watts)`` from ``"93W / 350W"``, ``"N/A / N/A"``, ``"65535W / 250"``
    (sentinel usage → ``None``), ``"105W  300W"`` (``space_separated=True``) or a lone ``"45W"``."""
    return parse_pair(text, parse_watts, bare_unit=bare_unit, space_separated=space_separated, single=single)


def parse_bus_id(text: str | None) -> str | None:
    """Canonical ``dddd:bb:dd.f`` from any printed form (``0000:DA:00.0``, ``00000000:18:00.0``,
    ``3b:00.0``), ``None`` for a placeholder; a malformed id raises :class:`ParseError`.
    Delegates to :func:`accel.model.normalize_bus_id`."""
    if _unknown(text):
        return None
    assert text is not None
    try:
        return normalize_bus_id(text)
    except ValidationError as exc:
        raise ParseError(exc.message) from exc
