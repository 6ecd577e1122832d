"""The accel conformance kit: certify any backend plugin, ours or a vendor's."""

from __future__ import annotations

__all__: list[str] = []
