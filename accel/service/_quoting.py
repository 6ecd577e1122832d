"""Quotes: every pool that can take a request, its wait p50 / p90, price, expected cost, why."""

from __future__ import annotations

import math
import secrets
from collections.abc import Callable
from typing import Any

from accel.scheduler import InvalidRequestError
from accel.scheduler.queueing import WaitEstimate, WaitReason

from ._auth import Principal
from ._base import ServiceBase
from ._jobreq import JobRequest


class Quoting(ServiceBase):
    """The quote half of the service."""

    def quote(self, who: Principal, req: JobRequest) -> list[dict[str, Any]]:
        """Every pool that can take ``req``: wait p50 / p90, price, expected cost, why it waits."""
        tenant = self._tenant(who, req)
        with self.lock:
            now = self.now()
            return self._quote(tenant, req, now)

    def _quote(self, tenant: str, req: JobRequest, now: float) -> list[dict[str, Any]]:
        pools = self.pools_for(req)
        if not pools:
            raise InvalidRequestError(self._no_pool(req), field="model")
        probe = f"quote-{secrets.token_hex(6)}"
        ests: list[WaitEstimate] = self.engine.quote(self._spec(probe, tenant, req, ""), now)
        ahead: list[int] = []  # the queue's length, counted only if a pool waits for it (it sorts the queue)

        def queued() -> int:
            if not ahead:
                ahead.append(len(self.engine.queue(now)))
            return ahead[0]
        out = []
        for est in ests:
            if est.pool not in pools:
                continue
            price = self.engine.meter.prices.device_hour(est.pool)
            share = (req.share["compute_milli"] / 1000.0) if req.share else float(req.devices)
            hours = (req.duration_s or req.time_limit_s or 3600.0) / 3600.0
            # p50 / p90 from the engine's interval (the spread of the durations it predicts for
            # the jobs ahead; equal to the plan when durations are declared and taken as exact)
            finite = math.isfinite(est.wait_s)
            wait = (est.p50_s if est.p50_s is not None else est.wait_s) if finite else None
            p90 = (est.p90_s if est.p90_s is not None else est.wait_s) if finite else None
            out.append({"pool": est.pool, "vendor": self._pool_vendor.get(est.pool, ""),
                        "wait_p50_s": wait, "wait_p90_s": p90, "p90_basis": est.basis or "declared durations",
                        "start_at": est.start_at if math.isfinite(est.start_at) else None,
                        "price_per_device_hour": price, "currency": self.engine.meter.prices.currency,
                        "expected_cost": round(price * share * hours, 6), "reason": est.reason.value,
                        "why": self._why(est, queued), "summary": est.describe()})
        return out

    @staticmethod
    def _why(est: WaitEstimate, ahead: Callable[[], int]) -> str:
        if est.reason == WaitReason.NONE:
            return "starts now"
        if est.reason == WaitReason.PRIORITY:
            return f"queue position: {ahead()} job(s) queued ahead"
        if est.reason == WaitReason.RESERVATION:
            return "a reservation ahead holds the free devices"
        if est.reason == WaitReason.QUOTA:
            return "the tenant's quota is in use until its own jobs end"
        if est.reason == WaitReason.CAPACITY:
            return "waits for running jobs to release devices" if math.isfinite(est.wait_s) else \
                "not with the current capacity"
        return "the placement pipeline refused it with the devices free now"

    def _no_pool(self, req: JobRequest) -> str:
        what = req.pool or req.model or req.vendor or "any"
        return (f"no pool can take {req.devices} device(s) of {what!r}; pools: "
                + ", ".join(f"{p} ({self.engine.pool_capacity(p)})" for p in self.engine.pools))

