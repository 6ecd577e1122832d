"""Physical bounds (issue 14): a value no device can have is a problem, never a reading."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from accel.errors import OutOfBoundsError, ValidationError
from accel.model import (
    BOUNDS,
    DeviceKind,
    ProblemKind,
    Telemetry,
    bound_of,
    extra_problem,
    validate,
    validate_reading,
)
from accel.toolkit import UnitReading, parse_celsius, parse_int, parse_watts, visible_binding
from accel.toolkit._problems import problems_of
from accel.toolkit._unit import build_unit
from tests.fuzz._engine import out_of_bounds

NOW = datetime(2026, 12, 3, tzinfo=UTC)


@pytest.mark.parametrize(
    ("field", "bad"),
    [
        ("power_watts", 4294967295.0),  # the 0xFFFFFFFF sentinel read as watts
        ("temperature_celsius", -54.0),
        ("temperature_celsius", 255.0),
        ("memory_total_bytes", 10**29),
        ("utilization_ratio", 1.5),
        ("power_watts", float("nan")),
        ("power_watts", float("inf")),
        ("energy_joules", -1.0),
        ("ecc_corrected_total", 2**64),
    ],
)
def test_the_model_refuses_values_no_device_can_have(field: str, bad: float) -> None:
    with pytest.raises(ValidationError) as info:
        validate(Telemetry, {"device_id": "x:1", "timestamp": NOW, field: bad})
    assert field in str(info.value)


@pytest.mark.parametrize(
    ("field", "good"),
    [
        ("power_watts", 1500.0),
        ("temperature_celsius", -10.0),
        ("temperature_celsius", 105.0),
        ("memory_total_bytes", 288 * 2**30),
        ("energy_joules", 1.5e9),
        ("ecc_corrected_total", 2**64 - 1),
    ],
)
def test_real_values_pass(field: str, good: float) -> None:
    assert getattr(validate(Telemetry, {"device_id": "x:1", "timestamp": NOW, field: good}), field) == good


def test_clock_of_1_8e25_hz_is_out_but_30_ghz_memory_clock_is_in() -> None:
    t, dropped = validate_reading(
        Telemetry, {"device_id": "x:1", "timestamp": NOW, "clocks_hertz": {"sm": 1.8e25, "memory": 30e9}}
    )
    assert t.clocks_hertz == {"memory": 30e9}
    assert [d.field for d in dropped] == ["clocks_hertz.sm"]


def test_validate_reading_leaves_out_only_the_bad_values() -> None:
    t, dropped = validate_reading(
        Telemetry,
        {
            "device_id": "x:1",
            "timestamp": NOW,
            "power_watts": 4294967295.0,
            "temperature_celsius": 41.0,
            "temperatures_celsius": {"hbm": 1e9, "edge": 40.0},
        },
    )
    assert t.power_watts is None
    assert t.temperature_celsius == 41.0
    assert t.temperatures_celsius == {"edge": 40.0}
    assert sorted(d.field for d in dropped) == ["power_watts", "temperatures_celsius.hbm"]
    assert all("not a reading" in str(d) for d in dropped)


def test_validate_reading_still_raises_for_errors_that_are_not_bounds() -> None:
    with pytest.raises(ValidationError, match="device_id"):
        validate_reading(Telemetry, {"timestamp": NOW, "power_watts": 1e12})


def test_bounds_table_is_documented_and_longest_suffix_wins() -> None:
    assert bound_of("max_bandwidth_bytes_per_s") == BOUNDS["_bytes_per_s"]
    assert bound_of("memory_total_bytes") == BOUNDS["_bytes"]
    assert bound_of("shutdown_celsius") == (-40.0, 200.0)
    assert bound_of("model") is None


def test_vendor_extras_are_bounded_by_their_unit_suffix() -> None:
    assert extra_problem("ascend.huawei.com/logic_id", -1) is not None
    assert extra_problem("ascend.huawei.com/logic_id", 3) is None
    assert extra_problem("x.example.com/hbm_celsius", 500.0) is not None
    assert extra_problem("x.example.com/anything", float("nan")) == "not a finite number"
    assert extra_problem("x.example.com/label", "text") is None


def _build(reading: UnitReading, problems: list) -> tuple:
    return build_unit(
        reading,
        vendor="metax",
        kind=DeviceKind.GPU,
        tool="mx-smi",
        binding=visible_binding("CUDA_VISIBLE_DEVICES"),
        timestamp=NOW,
        problems=problems,
    )


def test_toolkit_reports_an_absurd_value_as_a_field_problem_and_keeps_the_device() -> None:
    problems: list = []
    reading = UnitReading(
        index=0,
        bus_id="0000:0a:00.0",
        model="C500",
        memory_total_bytes=10**29,
        power_limit_watts=4294967295.0,
        temperature_celsius=-54.0,
        power_watts=120.0,
        clocks_hertz={"sm": 1.8e25, "mem": 1.6e9},
        extras={"metax.com/die_id": -1},
    )
    device, sample = _build(reading, problems)
    assert device.memory == () or device.memory[0].total_bytes is None
    assert device.power.enforced_watts is None
    assert "metax.com/die_id" not in device.extras
    assert sample.temperature_celsius is None
    assert sample.power_watts == 120.0
    assert sample.clocks_hertz == {"mem": 1.6e9}
    fields = sorted(p.field for p in problems)
    assert fields == sorted(
        [
            "memory_total_bytes",
            "power_limit_watts",
            "temperature_celsius",
            "clocks_hertz['sm']",
            "extras['metax.com/die_id']",
        ]
    )
    assert all(isinstance(p, OutOfBoundsError) for p in problems)
    typed = problems_of("metax", problems)
    assert {p.kind for p in typed} == {ProblemKind.FIELD}
    assert {p.device_id for p in typed} == {device.id}
    assert all("no device can have" in p.message for p in typed)


def test_toolkit_without_a_problem_list_raises_the_typed_error() -> None:
    with pytest.raises(OutOfBoundsError):
        build_unit(
            UnitReading(index=0, bus_id="0000:0a:00.0", power_watts=1e9),
            vendor="metax",
            kind=DeviceKind.GPU,
            tool="mx-smi",
            binding=visible_binding(None),
            timestamp=NOW,
        )


@pytest.mark.parametrize("text", ["4294967295 W", "65535", "0xFFFFFFFF", "-1 W", "N/A", "0xffff W"])
def test_sentinels_are_unknown_not_numbers(text: str) -> None:
    assert parse_watts(text) is None
    assert parse_celsius(text.replace("W", "C")) is None


def test_a_5000_digit_number_is_a_parse_error() -> None:
    from accel.errors import ParseError

    with pytest.raises(ParseError):
        parse_int("9" * 5000)


def test_the_fuzz_oracle_sees_what_the_model_would_refuse() -> None:
    forged = Telemetry.model_construct(
        device_id="x:1", timestamp=NOW, power_watts=1e9, clocks_hertz={"sm": float("nan")}
    )
    found = list(out_of_bounds(forged))
    assert any("power_watts" in f for f in found)
    assert any("clocks_hertz" in f for f in found)


def _replay(plugin: str, scenario: str, old: str, new: str) -> object:
    import importlib
    from pathlib import Path

    from accel.plugin import BackendConfig
    from accel.tools import Recording, ReplayRunner

    mod = importlib.import_module(f"accel.plugins.{plugin}")
    assert mod.__file__ is not None
    recs = list(ReplayRunner(Path(mod.__file__).parent / "scenarios" / scenario)._table.values())
    i = max(range(len(recs)), key=lambda k: len(recs[k].stdout))
    text = recs[i].stdout.replace(old, new, 1)
    assert text != recs[i].stdout
    recs[i] = Recording(recs[i].argv, stdout=text)
    config = BackendConfig(runner=ReplayRunner.from_recordings(recs), enrich_from_sysfs=False)
    return mod.PLUGIN.open(config).inventory()


@pytest.mark.parametrize(
    ("plugin", "scenario", "old", "new", "devices", "field"),
    [
        ("ascend", "910b-8", "3314 / 65536 ", "3314 / 99999999999999 ", 8, "memory_total_bytes"),
        ("ascend", "910b-8", "| 101.8 ", "| 99999.8 ", 8, "power_watts"),
        ("cambricon", "mlu370-x8", "106 W/ 250 W", "106 W/ 99999 W", 2, "power_limit_watts"),
        ("hygon", "k100-8dcu", "53.0C    96.0W", "53.0C    96000.0W", 8, "power_watts"),
        ("metax", "c550-8", "858/65536 MiB", "858/99999999999 MiB", 8, "memory_total_bytes"),
    ],
)
def test_plugins_keep_the_device_and_report_the_field(
    plugin: str, scenario: str, old: str, new: str, devices: int, field: str
) -> None:
    inv = _replay(plugin, scenario, old, new)
    assert len(inv.devices) == devices  # type: ignore[attr-defined]
    found = [p for p in inv.problems if p.kind is ProblemKind.FIELD]  # type: ignore[attr-defined]
    assert found, inv.problems  # type: ignore[attr-defined]
    assert any(field in p.message for p in found)
    assert not inv.complete  # type: ignore[attr-defined]
    assert list(out_of_bounds(inv)) == []


def test_camel_case_extras_are_bounded_too() -> None:
    assert extra_problem("huawei.com/chipLogicId", -1) is not None
    assert extra_problem("cambricon.com/vMemoryTotalBytes", 10**30) is not None
    assert extra_problem("huawei.com/hugepagesTotal", 970) is None
