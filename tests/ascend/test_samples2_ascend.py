"""Ascend: two more real A3 (Atlas 910C) ``npu-smi info`` quotes, npu-smi 25.5.0 and 26.0.rc2.

Both are partial (as the public issue quote is retrievable); provenance in tests/fixtures/SOURCES.md.
26.0.rc2 prints a wider table (116 columns, the right box widened) than 25.x (98 columns).
"""

from __future__ import annotations

from pathlib import Path

from accel.model import HealthState
from accel.plugin import BackendConfig
from accel.plugins.ascend import PLUGIN
from accel.plugins.ascend._parse import parse_info
from accel.toolkit import ReplayScenario

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "ascend"
MiB = 2**20

A3_26_0_RC2 = "npu-smi-info_26.0.rc2_910c-a3_vllm-ascend-12980_partial.txt"
A3_25_5_0 = "npu-smi-info_25.5.0_910c-a3_vllm-ascend-12050_partial.txt"


def text(name: str) -> str:
    return (FIX / name).read_text(encoding="utf-8")


def inventory(tmp_path: Path, info: str):  # type: ignore[no-untyped-def]
    sc = ReplayScenario(tmp_path / "sc")
    sc.add(["npu-smi", "info"], stdout=info)
    with PLUGIN.open(BackendConfig(runner=sc.runner())) as be:
        return be.inventory()


def test_a3_26_0_rc2_wide_layout_two_dies() -> None:
    r = parse_info(text(A3_26_0_RC2))
    assert r.tool_version == "26.0.rc2" and r.errors == ()
    assert [(c.npu_id, c.chip_id, c.phy_id, c.name, c.health, c.bus_id) for c in r.chips] == [
        (0, 0, 0, "Ascend910", "OK", "0000:9d:00.0"),
        (0, 1, 1, "Ascend910", "OK", "0000:9f:00.0"),
    ]
    assert [c.power_watts for c in r.chips] == [162.6, None]  # second die prints "-"
    assert [c.temperature_celsius for c in r.chips] == [34.0, 34.0]
    assert [c.hbm_used_bytes for c in r.chips] == [3419 * MiB, 2874 * MiB]
    assert {c.hbm_total_bytes for c in r.chips} == {65536 * MiB}
    assert {c.aicore_ratio for c in r.chips} == {0.0}


def test_a3_26_0_rc2_inventory(tmp_path: Path) -> None:
    inv = inventory(tmp_path, text(A3_26_0_RC2))
    assert [d.id for d in inv.devices] == ["huawei:pci-0000:9d:00.0", "huawei:pci-0000:9f:00.0"]
    assert {d.memory_total_bytes for d in inv.devices} == {65536 * MiB}
    # Health column "OK" was printed: health was read.
    assert all(d.health.checked_at is not None for d in inv.devices)
    assert {d.health.state for d in inv.devices} == {HealthState.HEALTHY}
    assert inv.complete, inv.problems


def test_a3_25_5_0_one_die() -> None:
    r = parse_info(text(A3_25_5_0))
    assert r.tool_version == "25.5.0" and r.errors == ()
    (c,) = r.chips
    assert (c.npu_id, c.chip_id, c.phy_id, c.name, c.health, c.bus_id) == (0, 0, 0, "Ascend910", "OK", "0000:84:00.0")
    assert c.power_watts == 173.8 and c.temperature_celsius == 34.0
    assert c.hbm_used_bytes == 3144 * MiB and c.hbm_total_bytes == 65536 * MiB
