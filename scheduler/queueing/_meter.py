"""Metering and billing: device-seconds, memory-byte-seconds and compute-share-seconds per
tenant and device model, priced with a per-model table.

A run segment (one job on its devices from start to stop) is metered when it stops; a bill
taken while jobs run includes their open segments up to ``now``.  Sums are plain floats added
in event order, so a state rebuilt from the journal bills to the last bit like the original.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from accel.scheduler import InvalidRequestError

__all__ = ["Bill", "BillLine", "Meter", "PriceTable", "Usage3"]

GIB = 1024**3


@dataclass(slots=True)
class Usage3:
    """Metered amounts for one (tenant, model)."""

    device_seconds: float = 0.0
    memory_byte_seconds: float = 0.0
    compute_share_seconds: float = 0.0

    def add(self, devices: float, memory_bytes: float, share: float, seconds: float) -> None:
        self.device_seconds += devices * seconds
        self.memory_byte_seconds += memory_bytes * seconds
        self.compute_share_seconds += share * seconds


@dataclass(frozen=True, slots=True)
class PriceTable:
    """Prices per device model: per compute-share-hour (a whole device for an hour = 1.0) and
    per GiB-hour of device memory held.  ``default`` applies to models not listed."""

    per_device_hour: Mapping[str, float] = field(default_factory=dict)
    per_gib_hour: Mapping[str, float] = field(default_factory=dict)
    default_device_hour: float = 0.0
    currency: str = "USD"

    def __post_init__(self) -> None:
        for name, table in (("per_device_hour", self.per_device_hour), ("per_gib_hour", self.per_gib_hour)):
            for model, price in table.items():
                if price < 0:
                    raise InvalidRequestError(f"price for {model} must be >= 0", field=name)

    def as_dict(self) -> dict[str, Any]:
        """The table as JSON-ready data (what the journal stores; :meth:`from_dict` reads it)."""
        return {"currency": self.currency, "default_device_hour": float(self.default_device_hour),
                "per_device_hour": {str(k): float(v) for k, v in sorted(self.per_device_hour.items())},
                "per_gib_hour": {str(k): float(v) for k, v in sorted(self.per_gib_hour.items())}}

    @classmethod
    def from_dict(cls, data: Any) -> PriceTable:
        """A table from :meth:`as_dict`'s data; :class:`InvalidRequestError` naming the field
        that is missing, extra, or not a finite price >= 0."""
        keys = {"currency", "default_device_hour", "per_device_hour", "per_gib_hour"}
        if not isinstance(data, dict) or set(data) != keys:
            got = sorted(data) if isinstance(data, dict) else type(data).__name__
            raise InvalidRequestError(f"a price table has the fields {sorted(keys)}, not {got}", field="prices")

        def price(v: Any, name: str) -> float:
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v < 0:
                raise InvalidRequestError(f"price {name} must be a finite number >= 0, not {v!r}", field=name)
            return float(v)

        tables: list[dict[str, float]] = []
        for name in ("per_device_hour", "per_gib_hour"):
            t = data[name]
            if not isinstance(t, dict):
                raise InvalidRequestError(f"{name} must map device models to prices", field=name)
            tables.append({str(k): price(v, f"{name}[{k}]") for k, v in t.items()})
        if not isinstance(data["currency"], str) or not data["currency"]:
            raise InvalidRequestError(f"currency must be a name, not {data['currency']!r}", field="currency")
        return cls(tables[0], tables[1], price(data["default_device_hour"], "default_device_hour"), data["currency"])

    def device_hour(self, model: str) -> float:
        return float(self.per_device_hour.get(model, self.default_device_hour))

    def cost(self, model: str, use: Usage3) -> float:
        return (use.compute_share_seconds / 3600.0 * self.device_hour(model)
                + use.memory_byte_seconds / GIB / 3600.0 * float(self.per_gib_hour.get(model, 0.0)))


@dataclass(frozen=True, slots=True)
class BillLine:
    tenant: str
    model: str
    device_hours: float
    memory_gib_hours: float
    compute_share_hours: float
    cost: float


@dataclass(frozen=True, slots=True)
class Bill:
    """One line per (tenant, model), plus totals per tenant."""

    lines: tuple[BillLine, ...]
    currency: str
    until: float

    def total(self, tenant: str | None = None) -> float:
        return sum(line.cost for line in self.lines if tenant is None or line.tenant == tenant)

    def as_rows(self) -> list[dict[str, object]]:
        return [{"tenant": x.tenant, "model": x.model, "device_hours": round(x.device_hours, 6),
                 "memory_gib_hours": round(x.memory_gib_hours, 6),
                 "compute_share_hours": round(x.compute_share_hours, 6), "cost": round(x.cost, 6),
                 "currency": self.currency} for x in self.lines]


@dataclass(frozen=True, slots=True)
class Segment:
    """An open run segment: what a running job holds, since when."""

    tenant: str
    model: str
    devices: int
    memory_bytes: int
    share: float
    start: float


class Meter:
    """Accumulates closed segments; :meth:`bill` adds the open ones up to ``now``."""

    def __init__(self, prices: PriceTable | None = None) -> None:
        self.prices = prices or PriceTable()
        self.closed: dict[tuple[str, str], Usage3] = {}
        self.open: dict[str, list[Segment]] = {}

    def start(self, job: str, segments: Iterable[Segment]) -> None:
        self.open[job] = list(segments)

    def stop(self, job: str, now: float) -> float:
        """Close a job's segments; returns the device-seconds metered."""
        total = 0.0
        for seg in self.open.pop(job, []):
            use = self.closed.setdefault((seg.tenant, seg.model), Usage3())
            dt = max(0.0, now - seg.start)
            use.add(seg.devices, seg.memory_bytes, seg.share, dt)
            total += seg.devices * dt
        return total

    def totals(self, now: float | None = None) -> dict[tuple[str, str], Usage3]:
        out = {k: Usage3(v.device_seconds, v.memory_byte_seconds, v.compute_share_seconds)
               for k, v in self.closed.items()}
        if now is not None:
            for segs in self.open.values():
                for seg in segs:
                    out.setdefault((seg.tenant, seg.model), Usage3()).add(
                        seg.devices, seg.memory_bytes, seg.share, max(0.0, now - seg.start))
        return out

    def bill(self, now: float | None = None) -> Bill:
        lines = []
        for (tenant, model), use in sorted(self.totals(now).items()):
            lines.append(BillLine(tenant, model, use.device_seconds / 3600.0, use.memory_byte_seconds / GIB / 3600.0,
                                  use.compute_share_seconds / 3600.0, self.prices.cost(model, use)))
        return Bill(tuple(lines), self.prices.currency, float(now) if now is not None else float("nan"))
