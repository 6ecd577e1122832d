"""Requests validate themselves and name the offending field."""

from __future__ import annotations

import pytest

from accel.errors import SchedulerError
from accel.scheduler import DeviceSelector, InvalidRequestError, Request, Share, TopologyConstraint


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"cpu_milli": -1}, "cpu_milli"),
    ({"devices": -2}, "devices"),
    ({"devices": 2, "share": Share(500)}, "devices"),
    ({"devices": 1, "partition": "1g.10gb"}, "devices"),
    ({"partition": ""}, "partition"),
    ({"memory_bytes": 1.5}, "memory_bytes"),
])
def test_invalid_requests_raise_typed_errors(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidRequestError) as info:
        Request("r", **kwargs)  # type: ignore[arg-type]
    assert info.value.field == field
    assert isinstance(info.value, SchedulerError)


@pytest.mark.parametrize("milli", [0, 1000, 1500, -5])
def test_share_must_be_a_fraction(milli: int) -> None:
    with pytest.raises(InvalidRequestError):
        Share(milli)


def test_empty_name_and_bad_selector() -> None:
    with pytest.raises(InvalidRequestError):
        Request("")
    with pytest.raises(InvalidRequestError):
        DeviceSelector(models="A100")  # type: ignore[arg-type]
    with pytest.raises(InvalidRequestError):
        DeviceSelector(expr="__import__('os')")
    with pytest.raises(InvalidRequestError):
        DeviceSelector(expr="memory_bytes >=")


def test_selector_expression_over_model_fields() -> None:
    sel = DeviceSelector(expr='memory_bytes >= 40 * 1000000000 && "mps" in capabilities && vendor != "amd"')
    assert sel.matches({"memory_bytes": 80 << 30, "capabilities": {"mps"}, "vendor": "nvidia"})
    assert not sel.matches({"memory_bytes": 16 << 30, "capabilities": {"mps"}, "vendor": "nvidia"})
    assert not sel.matches({"memory_bytes": 80 << 30, "capabilities": set(), "vendor": "nvidia"})
    assert DeviceSelector(expr="!(architecture == 'hopper') || false").matches({"architecture": "ampere"})


def test_derived_quantities() -> None:
    assert Request("a", share=Share(300)).total_milli == 300
    assert Request("b", devices=4).total_milli == 4000
    assert not Request("c", cpu_milli=100).wants_devices
    assert Request("d", devices=2, topology=TopologyConstraint(required=True)).device_count == 2
