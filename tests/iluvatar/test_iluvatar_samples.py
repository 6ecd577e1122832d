"""Every Iluvatar CoreX sample, read the way a person reads it."""

from __future__ import annotations

from pathlib import Path

import pytest

from accel.errors import ParseError
from accel.model import HealthState, LinkType
from accel.plugin import BackendConfig
from accel.plugins.iluvatar import PLUGIN
from accel.plugins.iluvatar._parse import parse_query_csv, parse_table
from accel.tools import ReplayRunner

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "iluvatar"
MIB = 2**20
BI_V150 = "ixsmi_4.1.0_bi-v150_16gpu_8boards.txt"
AFTER_RESET = "ixsmi_3.0.1_bi-v100_8gpu_after-reset.txt"
WEDGED = "ixsmi_bi-v100_gpu5-wedged_then-ixsmi-r.txt"


def sample(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def inventory(mapping: dict[str, str]):  # type: ignore[no-untyped-def]
    return PLUGIN.open(BackendConfig(runner=ReplayRunner.from_mapping(mapping))).inventory()


# -- BI-V150: 8 boards, 16 GPUs -------------------------------------------------------------------


def test_bi_v150_sixteen_gpus_every_other_power_na() -> None:
    t = parse_table(sample(BI_V150))
    assert (t.ixml_version, t.driver_version, t.cuda_version) == ("4.1.0", "4.1.0", "10.2")
    assert [r.index for r in t.readings] == list(range(16))
    assert all(r.model == "Iluvatar BI-V150" for r in t.readings)
    assert t.readings[0].bus_id == "0000:13:00.0" and t.readings[15].bus_id == "0000:67:00.0"
    assert [r.power_watts for r in t.readings] == [None, 93, None, 94, None, 98, None, 95,
                                                    None, 95, None, 94, None, 93, None, 94]  # fmt: skip
    assert t.readings[1].power_limit_watts == 350.0 and t.readings[0].power_limit_watts is None
    r = t.readings[0]
    assert (r.memory_used_bytes, r.memory_total_bytes) == (116 * MIB, 32768 * MIB)
    assert r.clocks_hertz == {"sm": 1.5e9, "memory": 1.6e9}
    assert r.fan_ratio == 0.0 and r.temperature_celsius == 32.0
    assert r.conditions == []  # "N/A / N/A" is unknown, not garbage
    assert t.processes == [] and t.problems == []


def test_bi_v150_boards_pair_chips_and_keep_power_on_the_reporter() -> None:
    inv = inventory({"ixsmi": sample(BI_V150)})
    assert len(inv.devices) == 16
    d0, d1 = inv.devices[0], inv.devices[1]
    assert d0.board_id == d1.board_id == "board-0000:13:00.0"
    assert inv.devices[2].board_id == "board-0000:1c:00.0"
    assert d0.extras["iluvatar.com/boardPowerReporter"] is False
    assert d1.extras["iluvatar.com/boardPowerReporter"] is True
    assert d1.extras["iluvatar.com/powerScope"] == "board"
    assert d1.power.enforced_watts == 350.0 and d0.power.enforced_watts is None
    assert len(inv.domains) == 8 and inv.domains[0].members == (d0.id, d1.id)
    assert inv.domains[0].kind == "die_pair"
    tel = {
        t.device_id: t
        for t in PLUGIN.open(BackendConfig(runner=ReplayRunner.from_mapping({"ixsmi": sample(BI_V150)}))).telemetry()
    }
    assert tel[d0.id].power_watts is None and tel[d1.id].power_watts == 93.0
    assert d0.binding.visible_env == "CUDA_VISIBLE_DEVICES" and d0.binding.visible_id == "0"
    assert d0.binding.torch_device_type == "cuda"
    # Health is earned and ixsmi prints no health reading: unknown, never healthy.
    assert all(d.health.state is HealthState.UNKNOWN and d.health.checked_at is None for d in inv.devices)


# -- BI-V100 after reset: 7 of 8 listed ------------------------------------------------------------


def test_bi_v100_after_reset_lists_seven_gpus() -> None:
    t = parse_table(sample(AFTER_RESET))
    assert (t.ixml_version, t.driver_version) == ("3.0.1", "3.0.1")
    assert len(t.readings) == 7
    assert t.readings[5].index == 5 and t.readings[5].bus_id == "0000:25:00.0"  # 21:00.0 is gone
    assert "0000:21:00.0" not in {r.bus_id for r in t.readings}
    assert [r.power_watts for r in t.readings] == [54, 56, 54, 56, 55, 57, 55]
    assert all(r.power_limit_watts == 250 for r in t.readings)
    assert all(r.memory_used_bytes == 513 * MIB for r in t.readings)
    inv = inventory({"ixsmi": sample(AFTER_RESET)})
    assert [d.id for d in inv.devices][3] == "iluvatar:pci-0000:1d:00.0"
    assert all(d.board_id is None for d in inv.devices)  # BI-V100 is one GPU per board


# -- wedged GPU 5, then ixsmi -r -------------------------------------------------------------------


def test_wedged_fragment_sentinels_become_an_unhealthy_condition() -> None:
    t = parse_table(sample(WEDGED))
    assert [r.index for r in t.readings] == [4, 5, 6, 7]
    wedged = t.readings[1]
    assert wedged.bus_id == "0000:21:00.0"
    assert wedged.power_watts is None and wedged.temperature_celsius is None
    assert wedged.utilization_ratio is None and wedged.clocks_hertz == {}
    assert wedged.memory_total_bytes == 32768 * MIB
    assert [c.reason for c in wedged.conditions] == ["DeviceWedged"]
    assert "65535" in (wedged.conditions[0].message or "")
    assert len(t.resets) == 8 and "0000:21:00.0" in t.resets
    inv = inventory({"ixsmi": sample(WEDGED)})
    states = [d.health.state for d in inv.devices]
    # ixsmi prints no health: the others are unknown; the wedged card's sentinels are a reading.
    assert states == [HealthState.UNKNOWN, HealthState.UNHEALTHY, HealthState.UNKNOWN, HealthState.UNKNOWN]
    bad = inv.devices[1].health.conditions
    assert bad[0].vendor_code == "iluvatar.ixsmi:sentinel-values" and bad[0].action == "reset_device"
    assert any(c.reason == "DeviceReset" for c in bad)


# -- --query-gpu CSV --------------------------------------------------------------------------------


def test_query_csv_sample_mr_v50_mr_v100() -> None:
    fields = ["index", "name", "memory.total", "memory.used", "utilization.gpu", "temperature.gpu"]
    a, b = parse_query_csv(sample("ixsmi-query-gpu-csv_mr-v50_mr-v100.txt"), fields)
    assert (a.index, a.model, a.memory_total_bytes, a.memory_used_bytes) == (
        0,
        "Iluvatar MR-V50",
        16384 * MIB,
        116 * MIB,
    )
    assert (b.index, b.model, b.memory_total_bytes, b.memory_used_bytes) == (
        1,
        "Iluvatar MR-V100",
        32768 * MIB,
        27996 * MIB,
    )
    assert (a.utilization_ratio, a.temperature_celsius, b.temperature_celsius) == (0.0, 30.0, 36.0)


def test_query_csv_wrong_column_count_names_the_line() -> None:
    with pytest.raises(ParseError) as info:
        parse_query_csv("0, Iluvatar MR-V50, 16384 MiB\n", ["index", "name", "memory.total", "memory.used"])
    assert info.value.tool == "ixsmi" and info.value.lineno == 1


# -- formats without a sample -----------------------------------------------------------------------


def test_list_uuids_no_sample_nvidia_layout() -> None:
    listing = "GPU 0: Iluvatar BI-V150 (UUID: GPU-1f0d8a2c-0000-1111-2222-333344445555)\n"
    inv = inventory({"ixsmi": sample(BI_V150), "ixsmi -L": listing})
    assert inv.devices[0].id == "iluvatar:GPU-1f0d8a2c-0000-1111-2222-333344445555"
    assert inv.devices[1].id == "iluvatar:pci-0000:16:00.0"


def test_topo_matrix_no_sample_nvidia_layout() -> None:
    topo = (
        "\tGPU0\tGPU1\tGPU2\tCPU Affinity\n"
        "GPU0\t X \tPIX\tSYS\t0-31\nGPU1\tPIX\t X \tSYS\t0-31\nGPU2\tSYS\tSYS\t X \t32-63\n"
    )
    inv = inventory({"ixsmi": sample(AFTER_RESET), "ixsmi topo -m": topo})
    types = {(lk.a[-12:], lk.b[-12:]): lk.type for lk in inv.links}
    assert types[("0000:14:00.0", "0000:15:00.0")] is LinkType.PCIE_PIX
    assert types[("0000:14:00.0", "0000:18:00.0")] is LinkType.SYSTEM
    assert inv.distance_matrix().level(inv.devices[0].id, inv.devices[1].id) == "PIX"


def test_process_rows_no_sample_nvidia_layout() -> None:
    text = sample(BI_V150).replace(
        "|  No running processes found                                                 |",
        "|    1      4242      python3                                        1024     |",
    )
    inv = inventory({"ixsmi": text})
    (proc,) = inv.processes
    assert (proc.pid, proc.name, proc.memory_bytes) == (4242, "python3", 1024 * MIB)
    assert proc.device_id == "iluvatar:pci-0000:16:00.0"


# -- errors -----------------------------------------------------------------------------------------


def test_bad_bus_id_leaves_out_one_gpu_only() -> None:
    t = parse_table(sample(BI_V150).replace("00000000:27:00.0", "00000000:27:00.9"))
    assert len(t.readings) == 15
    (err,) = t.problems
    assert err.tool == "ixsmi" and err.lineno == 20


def test_not_ixsmi_output_is_a_parse_error() -> None:
    with pytest.raises(ParseError):
        parse_table("ixsmi: command not found\n")
