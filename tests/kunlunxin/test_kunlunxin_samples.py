"""Every Kunlunxin sample, read the way a person reads it."""

from __future__ import annotations

from pathlib import Path

import pytest

from accel.errors import ParseError
from accel.model import HealthState, LinkType
from accel.plugin import BackendConfig
from accel.plugins.kunlunxin import PLUGIN
from accel.plugins.kunlunxin._parse import parse_xpu_smi
from accel.testing import FakeSysfs
from accel.tools import ReplayRunner

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "kunlunxin"
MIB = 2**20
P800 = "xpu_smi_5.0.21.21_p800-oam_8xpu.txt"
R300 = "xpu_smi_runtime4.31_r300_2dev.txt"


def sample(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def inventory(mapping: dict[str, str]):  # type: ignore[no-untyped-def]
    return PLUGIN.open(BackendConfig(runner=ReplayRunner.from_mapping(mapping))).inventory()


def test_p800_new_layout_eight_xpus_96g() -> None:
    t = parse_xpu_smi(sample(P800))
    assert (t.layout, t.driver_version, t.runtime_version) == ("5.x", "5.0.21.21", "5.0.21")
    assert [r.index for r in t.readings] == list(range(8))
    assert [r.bus_id for r in t.readings] == [
        "0000:03:00.0", "0000:05:00.0", "0000:63:00.0", "0000:65:00.0",
        "0000:83:00.0", "0000:85:00.0", "0000:a3:00.0", "0000:a5:00.0",
    ]  # fmt: skip
    r = t.readings[1]
    assert r.model == "P800 OAM"
    assert (r.memory_used_bytes, r.memory_total_bytes) == (0, 98304 * MIB)
    assert (r.power_watts, r.power_limit_watts, r.temperature_celsius) == (90.0, 400.0, 41.0)
    assert r.fan_ratio is None  # "N/A"
    assert r.ecc_uncorrected_total == 0
    assert r.extras["kunlunxin.com/l3TotalBytes"] == 96 * MIB
    assert r.extras["kunlunxin.com/sriovMode"] == "Disabled"
    assert t.processes == [] and t.problems == []


def test_p800_inventory_binding_and_modes() -> None:
    inv = inventory({"xpu_smi": sample(P800)})
    d = inv.devices[0]
    assert d.id == "kunlunxin:pci-0000:03:00.0" and d.kind == "xpu"
    assert d.memory_total_bytes == 96 * 2**30  # L3 is an extra, not device memory
    assert (d.binding.visible_env, d.binding.visible_id, d.binding.collective_backend) == (
        "XPU_VISIBLE_DEVICES", "0", "bkcl",
    )  # fmt: skip
    assert d.partition_mode.scheme == "none"
    assert d.versions.driver == "5.0.21.21"
    assert all(x.health.state is HealthState.HEALTHY for x in inv.devices)


def test_r300_old_layout_two_xpus_masked_serial_device_nodes() -> None:
    t = parse_xpu_smi(sample(R300))
    assert (t.layout, t.driver_version, t.runtime_version) == ("4.x", "4.0", "4.31")
    a, b = t.readings
    assert (a.index, a.bus_id, a.model) == (0, "0000:53:00.0", "R300")
    assert (b.index, b.bus_id) == (1, "0000:56:00.0")
    assert (a.memory_used_bytes, a.memory_total_bytes) == (0, 32768 * MIB)  # "MB" means MiB here
    assert a.extras["kunlunxin.com/l3TotalBytes"] == 63 * MIB
    assert a.serial_number is None and a.extras["kunlunxin.com/serialMasked"] == "02Kxxx"
    assert a.device_nodes == ["/dev/xpu0"] and b.device_nodes == ["/dev/xpu1"]
    assert a.utilization_ratio == 0.0
    inv = inventory({"xpu_smi": sample(R300)})
    assert inv.devices[1].binding.device_nodes == ("/dev/xpu1",)


def test_list_uuids_published_form() -> None:
    listing = (
        "XPU 0: P800 OAM  GPU-ed733bb8-c4a8-5bb5-9431-14512597fc12\n"
        "XPU 1: P800 OAM  GPU-b3509946-0bc6-5744-bd7c-a0b87dadef02\n"
    )
    inv = inventory({"xpu_smi": sample(P800), "xpu_smi -L": listing})
    assert inv.devices[0].id == "kunlunxin:GPU-ed733bb8-c4a8-5bb5-9431-14512597fc12"
    assert inv.devices[1].uuid == "GPU-b3509946-0bc6-5744-bd7c-a0b87dadef02"
    assert inv.devices[2].id == "kunlunxin:pci-0000:63:00.0"


def test_topo_xl_groups_no_sample_reference_layout() -> None:
    header = "        XPU0    XPU1    XPU2    XPU3    XPU4    XPU5    XPU6    XPU7    NIC0    CPU Affinity\n"
    rows = ""
    for i in range(8):
        cells = ["X" if i == j else ("XL" if i // 4 == j // 4 else "SYS") for j in range(8)]
        rows += f"XPU{i}    " + "".join(f"{c:<8}" for c in cells) + ("PIX     " if i == 0 else "SYS     ") + "0-95\n"
    topo = header + rows + "NIC0    PIX     SYS     SYS     SYS     SYS     SYS     SYS     SYS     X\n\nLegend:\n"
    inv = inventory({"xpu_smi": sample(P800), "xpu_smi topo -m": topo})
    ids = [d.id for d in inv.devices]
    assert [d.members for d in inv.domains] == [tuple(ids[:4]), tuple(ids[4:])]
    assert {lk.type for lk in inv.links} == {LinkType.XPULINK, LinkType.SYSTEM}
    assert inv.distance_matrix().level(ids[0], ids[1]) == "LINK"


def test_sriov_and_ecc_columns_change_mode_and_health() -> None:
    text = sample(P800).replace("|             Disabled |", "|              Enabled |", 1)
    text = text.replace(
        "| 00000000:05:00.0 N/A |                    0 |", "| 00000000:05:00.0 N/A |                    3 |"
    )
    inv = inventory({"xpu_smi": text})
    assert inv.devices[0].partition_mode.scheme == "sriov" and inv.devices[0].capabilities.sriov is True
    bad = inv.devices[1]
    assert bad.health.state is HealthState.DEGRADED
    assert bad.health.conditions[0].reason == "UncorrectableMemoryError" and bad.health.conditions[0].count == 3


def test_intel_xpu_smi_output_is_refused_by_name() -> None:
    intel = "+-----------+--------------------------------------------------------------------------------------+\n"
    intel += "| Device ID | Device Information                                                                   |\n"
    intel += "| 0         | Device Name: Intel(R) Data Center GPU Max 1550                                       |\n"
    with pytest.raises(ParseError, match="Intel"):
        parse_xpu_smi(intel, command="xpu-smi")


def test_probe_trusts_pci_id_not_the_ambiguous_binary(tmp_path: Path) -> None:
    runner = ReplayRunner.from_mapping({"xpu-smi discovery": "Intel output"})
    absent = PLUGIN.probe(BackendConfig(runner=runner, sysfs_root=tmp_path / "sys", dev_root=tmp_path / "dev"))
    assert absent.status == "absent" and "Intel" in absent.reason
    fake = FakeSysfs(tmp_path / "sys")
    fake.add_device("0000:03:00.0", vendor="1d22", device="3684", class_code="0x120000")
    present = PLUGIN.probe(BackendConfig(runner=runner, sysfs_root=tmp_path / "sys", dev_root=tmp_path / "dev"))
    assert present.status == "present" and "1d22" in present.reason


def test_backend_uses_xpu_dash_smi_when_only_that_name_exists() -> None:
    inv = inventory({"xpu-smi": sample(R300)})
    assert len(inv.devices) == 2 and inv.sources[0].api == "xpu-smi"


def test_bad_bus_id_drops_one_xpu() -> None:
    t = parse_xpu_smi(sample(R300).replace("0000:56:00.0", "0000:56:00.x"))
    assert len(t.readings) == 1 and t.problems[0].lineno == 8


# -- samples2: more real xpu-smi outputs (issue 13) --------------------------------------------

P800_26 = "xpu_smi_5.0.21.26_p800-oam_8xpu_paddlefleet.txt"
P800_515 = "xpu_smi_515.58_p800-oam_8xpu_100mib-used.txt"


def test_p800_driver_5_0_21_26_eight_idle_xpus() -> None:
    t = parse_xpu_smi(sample(P800_26))
    assert (t.layout, t.driver_version, t.runtime_version) == ("5.x", "5.0.21.26", "5.0.21")
    assert len(t.readings) == 8
    assert [r.bus_id for r in t.readings] == [
        "0000:03:00.0", "0000:05:00.0", "0000:63:00.0", "0000:65:00.0",
        "0000:83:00.0", "0000:85:00.0", "0000:a3:00.0", "0000:a5:00.0",
    ]  # fmt: skip
    assert [r.temperature_celsius for r in t.readings] == [37, 41, 34, 39, 37, 42, 35, 42]
    assert [r.power_watts for r in t.readings] == [85, 86, 85, 88, 86, 86, 86, 88]
    r = t.readings[3]
    assert r.model == "P800 OAM"
    assert (r.memory_used_bytes, r.memory_total_bytes) == (0, 98304 * MIB)
    assert r.power_limit_watts == 400.0 and r.utilization_ratio == 0.0
    assert r.ecc_uncorrected_total == 0 and r.health_read is True
    assert t.processes == [] and t.problems == []


def test_p800_driver_515_58_runtime_na_100mib_used() -> None:
    t = parse_xpu_smi(sample(P800_515))
    assert (t.layout, t.driver_version, t.runtime_version) == ("5.x", "515.58", None)
    assert [r.bus_id for r in t.readings] == [
        "0000:52:00.0", "0000:55:00.0", "0000:63:00.0", "0000:66:00.0",
        "0000:9a:00.0", "0000:9b:00.0", "0000:aa:00.0", "0000:ab:00.0",
    ]  # fmt: skip
    assert all(r.memory_used_bytes == 100 * MIB for r in t.readings)
    assert all(r.memory_total_bytes == 98304 * MIB for r in t.readings)
    r = t.readings[0]
    assert (r.power_watts, r.power_limit_watts, r.temperature_celsius) == (98.0, 400.0, 43.0)
    assert r.utilization_ratio == 0.0 and r.ecc_uncorrected_total == 0
    assert t.processes == [] and t.problems == []


def test_p800_ecc_counter_earns_health() -> None:
    inv = inventory({"xpu_smi": sample(P800_26)})
    assert len(inv.devices) == 8
    assert all(d.health.checked_at is not None for d in inv.devices)
