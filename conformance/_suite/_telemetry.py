"""Conformance rows of section ``telemetry`` (Telemetry): Timestamped samples in SI units."""

from __future__ import annotations

from accel.model import Telemetry
from accel.plugin import Backend

from .._requirements import row
from ._base import SuiteBase
from ._harness import _Harness
from ._helpers import _LINK_COUNTERS, _MONOTONIC, _TELEMETRY_FIELDS, _check, _device_ids, _empty, _fail

__all__ = ["TelemetryRows"]


class TelemetryRows(SuiteBase):
    """The ``telemetry.*`` rows of requirements.json."""

    def _samples(self, accel: _Harness, backend: Backend | None = None) -> tuple[Telemetry, ...]:
        b = backend or accel.backend
        samples = accel.call("telemetry()", b.telemetry)
        bad = [type(s).__name__ for s in samples if not isinstance(s, Telemetry)]
        if bad:
            _fail([f"telemetry() returned {bad[0]} objects"], "return accel.model.Telemetry samples")
        return samples

    @row("telemetry.one-per-device")
    def test_telemetry_one_per_device(self, accel: _Harness) -> None:
        ids = _device_ids(accel.inventory)
        samples = self._samples(accel)
        got = [s.device_id for s in samples]
        problems = []
        if sorted(got) != sorted(ids):
            problems.append(f"telemetry() answered for {sorted(got)}, the inventory has {sorted(ids)}")
        if ids:
            one = accel.call(f"telemetry(ids=[{ids[-1]!r}])", lambda: accel.backend.telemetry([ids[-1]]))
            if [s.device_id for s in one] != [ids[-1]]:
                problems.append(f"telemetry(ids=[{ids[-1]!r}]) answered for {[s.device_id for s in one]}")
        _check(problems, "return exactly one Telemetry per requested device id")

    @row("telemetry.units-sane")
    def test_telemetry_units_sane(self, accel: _Harness) -> None:
        totals = {d.id: d.memory_total_bytes for d in accel.inventory.devices}
        problems = []
        for s in self._samples(accel):
            if s.power_watts is not None and s.power_watts > 3000:
                problems.append(f"{s.device_id}: power {s.power_watts} W (milliwatts?)")
            temps = dict(s.temperatures_celsius)
            if s.temperature_celsius is not None:
                temps["main"] = s.temperature_celsius
            for name, t in temps.items():
                if not -40 <= t <= 150:
                    problems.append(f"{s.device_id}: temperature {name} {t} C")
            for name, hz in s.clocks_hertz.items():
                if not 10**6 <= hz <= 10**11:
                    problems.append(f"{s.device_id}: clock {name} {hz} Hz (MHz?)")
            total = totals.get(s.device_id)
            for name in ("memory_used_bytes", "memory_free_bytes"):
                value = getattr(s, name)
                if value is not None and total is not None and value > total:
                    problems.append(f"{s.device_id}: {name} {value} > device total {total} (MiB vs bytes?)")
        _check(problems, "convert to SI base units: watts, degrees Celsius, hertz, bytes")

    @row("telemetry.counters-monotonic")
    def test_telemetry_counters_monotonic(self, accel: _Harness) -> None:
        first = {s.device_id: s for s in self._samples(accel)}
        second = {s.device_id: s for s in self._samples(accel)}
        problems = []
        for dev_id, a in first.items():
            b = second.get(dev_id)
            if b is None:
                continue
            if b.timestamp < a.timestamp:
                problems.append(f"{dev_id}: timestamp went back from {a.timestamp} to {b.timestamp}")
            for name in _MONOTONIC:
                va, vb = getattr(a, name), getattr(b, name)
                if va is not None and vb is not None and vb < va:
                    problems.append(f"{dev_id}: {name} went from {va} to {vb}")
            links_a = {c.link: c for c in a.links}
            for cb in b.links:
                ca = links_a.get(cb.link)
                for name in _LINK_COUNTERS if ca is not None else ():
                    va, vb = getattr(ca, name), getattr(cb, name)
                    if va is not None and vb is not None and vb < va:
                        problems.append(f"{dev_id} link {cb.link}: {name} went from {va} to {vb}")
        _check(problems, "report the vendor's cumulative counters (never deltas, never reset on read)")

    @row("telemetry.unsupported-listed")
    def test_telemetry_unsupported_listed(self, accel: _Harness) -> None:
        info = accel.require_plugin().info
        problems = []
        for s in self._samples(accel):
            for cap, name in _TELEMETRY_FIELDS.items():
                value = getattr(s, name)
                if info.declares(cap):
                    if _empty(value) and name not in s.unsupported:
                        problems.append(f"{s.device_id}: '{cap.value}' is declared but {name} is empty and not "
                                        "listed unsupported")
                elif not _empty(value):
                    problems.append(f"{s.device_id}: {name}={value!r} but '{cap.value}' is not declared")
                elif name not in s.unsupported:
                    problems.append(f"{s.device_id}: {name} is None but not in Telemetry.unsupported")
        _check(problems, "declare the capability and report the value, or list the field in Telemetry.unsupported")
