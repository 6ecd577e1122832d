"""The one assembly of a device from typed readings: never readable vs not read this time."""

from __future__ import annotations

import pytest

from accel.errors import AccelError, OutOfBoundsError, ValidationError
from accel.model import (
    Device,
    DeviceKind,
    MemoryKind,
    MemoryRegion,
    PciInfo,
    PowerLimits,
    Telemetry,
    ThermalLimits,
)
from accel.toolkit import DeviceReading, assemble_device, unsupported_of
from accel.toolkit._assembly import is_empty

BUS = "0000:1a:00.0"


def reading(**fields: object) -> Device:
    base: dict[str, object] = {"id": f"acme:pci-{BUS}", "vendor": "acme", "kind": DeviceKind.GPU, "model": "X1"}
    return Device.model_construct(**{**base, **fields})  # type: ignore[arg-type]


def test_a_never_readable_field_that_is_empty_is_unsupported_one_that_was_read_is_not() -> None:
    got = assemble_device(
        DeviceReading(
            reading(serial_number="SN1", power=PowerLimits.model_construct(enforced_watts=300.0)),
            never=frozenset({"serial_number", "uuid", "power.enforced_watts", "power.min_watts"}),
        ),
        tool="acme-smi",
    )
    assert got.unsupported == {"uuid", "power.min_watts"}
    assert got.serial_number == "SN1" and got.power.enforced_watts == 300.0


def test_memory_paths_look_at_the_first_region_and_no_region_is_empty() -> None:
    never = frozenset({"memory.total_bytes", "memory.used_bytes"})
    with_memory = reading(memory=(MemoryRegion.model_construct(kind=MemoryKind.HBM, total_bytes=2**30),))
    assert assemble_device(DeviceReading(with_memory, never=never), tool="t").unsupported == {"memory.used_bytes"}
    assert assemble_device(DeviceReading(reading(), never=never), tool="t").unsupported == never


def test_not_read_this_time_is_none_with_a_problem_and_never_unsupported() -> None:
    problems: list[AccelError] = []
    got = assemble_device(
        DeviceReading(
            reading(thermal=ThermalLimits.model_construct(slowdown_celsius=1e9),
                    pci=PciInfo.model_construct(bus_id=BUS)),
            never=frozenset({"thermal.slowdown_celsius", "thermal.shutdown_celsius"}),
            missed=frozenset({"thermal.shutdown_celsius"}),
        ),
        tool="acme-smi",
        problems=problems,
    )
    assert got.thermal.slowdown_celsius is None
    # Out of bounds this time, and "missed": neither is a field the backend can never read.
    assert got.unsupported == frozenset()
    assert len(problems) == 1 and isinstance(problems[0], OutOfBoundsError)
    assert problems[0].field == "thermal.slowdown_celsius" and "acme-smi" in str(problems[0])


def test_without_problems_an_out_of_bounds_value_is_raised() -> None:
    bad = reading(power=PowerLimits.model_construct(enforced_watts=4_294_967_295.0))
    with pytest.raises(OutOfBoundsError, match=r"power\.enforced_watts"):
        assemble_device(DeviceReading(bad), tool="t")


def test_a_value_the_model_refuses_otherwise_is_a_validation_error() -> None:
    with pytest.raises(ValidationError, match="bus_id"):
        assemble_device(DeviceReading(reading(pci=PciInfo.model_construct(bus_id="1a:00.0"))), tool="t")


def test_the_rule_serves_telemetry_data_and_model_objects() -> None:
    data = {"power_watts": None, "clocks_hertz": {}, "temperature_celsius": 40.0}
    assert unsupported_of(data, ["power_watts", "clocks_hertz", "temperature_celsius"]) == {
        "power_watts", "clocks_hertz"}
    assert unsupported_of(data, ["power_watts"], missed=["power_watts"]) == frozenset()
    sample = Telemetry.model_validate({"device_id": "acme:x", "timestamp": "2026-01-01T00:00:00Z"})
    assert unsupported_of(sample, ["power_watts"]) == {"power_watts"}
    assert all(is_empty(v) for v in (None, "", {}, ())) and not any(is_empty(v) for v in (0, False, "x"))
