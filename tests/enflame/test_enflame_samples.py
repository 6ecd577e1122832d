"""Every Enflame sample, read the way a person reads it."""

from __future__ import annotations

from pathlib import Path

import pytest

from accel.errors import ParseError
from accel.model import HealthState
from accel.plugin import BackendConfig
from accel.plugins.enflame import PLUGIN
from accel.plugins.enflame._parse import parse_query, parse_table
from accel.tools import ReplayRunner

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "enflame"
MIB = 2**20
SRIOV = "efsmi_1.6.3.12_s60g_2vf-sriov.txt"
TWO = "efsmi_v1.2.0.301_s60_2dev.txt"
QUERY = "efsmi-q_1.4.3.4_s60_elided.txt"


def sample(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def backend(mapping: dict[str, str]):  # type: ignore[no-untyped-def]
    return PLUGIN.open(BackendConfig(runner=ReplayRunner.from_mapping(mapping)))


def test_efsmi_12_two_s60_domainless_bus_ids_and_squeezed_cells() -> None:
    t = parse_table(sample(TWO))
    assert (t.efsmi_version, t.driver_version) == ("1.2.0.301", "1.2.0.301")
    a, b = t.readings
    assert (a.index, a.model, a.bus_id, a.serial_number) == (0, "Enflame S60", "0000:01:00.0", "A073640510015")
    assert (b.index, b.bus_id, b.serial_number) == (1, "0000:09:00.0", "C807J40510285")
    assert a.memory_total_bytes == 49120 * MIB and b.memory_total_bytes == 42976 * MIB
    assert (a.power_watts, a.power_limit_watts) == (105.0, 300.0)
    assert (b.power_watts, b.temperature_celsius) == (128.0, 46.0)
    assert a.temperature_celsius == 39.0  # "39 C"
    assert (a.ecc_enabled, b.ecc_enabled) == (False, True)
    assert a.extras["enflame.com/gcuVirt"] == "Disable"  # squeezed into "49120MiB Disable"
    assert (a.extras["enflame.com/dpm"], b.extras["enflame.com/dpm"]) == ("Sleep", "Active")
    assert a.firmware == {"fw": "33.6.2"} and b.firmware == {"fw": "33.6.5"}
    assert a.utilization_ratio == 0.0 and t.problems == []


def test_two_cards_are_two_devices() -> None:
    inv = backend({"efsmi": sample(TWO)}).inventory()
    assert [d.id for d in inv.devices] == ["enflame:pci-0000:01:00.0", "enflame:pci-0000:09:00.0"]
    assert inv.devices[0].kind == "gcu" and inv.devices[0].memory[0].total_bytes == 49120 * MIB
    assert inv.devices[1].memory[0].ecc_enabled is True
    # TopsRuntime's variable by efsmi index, as vllm-gcu declares it (docs/frameworks.md).
    b0, b1 = (d.binding for d in inv.devices)
    assert (b0.visible_env, b0.visible_id, b1.visible_id) == ("TOPS_VISIBLE_DEVICES", "0", "1")
    assert (b0.torch_device_type, b0.collective_backend, b0.ray_resource) == ("gcu", "eccl", "GPU")
    assert inv.partitions == ()


def test_efsmi_16_sriov_vfs_share_one_serial_celsius_glyph() -> None:
    t = parse_table(sample(SRIOV))
    assert (t.efsmi_version, t.driver_version) == ("1.6.3.12", "1.6.3.12")
    a, b = t.readings
    assert (a.bus_id, b.bus_id) == ("0000:2e:00.0", "0000:2f:00.0")
    assert a.serial_number == b.serial_number == "A018K30520031"
    assert a.temperature_celsius == 34.0  # "34℃"
    assert a.power_watts is None and a.power_limit_watts is None  # "N/A" in VFs
    assert a.memory_total_bytes == 23552 * MIB
    assert a.extras["enflame.com/lpm"] == "LP0" and a.is_virtual_function is True
    assert a.model == "Enflame S60G"


def test_sriov_vfs_are_devices_grouped_by_their_card() -> None:
    inv = backend({"efsmi": sample(SRIOV)}).inventory()
    assert [d.id for d in inv.devices] == ["enflame:pci-0000:2e:00.0", "enflame:pci-0000:2f:00.0"]
    assert all(d.board_id == "sn-A018K30520031" for d in inv.devices)
    assert all(d.partition_mode.scheme == "sriov" and d.pci and d.pci.is_virtual_function for d in inv.devices)
    (card,) = inv.domains
    assert card.id == "card-sn-A018K30520031" and card.members == tuple(d.id for d in inv.devices)
    assert [d.memory_total_bytes for d in inv.devices] == [23552 * MIB, 23552 * MIB]


def test_sriov_card_view_vfs_are_partitions_of_their_card() -> None:
    runner = ReplayRunner.from_mapping({"efsmi": sample(SRIOV)})
    be = PLUGIN.open(BackendConfig(runner=runner, options={"sriov": "card"}))
    inv = be.inventory()
    (card,) = inv.devices
    assert card.id == "enflame:sn-A018K30520031" and card.serial_number == "A018K30520031"
    assert card.partition_mode.scheme == "sriov" and card.capabilities.sriov is True
    assert card.extras["enflame.com/virtualFunctions"] == 2
    assert [p.id for p in inv.partitions] == ["enflame:pci-0000:2e:00.0", "enflame:pci-0000:2f:00.0"]
    assert all(p.parent_id == card.id and p.family == "sriov_vf" for p in inv.partitions)
    assert [p.memory_bytes for p in inv.partitions] == [23552 * MIB, 23552 * MIB]
    (profile,) = inv.partition_profiles
    assert (profile.name, profile.max_instances) == ("sriov-vf", 2)
    assert set(be.health()) == {card.id, *(p.id for p in inv.partitions)}


def test_query_elided_sample_device_zero_and_a_note_for_device_one() -> None:
    q = parse_query(sample(QUERY))
    assert q.driver_version == "1.4.3.4"
    (r,) = q.readings
    assert (r.uuid, r.serial_number, r.model) == ("TR6Y46010302", "A0A1650510676", "Enflame S60")
    assert (r.pci_vendor_id, r.pci_device_id, r.bus_id) == ("1e36", "c035", "0000:17:00.0")
    assert (r.link_gen_current, r.link_width_current, r.link_gen_max, r.link_width_max) == (3, 8, 5, 16)
    assert (r.memory_total_bytes, r.memory_reserved_bytes, r.memory_used_bytes) == (42976 * MIB, 1129 * MIB, 0)
    assert (r.power_watts, r.power_limit_watts, r.temperature_celsius) == (96.0, 300.0, 35.0)
    assert (r.ecc_enabled, r.ecc_pending, r.ecc_uncorrected_total) == (True, False, 0)
    assert r.extras["enflame.com/partNumber"] == "EFB-0088000-00"
    assert [c.reason for c in r.conditions] == ["PcieLinkDegraded"]  # x8 of x16
    (elided,) = q.problems
    assert "DEV ID 1" in str(elided) and elided.lineno == 62


def test_query_inventory_uuid_id_usable_memory_and_note() -> None:
    inv = backend({"efsmi -q": sample(QUERY)}).inventory()
    (dev,) = inv.devices
    assert dev.id == "enflame:TR6Y46010302"
    assert dev.memory[0].usable_bytes == (42976 - 1129) * MIB
    assert dev.pci is not None and dev.pci.link_width_current == 8
    assert dev.health.state is HealthState.HEALTHY  # a warning only
    assert "DEV ID 1" in (inv.sources[0].detail or "")


def test_rma_flag_dbe_and_health_false_are_conditions() -> None:
    text = sample(QUERY).replace("Flags                   : False", "Flags                   : True")
    text = text.replace("Total DBE               : 0", "Total DBE               : 2")
    text = text.replace("Health                  : True", "Health                  : False")
    (r,) = parse_query(text).readings
    reasons = {c.reason: c for c in r.conditions}
    assert {"DeviceUnhealthy", "RmaRequired", "UncorrectableMemoryError"} <= set(reasons)
    assert reasons["UncorrectableMemoryError"].count == 2
    assert reasons["RmaRequired"].action == "replace_hardware"
    inv = backend({"efsmi -q": text}).inventory()
    assert inv.devices[0].health.state is HealthState.UNHEALTHY


def test_table_and_query_merge_by_bus_id() -> None:
    table = sample(TWO).replace("00:01:00.0", "00:17:00.0")
    inv = backend({"efsmi": table, "efsmi -q": sample(QUERY)}).inventory()
    assert [d.id for d in inv.devices] == ["enflame:TR6Y46010302", "enflame:pci-0000:09:00.0"]
    assert inv.devices[0].memory[0].reserved_bytes == 1129 * MIB


def test_bad_rows_and_missing_header() -> None:
    t = parse_table(sample(TWO).replace("00:09:00.0", "00:09:00.q"))
    assert len(t.readings) == 1 and t.problems[0].tool == "efsmi" and t.problems[0].lineno == 17
    with pytest.raises(ParseError):
        parse_table("efsmi: no device found\n")
    with pytest.raises(ParseError):
        parse_query("Driver Info\n    Ver : 1.0\n")
