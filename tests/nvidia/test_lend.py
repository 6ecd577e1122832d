"""inventory() lends its reading to the next telemetry(), once and only while fresh."""

from __future__ import annotations

from typing import Any

import pytest

import accel.plugins.nvidia._backend as backend_mod


def _field_calls(fake: Any) -> int:
    return int(fake.calls.get("nvmlDeviceGetFieldValues", 0))


def test_telemetry_after_inventory_borrows_its_reading_once(open_scenario: Any) -> None:
    backend, fake = open_scenario("rtx4090-4")
    backend.inventory()
    before = _field_calls(fake)
    first = backend.telemetry()
    assert _field_calls(fake) == before  # the inventory's reading, no new field-values call
    backend.telemetry()
    assert _field_calls(fake) == before + 4  # the loan is spent: a fresh reading per GPU
    # The borrowed sample says what a fresh one would (same fake, nothing changed in between).
    assert [t.memory_used_bytes for t in first] == [t.memory_used_bytes for t in backend.telemetry()]


def test_a_stale_loan_is_not_used(open_scenario: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    backend, fake = open_scenario("rtx4090-4")
    backend.inventory()
    monkeypatch.setattr(backend_mod, "_LEND_S", -1.0)  # every loan is already too old
    before = _field_calls(fake)
    backend.telemetry()
    assert _field_calls(fake) == before + 4


def test_the_borrowed_reading_sees_what_changed_before_the_inventory(open_scenario: Any) -> None:
    backend, fake = open_scenario("rtx4090-4")
    backend.inventory()
    backend.telemetry()
    fake.scenario.gpus[1].memory_used += 2**30
    inv = backend.inventory()
    t = {s.device_id: s for s in backend.telemetry()}
    dev = inv.devices[1]
    assert t[dev.id].memory_used_bytes == dev.memory_used_bytes
