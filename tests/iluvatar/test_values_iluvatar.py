"""Iluvatar through the toolkit's pair parser: placeholders and sentinels, csv errors typed."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from accel.errors import ParseError
from accel.plugins.iluvatar._parse import parse_query_csv, parse_table

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "iluvatar"
MIB = 2**20


def sample(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def test_wedged_65535w_is_a_sentinel_not_65_kw() -> None:
    t = parse_table(sample("ixsmi_bi-v100_gpu5-wedged_then-ixsmi-r.txt"))
    (wedged,) = [r for r in t.readings if r.conditions]
    assert wedged.power_watts is None  # "65535W" is uint16 max, never a reading
    assert wedged.power_limit_watts == 250.0  # "/ 250": the cap lost its unit, still watts
    assert wedged.memory_used_bytes == 513 * MIB
    assert wedged.memory_total_bytes == 32768 * MIB
    assert "65535" in (wedged.conditions[0].message or "")
    assert [c.reason for c in wedged.conditions] == ["DeviceWedged"]


def test_bi_v150_na_pair_is_none_without_a_condition() -> None:
    t = parse_table(sample("ixsmi_4.1.0_bi-v150_16gpu_8boards.txt"))
    na = [r for r in t.readings if r.power_watts is None]
    assert na, "every other BI-V150 chip prints N/A / N/A"
    for r in na:
        assert r.power_limit_watts is None
        assert r.conditions == []


def test_uint32_power_limit_in_csv_is_none() -> None:
    fields = ["index", "name", "power.draw", "power.limit"]
    (r,) = parse_query_csv("0, Iluvatar MR-V100, 45 W, 4294967295 W\n", fields)
    assert r.power_watts == 45.0
    assert r.power_limit_watts is None  # not a 4.29 GW cap
    assert r.conditions == []


def test_ixsmi_prints_no_health_so_none_is_read() -> None:
    t = parse_table(sample("ixsmi_4.1.0_bi-v150_16gpu_8boards.txt"))
    assert not any(r.health_read for r in t.readings)


def test_csv_field_over_size_limit_is_parse_error() -> None:
    # The csv module's own limit (131072 by default) is lowered so the field stays under the
    # toolkit's line cap (8192 characters), which refuses the default-size line earlier.
    old = csv.field_size_limit(1000)
    try:
        big = '0, "' + "x" * 1010 + '", 16384 MiB\n'
        with pytest.raises(ParseError) as info:
            parse_query_csv(big, ["index", "name", "memory.total"])
        assert "CSV" in str(info.value)
    finally:
        csv.field_size_limit(old)


def test_csv_line_over_the_line_cap_is_parse_error() -> None:
    big = '0, "' + "x" * (csv.field_size_limit() + 10) + '", 16384 MiB\n'
    with pytest.raises(ParseError, match="characters long"):
        parse_query_csv(big, ["index", "name", "memory.total"])
