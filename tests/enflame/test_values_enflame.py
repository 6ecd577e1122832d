"""Enflame through the toolkit's pair parser; health is read from ``efsmi -q`` Health only."""

from __future__ import annotations

from pathlib import Path

from accel.plugins.enflame._parse import parse_query, parse_table

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "enflame"
TWO = "efsmi_v1.2.0.301_s60_2dev.txt"
QUERY = "efsmi-q_1.4.3.4_s60_elided.txt"


def sample(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def test_table_power_pair_real_and_sentinel() -> None:
    r = parse_table(sample(TWO)).readings[0]
    assert (r.power_watts, r.power_limit_watts) == (105.0, 300.0)
    text = sample(TWO).replace("105W  300W", "105W 65535W", 1)
    r = parse_table(text).readings[0]
    assert (r.power_watts, r.power_limit_watts) == (105.0, None)
    assert r.conditions == []


def test_table_power_placeholder_usage() -> None:
    text = sample(TWO).replace("105W  300W", " N/A  300W", 1)
    r = parse_table(text).readings[0]
    assert (r.power_watts, r.power_limit_watts) == (None, 300.0)
    assert r.conditions == []


def test_query_power_sentinel_is_none() -> None:
    text = sample(QUERY).replace("Power Capa              : 300 W", "Power Capa              : 4294967295 W")
    (r,) = parse_query(text).readings
    assert r.power_watts == 96.0
    assert r.power_limit_watts is None
    # the sample's own PCIe x8-of-x16 warning stays; the sentinel adds nothing
    assert [c.reason for c in r.conditions] == ["PcieLinkDegraded"]


def test_health_read_from_query_not_table() -> None:
    (r,) = parse_query(sample(QUERY)).readings
    assert r.health_read
    assert not any(r.health_read for r in parse_table(sample(TWO)).readings)
