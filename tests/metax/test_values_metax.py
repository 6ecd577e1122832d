"""MetaX through the toolkit's pair parser; health is read from the GPU-State column only."""

from __future__ import annotations

from pathlib import Path

from accel.plugins.metax._parse import parse_mx_smi

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "metax"
MIB = 2**20
V216 = "mx-smi_2.1.6_mxc550_8gpu.txt"
V224 = "mx-smi_2.2.4_c550_8gpu_gpu-state.txt"


def sample(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def test_power_cap_sentinel_is_none() -> None:
    text = sample(V224).replace("53W / 450W", "53W / 4294967295W", 1)
    r = parse_mx_smi(text).readings[0]
    assert (r.power_watts, r.power_limit_watts) == (53.0, None)
    assert r.conditions == []


def test_power_na_pair_and_memory_na_used() -> None:
    text = sample(V224).replace("53W / 450W", "N/A / N/A  ", 1).replace("858/65536 MiB", "N/A/65536 MiB", 1)
    r = parse_mx_smi(text).readings[0]
    assert (r.power_watts, r.power_limit_watts) == (None, None)
    assert (r.memory_used_bytes, r.memory_total_bytes) == (None, 65536 * MIB)
    assert r.conditions == []


def test_real_values_still_read() -> None:
    r = parse_mx_smi(sample(V224)).readings[0]
    assert (r.power_watts, r.power_limit_watts) == (53.0, 450.0)
    assert (r.memory_used_bytes, r.memory_total_bytes) == (858 * MIB, 65536 * MIB)
    r = parse_mx_smi(sample(V216)).readings[0]
    assert (r.power_watts, r.power_limit_watts) == (44.0, None)


def test_health_read_only_where_gpu_state_printed() -> None:
    assert all(r.health_read for r in parse_mx_smi(sample(V224)).readings)
    assert not any(r.health_read for r in parse_mx_smi(sample(V216)).readings)


def test_mx_smi_2_1_12_c500_partial_issue_sample() -> None:
    t = parse_mx_smi(sample("mx-smi_2.1.12_c500_8gpu_partial.txt"))
    assert t.mx_smi_version == "2.1.12"
    assert t.driver_version == "2.12.13"
    assert t.maca_version == "2.29.0.19"
    assert t.bios_version == "1.20.3.0"
    a, b = t.readings
    assert (a.index, a.model, a.bus_id) == (0, "MetaX C500", "0000:0e:00.0")
    assert (b.index, b.bus_id) == (1, "0000:0f:00.0")
    assert (a.temperature_celsius, b.temperature_celsius) == (35.0, 36.0)
    assert (a.power_watts, a.power_limit_watts) == (54.0, 350.0)
    assert (b.power_watts, b.power_limit_watts) == (45.0, 350.0)
    assert (a.memory_used_bytes, a.memory_total_bytes) == (826 * MIB, 65536 * MIB)
    assert a.utilization_ratio == 0.0
    assert not a.health_read  # 2.1.x prints no GPU-State column
