"""PCI bus id normalisation: every vendor prints bus ids differently."""

from __future__ import annotations

import re

from ..errors import ValidationError

__all__ = ["BUS_ID", "normalize_bus_id"]

#: The canonical form: lower-case ``dddd:bb:dd.f``.
BUS_ID = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")

_LOOSE = re.compile(
    r"^(?:(?P<domain>[0-9a-fA-F]{1,8}):)?(?P<bus>[0-9a-fA-F]{1,2}):(?P<dev>[0-9a-fA-F]{1,2})\.(?P<fn>[0-7])$"
)


def normalize_bus_id(raw: str) -> str:
    """Return ``raw`` in canonical ``dddd:bb:dd.f`` form.

    Accepts NVML's ``00000000:3B:00.0``, Enflame's domain-less ``3b:00.0``, upper case and
    surrounding whitespace.  A domain wider than 16 bits keeps its low 16 bits only when the
    high bits are zero (NVML pads with zeros); anything else raises
    :class:`accel.errors.ValidationError` naming the value.
    """
    text = raw.strip()
    m = _LOOSE.match(text)
    if not m:
        raise ValidationError(f"not a PCI bus id: {raw!r}", field="pci.bus_id")
    domain = int(m.group("domain") or "0", 16)
    if domain > 0xFFFF:
        raise ValidationError(f"PCI domain out of range in {raw!r}", field="pci.bus_id")
    return f"{domain:04x}:{int(m.group('bus'), 16):02x}:{int(m.group('dev'), 16):02x}.{m.group('fn')}"
