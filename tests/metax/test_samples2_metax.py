"""MetaX: a real ``mx-smi`` 2.2.9 default view with the Board/GPU layout (8x MetaX C500).

mx-smi 2.2.9 prints a four-box table: ``Board  Name | GPU  Persist-M | Bus-id | GPU-Util  sGPU-M``
over ``Pwr:Usage/Cap | Temp  Perf | Memory-Usage | GPU-State``.  Provenance in
tests/fixtures/SOURCES.md (the "mx-smi  version:" preamble line is not in the quoted output).
"""

from __future__ import annotations

from pathlib import Path

from accel.model import HealthState
from accel.plugin import BackendConfig
from accel.plugins.metax import PLUGIN
from accel.plugins.metax._parse import parse_mx_smi
from accel.tools import ReplayRunner

SAMPLE = Path(__file__).resolve().parents[1] / "fixtures" / "metax" / "mx-smi_2.2.9_c500_8gpu_board-layout.txt"
MIB = 2**20


def text() -> str:
    return SAMPLE.read_text(encoding="utf-8")


def test_mx_smi_229_board_layout_values() -> None:
    t = parse_mx_smi(text())
    assert (t.driver_version, t.maca_version, t.bios_version, t.attached) == ("3.4.4", "3.3.0.15", "1.30.0.0", 8)
    assert [r.index for r in t.readings] == list(range(8))
    assert [r.bus_id for r in t.readings] == [
        "0000:0e:00.0", "0000:0f:00.0", "0000:10:00.0", "0000:12:00.0",
        "0000:35:00.0", "0000:36:00.0", "0000:37:00.0", "0000:38:00.0",
    ]  # fmt: skip
    assert [r.power_watts for r in t.readings] == [57.0, 58.0, 58.0, 60.0, 57.0, 56.0, 55.0, 56.0]
    assert {r.power_limit_watts for r in t.readings} == {350.0}
    assert [r.temperature_celsius for r in t.readings] == [35.0, 37.0, 36.0, 35.0, 33.0, 34.0, 34.0, 36.0]
    assert {(r.memory_used_bytes, r.memory_total_bytes) for r in t.readings} == {(826 * MIB, 65536 * MIB)}
    assert {r.utilization_ratio for r in t.readings} == {0.0}
    assert {r.extras["metax-tech.com/gpuState"] for r in t.readings} == {"Available"}
    assert t.processes == [] and t.problems == []


def test_mx_smi_229_inventory_health_read_from_gpu_state() -> None:
    inv = PLUGIN.open(BackendConfig(runner=ReplayRunner.from_mapping({"mx-smi": text()}))).inventory()
    assert [d.id for d in inv.devices][:2] == ["metax:pci-0000:0e:00.0", "metax:pci-0000:0f:00.0"]
    assert len(inv.devices) == 8
    assert all(d.health.checked_at is not None for d in inv.devices)  # GPU-State printed
    assert {d.health.state for d in inv.devices} == {HealthState.HEALTHY}
    assert inv.devices[0].versions.driver == "3.4.4" and inv.devices[0].versions.runtime == "3.3.0.15"


def test_mx_smi_229_board_layout_model_is_read() -> None:
    t = parse_mx_smi(text())
    assert {r.model for r in t.readings} == {"MetaX C500"}
    inv = PLUGIN.open(BackendConfig(runner=ReplayRunner.from_mapping({"mx-smi": text()}))).inventory()
    assert {d.model for d in inv.devices} == {"MetaX C500"}


def test_mx_smi_229_version_from_banner() -> None:
    assert parse_mx_smi(text()).mx_smi_version == "2.2.9"
