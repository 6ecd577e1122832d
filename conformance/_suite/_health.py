"""Conformance rows of section ``health`` (Health): Typed health conditions and the state the core derives from them."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from accel.errors import DeviceLostError
from accel.model import Health, HealthState, Operational, derive_state
from accel.plugin import Capability

from .._hooks import Fault
from .._requirements import row
from ._base import SuiteBase
from ._harness import _Harness
from ._helpers import _EARNED_SKEW, _check, _describe, _device_ids

__all__ = ["HealthRows"]


class HealthRows(SuiteBase):
    """The ``health.*`` rows of requirements.json."""

    @row("health.covers-devices")
    def test_health_covers_devices(self, accel: _Harness) -> None:
        inv = accel.inventory
        ids = set(_device_ids(inv))
        got = accel.call("health()", accel.backend.health)
        problems = []
        missing = sorted(ids - set(got))
        extra = sorted(set(got) - ids - {p.id for p in inv.partitions})
        if missing:
            problems.append(f"health() has no entry for {missing}")
        if extra:
            problems.append(f"health() answers for unknown ids {extra}")
        bad = [k for k, v in got.items() if not isinstance(v, Health)]
        if bad:
            problems.append(f"health() values for {bad} are not accel.model.Health")
        if inv.devices:
            one = inv.devices[0].id
            only = accel.call(f"health(ids=[{one!r}])", lambda: accel.backend.health([one]))
            if set(only) != {one}:
                problems.append(f"health(ids=[{one!r}]) answered for {sorted(only)}")
        _check(problems, "return {device_id: Health} for every device (Health.unknown() when unreadable)")

    @row("health.state-derived")
    def test_health_state_derived(self, accel: _Harness) -> None:
        inv = accel.inventory
        got = accel.call("health()", accel.backend.health)
        problems = []
        for dev_id, h in got.items():
            rule = derive_state(h.conditions, h.operational, h.monitored)
            if h.state is not rule:
                problems.append(f"{dev_id}: state {h.state.value}, the core's rule gives {rule.value}")
        for dev in inv.devices:
            now = got.get(dev.id)
            if now is not None and (now.operational, now.state) != (dev.health.operational, dev.health.state):
                problems.append(f"{dev.id}: inventory says {dev.health.operational.value}/{dev.health.state.value}, "
                                f"health() says {now.operational.value}/{now.state.value}")
        _check(problems, "report conditions and operational status only; never set a state")

    @row("health.not-supported-unknown")
    def test_health_not_supported_unknown(self, accel: _Harness) -> None:
        info = accel.require_plugin().info
        if not info.declares(Capability.HEALTH):
            got = accel.call("health()", accel.backend.health)
            wrong = [f"{k}: {v.state.value}" for k, v in got.items()
                     if v.state is not HealthState.UNKNOWN and v.operational is Operational.ONLINE]
            _check([f"without the 'health' capability these are not unknown: {wrong}"] if wrong else [],
                   "return Health.unknown() for devices whose health the backend cannot read")
            return
        faulted = accel.faulted(Fault.HEALTH_NOT_SUPPORTED)
        if faulted is None:
            pytest.skip("no fault hook: set make_health_unreadable or faulted_config, or implement FaultInjector "
                        "(health_not_supported)")
        backend, ids, target = faulted
        got = accel.call("health() with one device's health unreadable", backend.health)
        h = got.get(target)
        problems = []
        if h is None:
            problems.append(f"health() dropped {target} when its health became unreadable")
        elif h.monitored or h.state is not HealthState.UNKNOWN:
            problems.append(f"{target} with NOT_SUPPORTED health is {h.state.value} (monitored={h.monitored})")
        for other in [i for i in ids if i != target]:
            if other in got and got[other].state is HealthState.UNKNOWN and got[other].monitored is False:
                problems.append(f"{other} also became unknown")
        _check(problems, "map the vendor's NOT_SUPPORTED to Health(monitored=False), not to a failure condition")

    @row("health.earned")
    def test_health_earned(self, accel: _Harness) -> None:
        # A scheduler places work on "healthy": that word must come from a reading taken now.
        inv = accel.inventory
        start = datetime.now(UTC)
        got = accel.call("health()", accel.backend.health)
        end = datetime.now(UTC)
        problems: list[str] = []

        def judge(where: str, h: Health, low: datetime, high: datetime) -> None:
            if h.state is not HealthState.HEALTHY:
                return
            if not h.monitored:
                problems.append(f"{where}: healthy with monitored=False")
            elif h.checked_at is None:
                problems.append(f"{where}: healthy without checked_at (nothing says when health was read)")
            elif h.checked_at.tzinfo is None:
                problems.append(f"{where}: checked_at {h.checked_at.isoformat()} has no timezone")
            elif not low - _EARNED_SKEW <= h.checked_at <= high + _EARNED_SKEW:
                problems.append(f"{where}: healthy from a reading at {h.checked_at.isoformat()}, not taken at this "
                                f"read ({low.isoformat()} .. {high.isoformat()})")

        collected = inv.collected_at if inv.collected_at.tzinfo is not None else inv.collected_at.replace(tzinfo=UTC)
        for dev in inv.devices:
            judge(f"inventory {dev.id}", dev.health, collected, end)
        for part in inv.partitions:
            judge(f"inventory partition {part.id}", part.health, collected, end)
        for dev_id, h in got.items():
            judge(f"health() {dev_id}", h, start, end)
        _check(problems, "set checked_at (the read time) where the tool or library printed health (a health or "
               "status column, ECC counters, a status call); otherwise leave it unset: the state is then unknown")

    @row("health.lost-device-isolated")
    def test_health_lost_device_isolated(self, accel: _Harness) -> None:
        faulted = accel.faulted(Fault.DEVICE_LOST)
        if faulted is None:
            pytest.skip("no fault hook: set ConformanceSuite.lose_device or faulted_config, or implement "
                        "FaultInjector on the backend")
        backend, ids, lost = faulted
        others = [i for i in ids if i != lost]
        problems = []
        try:
            after = backend.inventory()
        except Exception as exc:  # noqa: BLE001
            problems.append(f"inventory() raised {_describe(exc)} after {lost} was lost")
        else:
            missing = sorted(set(others) - set(_device_ids(after)))
            if missing:
                problems.append(f"inventory() after losing {lost} also dropped {missing}")
        try:
            health = backend.health()
        except Exception as exc:  # noqa: BLE001
            problems.append(f"health() raised {_describe(exc)} after {lost} was lost")
        else:
            h = health.get(lost)
            if h is None or h.operational is not Operational.LOST or h.state is not HealthState.UNHEALTHY:
                shown = f"{h.operational.value}/{h.state.value}" if h else "absent"
                problems.append(f"the lost device reads {shown}, not lost/unhealthy")
            for o in others:
                if o not in health or health[o].operational is Operational.LOST:
                    problems.append(f"{o} reads lost or absent in health() although only {lost} was lost")
        if others and accel.require_plugin().info.declares(Capability.TELEMETRY):
            try:
                samples = backend.telemetry(others)
            except Exception as exc:  # noqa: BLE001
                problems.append(f"telemetry({others[:2]}...) raised {_describe(exc)} after {lost} was lost")
            else:
                got_ids = sorted(s.device_id for s in samples)
                if got_ids != sorted(others):
                    problems.append(f"telemetry of the other devices answered for {got_ids}")
            try:
                everything = backend.telemetry()
            except DeviceLostError:
                pass  # allowed: asking for the lost device explicitly or implicitly may raise it
            except Exception as exc:  # noqa: BLE001
                problems.append(f"telemetry() raised {_describe(exc)} after {lost} was lost")
            else:
                missing = sorted(set(others) - {s.device_id for s in everything})
                if missing:
                    problems.append(f"telemetry() after losing {lost} has no samples for {missing}")
        _check(problems, "catch the vendor's GPU_IS_LOST per device, report Operational.LOST for it and keep "
                         "answering for the others")

    @row("health.vendor-codes")
    def test_health_vendor_codes(self, accel: _Harness, request: pytest.FixtureRequest) -> None:
        inv = accel.inventory
        vendors = {d.id: d.vendor for d in inv.devices}
        health = accel.call("health()", accel.backend.health)
        problems = []
        codes = 0
        for dev_id, h in [*((d.id, d.health) for d in inv.devices), *health.items()]:
            for cond in h.conditions:
                if cond.vendor_code is None:
                    continue
                codes += 1
                prefix = cond.vendor_code.split(".", 1)[0]
                if dev_id in vendors and prefix != vendors[dev_id]:
                    problems.append(f"{dev_id}: vendor code {cond.vendor_code!r} does not start with "
                                    f"{vendors[dev_id]!r}")
        request.node.user_properties.append(("accel_measured", f"{codes} vendor codes checked"))
        _check(problems, "write codes as '<vendor>.<kind>:<code>', e.g. 'nvidia.xid:79', 'huawei.npu:0x80E18401'")
