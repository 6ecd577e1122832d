"""Tenants: quotas per device pool (guaranteed and borrowable), cohorts, running-job limits,
decayed fair-share usage, and the victim rule of preemption.

Quota keys are pool names (device models such as ``"A100"``) or ``"*"`` for the tenant's
total over every pool.  A tenant inside its *guaranteed* quota is never preempted for another
tenant; usage above it is *borrowed* from idle quota of its cohort and may be reclaimed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from accel.scheduler import InvalidRequestError

__all__ = ["Admission", "Quota", "Tenant", "TenantBook", "Usage"]

ANY_POOL = "*"


@dataclass(frozen=True, slots=True)
class Quota:
    """Limits in one pool: whole-device count, device memory and compute share (milli-devices).

    ``None`` means unlimited in that dimension.
    """

    devices: int | None = None
    memory_bytes: int | None = None
    compute_milli: int | None = None

    def allows(self, use: Usage) -> bool:
        """Whether ``use`` stays within every limited dimension."""
        return ((self.devices is None or use.devices <= self.devices)
                and (self.memory_bytes is None or use.memory_bytes <= self.memory_bytes)
                and (self.compute_milli is None or use.compute_milli <= self.compute_milli))


@dataclass(slots=True)
class Usage:
    """Resources a tenant holds in one pool."""

    devices: int = 0
    memory_bytes: int = 0
    compute_milli: int = 0

    def plus(self, other: Usage, sign: int = 1) -> Usage:
        return Usage(self.devices + sign * other.devices, self.memory_bytes + sign * other.memory_bytes,
                     self.compute_milli + sign * other.compute_milli)


@dataclass(frozen=True, slots=True)
class Tenant:
    """A tenant.  ``guaranteed`` is its own quota; ``limit`` its ceiling including borrowing.

    Without a ``cohort`` the ceiling is the guarantee (nothing to borrow from).  With one, the
    tenant may use idle guaranteed quota of other cohort members up to ``limit`` (unlimited if
    that key is missing).  ``weight`` scales its fair share.
    """

    name: str
    guaranteed: Mapping[str, Quota] = field(default_factory=dict)
    limit: Mapping[str, Quota] = field(default_factory=dict)
    cohort: str | None = None
    max_running_jobs: int | None = None
    weight: float = 1.0

    def __post_init__(self) -> None:
        if not self.name:
            raise InvalidRequestError("tenant needs a name", field="tenant.name")
        if not self.weight > 0:
            raise InvalidRequestError(f"tenant {self.name}: weight must be > 0", field="tenant.weight")


@dataclass(frozen=True, slots=True)
class Admission:
    """Result of a quota check: ``ok``; ``borrowing`` when it uses cohort quota; ``why`` if not."""

    ok: bool
    borrowing: bool = False
    why: str = ""


class TenantBook:
    """Usage per tenant and pool, quota checks, fair-share usage with exponential decay."""

    def __init__(self, tenants: Iterable[Tenant] = (), *, half_life_s: float = 7 * 86400.0) -> None:
        self.tenants: dict[str, Tenant] = {}
        for t in tenants:
            if t.name in self.tenants:
                raise InvalidRequestError(f"tenant {t.name} declared twice", field="tenants")
            self.tenants[t.name] = t
        self.usage: dict[str, dict[str, Usage]] = {}
        self.running: dict[str, int] = {}
        self.half_life_s = half_life_s
        # fair share: decayed device-seconds, the time it was last folded, and the current rate
        self._fair: dict[str, tuple[float, float, float]] = {}

    def tenant(self, name: str) -> Tenant:
        return self.tenants.get(name) or Tenant(name)

    def use(self, tenant: str, pool: str) -> Usage:
        return self.usage.get(tenant, {}).get(pool, Usage())

    # -- bookkeeping --------------------------------------------------------------------------------
    def add(self, tenant: str, pool: str, use: Usage, now: float, sign: int = 1) -> None:
        """Account ``use`` (sign=-1 to return it) in ``pool`` and in the ``*`` total."""
        per = self.usage.setdefault(tenant, {})
        for key in (pool, ANY_POOL):
            per[key] = per.get(key, Usage()).plus(use, sign)
        self.running[tenant] = self.running.get(tenant, 0) + sign
        value, t0, rate = self._fair.get(tenant, (0.0, now, 0.0))
        value = self._decayed(value, t0, rate, now)
        self._fair[tenant] = (value, now, rate + sign * use.compute_milli / 1000.0)

    def _decayed(self, value: float, t0: float, rate: float, now: float) -> float:
        dt = max(0.0, now - t0)
        if dt == 0.0:
            return value
        h = self.half_life_s
        decay = math.pow(2.0, -dt / h)
        return value * decay + rate * (h / math.log(2.0)) * (1.0 - decay)

    def fair_usage(self, tenant: str, now: float) -> float:
        """Decayed device-seconds of ``tenant`` divided by its weight."""
        value, t0, rate = self._fair.get(tenant, (0.0, now, 0.0))
        return self._decayed(value, t0, rate, now) / self.tenant(tenant).weight

    # -- admission ------------------------------------------------------------------------------------
    def _cohort(self, t: Tenant) -> list[Tenant]:
        return [o for o in self.tenants.values() if t.cohort is not None and o.cohort == t.cohort]

    def admit(self, tenant: str, pool: str, need: Usage, *, minus: Mapping[str, Usage] | None = None,
              running_minus: int = 0) -> Admission:
        """Can ``tenant`` take ``need`` more in ``pool``?

        ``minus`` / ``running_minus`` ask the hypothetical question "after these are returned"
        (wait estimates use it to find when a tenant's own jobs free its quota).
        """
        t = self.tenant(tenant)
        running = self.running.get(tenant, 0) - running_minus
        if t.max_running_jobs is not None and running >= t.max_running_jobs:
            return Admission(False, why=f"tenant {tenant} runs {t.max_running_jobs} jobs, its limit")
        borrowing = False
        for key in (pool, ANY_POOL):
            g, lim = t.guaranteed.get(key), t.limit.get(key)
            if g is None and lim is None:
                continue
            new = self.use(tenant, key).plus(need)
            if minus and key in minus:
                new = new.plus(minus[key], -1)
            if g is not None and g.allows(new):
                continue
            if t.cohort is None:
                ceiling = lim if lim is not None else g
                if ceiling is not None and not ceiling.allows(new):
                    return Admission(False, why=f"tenant {tenant} quota in {key} is used up")
                continue
            if lim is not None and not lim.allows(new):
                return Admission(False, why=f"tenant {tenant} borrowing limit in {key} is reached")
            # borrow: the cohort's total guarantee must cover the cohort's total use
            members = self._cohort(t)
            total = Usage()
            for m in members:
                total = total.plus(self.use(m.name, key))
            total = total.plus(need)
            cap = _sum_quota([m.guaranteed.get(key) for m in members])
            if not cap.allows(total):
                return Admission(False, why=f"cohort {t.cohort} has no idle quota in {key} to lend")
            borrowing = True
        return Admission(True, borrowing=borrowing)

    def above_guarantee(self, tenant: str, pool: str, give_back: Usage) -> bool:
        """Would ``tenant`` still hold at least its guarantee after returning ``give_back``?

        This is the preemption rule across tenants: only usage above the guarantee (borrowed,
        or unguaranteed) may be taken away for another tenant.
        """
        t = self.tenant(tenant)
        for key in (pool, ANY_POOL):
            g = t.guaranteed.get(key)
            if g is None:
                continue
            left = self.use(tenant, key).plus(give_back, -1)
            if not _at_least(left, g):
                return False
        return True

    def within_guarantee(self, tenant: str, pool: str, need: Usage) -> bool:
        """Is ``tenant`` still inside its guarantee after taking ``need`` (reclaim right)?"""
        t = self.tenant(tenant)
        keys = [k for k in (pool, ANY_POOL) if k in t.guaranteed]
        return bool(keys) and all(t.guaranteed[k].allows(self.use(tenant, k).plus(need)) for k in keys)


def _sum_quota(quotas: list[Quota | None]) -> Quota:
    def total(vals: list[int | None]) -> int | None:
        return None if any(v is None for v in vals) else sum(v for v in vals if v is not None)
    qs = [q for q in quotas if q is not None]
    if not qs:
        return Quota(0, 0, 0)
    return Quota(total([q.devices for q in qs]), total([q.memory_bytes for q in qs]),
                 total([q.compute_milli for q in qs]))


def _at_least(use: Usage, q: Quota) -> bool:
    """``use`` >= ``q`` in every limited dimension (a tenant holding its full guarantee)."""
    return ((q.devices is None or use.devices >= q.devices)
            and (q.memory_bytes is None or use.memory_bytes >= q.memory_bytes)
            and (q.compute_milli is None or use.compute_milli >= q.compute_milli))
