"""Every MetaX sample, read the way a person reads it."""

from __future__ import annotations

from pathlib import Path

import pytest

from accel.errors import ParseError
from accel.model import HealthState, LinkType
from accel.plugin import BackendConfig
from accel.plugins.metax import PLUGIN
from accel.plugins.metax._parse import parse_mx_smi
from accel.tools import ReplayRunner

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "metax"
MIB = 2**20
V216 = "mx-smi_2.1.6_mxc550_8gpu.txt"
V224 = "mx-smi_2.2.4_c550_8gpu_gpu-state.txt"
TOPO = "mx-smi-topo-m_8gpu_metaxlink-2x4.txt"


def sample(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def inventory(mapping: dict[str, str]):  # type: ignore[no-untyped-def]
    return PLUGIN.open(BackendConfig(runner=ReplayRunner.from_mapping(mapping))).inventory()


def test_mx_smi_216_eight_mxc550_power_without_cap() -> None:
    t = parse_mx_smi(sample(V216))
    assert (t.mx_smi_version, t.driver_version, t.maca_version, t.bios_version) == (
        "2.1.6", "2.5.014", "2.23.0.1018", "1.13.4.0",
    )  # fmt: skip
    assert t.attached == 8 and len(t.readings) == 8
    r = t.readings[0]
    assert (r.index, r.model, r.bus_id) == (0, "MXC550", "0000:2a:00.0")
    assert (r.memory_used_bytes, r.memory_total_bytes) == (810 * MIB, 65536 * MIB)
    assert (r.power_watts, r.power_limit_watts, r.temperature_celsius) == (44.0, None, 31.0)
    assert "metax-tech.com/gpuState" not in r.extras  # no GPU-State column in 2.1.6
    assert [x.bus_id for x in t.readings][-1] == "0000:da:00.0"
    assert t.processes == [] and t.problems == []


def test_mx_smi_224_names_power_cap_and_state() -> None:
    t = parse_mx_smi(sample(V224))
    assert (t.mx_smi_version, t.driver_version, t.maca_version, t.bios_version) == (
        "2.2.4", "2.15.9", "2.32.0.6", "1.25.1.0",
    )  # fmt: skip
    r = t.readings[5]
    assert (r.index, r.model, r.bus_id) == (5, "MetaX C550", "0000:ae:00.0")
    assert (r.power_watts, r.power_limit_watts, r.temperature_celsius) == (55.0, 450.0, 32.0)
    assert (r.memory_used_bytes, r.memory_total_bytes) == (858 * MIB, 65536 * MIB)
    assert r.extras["metax-tech.com/gpuState"] == "Available"


def test_both_versions_give_the_same_model_name() -> None:
    old = inventory({"mx-smi": sample(V216)}).devices[0]
    new = inventory({"mx-smi": sample(V224)}).devices[0]
    assert old.model == new.model == "MetaX C550"
    assert old.extras["metax-tech.com/rawName"] == "MXC550"
    assert new.versions.driver == "2.15.9" and new.versions.runtime == "2.32.0.6"
    assert new.versions.firmware == {"bios": "1.25.1.0"}
    assert new.power.enforced_watts == 450.0 and old.power.enforced_watts is None
    assert new.binding.visible_env == "CUDA_VISIBLE_DEVICES" and new.binding.visible_id == "0"
    assert new.id == "metax:pci-0000:0f:00.0"


def test_topo_metaxlink_two_islands_of_four() -> None:
    inv = inventory({"mx-smi": sample(V224), "mx-smi topo -m": sample(TOPO)})
    ids = [d.id for d in inv.devices]
    assert [d.members for d in inv.domains] == [tuple(ids[:4]), tuple(ids[4:])]
    assert all(d.kind == "metaxlink_group" for d in inv.domains)
    mx = [lk for lk in inv.links if lk.type is LinkType.METAXLINK]
    sys_links = [lk for lk in inv.links if lk.type is LinkType.SYSTEM]
    assert len(mx) == 12 and len(sys_links) == 16
    dm = inv.distance_matrix()
    assert dm.level(ids[0], ids[3]) == "LINK" and dm.level(ids[0], ids[4]) == "SYS"


def test_gpu_state_other_than_available_is_unhealthy() -> None:
    text = sample(V224).replace("| Available            |", "| Unavailable          |", 1)
    inv = inventory({"mx-smi": text})
    assert inv.devices[0].health.state is HealthState.UNHEALTHY
    assert inv.devices[0].health.conditions[0].vendor_code == "metax.gpu-state:Unavailable"
    assert inv.devices[1].health.state is HealthState.HEALTHY


def test_list_uuids_no_sample_both_published_forms() -> None:
    listing = (
        "GPU#0    MetaX C550    0000:0f:00.0    Available (UUID: GPU-aaaa1111-2222-3333-4444-555566667777)\n"
        "GPU 1: MetaX C550 (UUID: GPU-bbbb1111-2222-3333-4444-555566667777)\n"
    )
    inv = inventory({"mx-smi": sample(V224), "mx-smi -L": listing})
    assert inv.devices[0].id == "metax:GPU-aaaa1111-2222-3333-4444-555566667777"
    assert inv.devices[1].uuid == "GPU-bbbb1111-2222-3333-4444-555566667777"
    assert inv.devices[2].id == "metax:pci-0000:48:00.0"


def test_sgpu_column_no_sample_makes_a_divisible_share() -> None:
    text = (
        sample(V224)
        .replace("| GPU-State            |", "| sGPU-M               |")
        .replace("| Available            |", "| Enabled              |", 1)
        .replace("| Available            |", "| Disabled             |")
    )
    inv = inventory({"mx-smi": text})
    assert inv.devices[0].sharing.mode == "vendor_share" and inv.devices[0].sharing.divisible_memory
    assert inv.devices[0].extras["metax-tech.com/sgpuMode"] == "Enabled"
    assert inv.devices[1].sharing.mode == "exclusive"


def test_bad_memory_cell_is_a_condition_bad_bus_id_drops_one() -> None:
    t = parse_mx_smi(sample(V224).replace("858/65536 MiB", "858/65536 XiB", 1))
    assert [c.reason for c in t.readings[0].conditions] == ["UnreadableValue"]
    t = parse_mx_smi(sample(V224).replace("0000:48:00.0", "0000:48:00.Z"))
    assert len(t.readings) == 7 and t.problems[0].lineno == 20


def test_empty_output_is_a_parse_error() -> None:
    with pytest.raises(ParseError):
        parse_mx_smi("")
