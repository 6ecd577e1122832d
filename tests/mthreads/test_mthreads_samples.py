"""Every Moore Threads sample, read the way a person reads it."""

from __future__ import annotations

from pathlib import Path

import pytest

from accel.errors import ParseError
from accel.model import HealthState, LinkState, LinkType
from accel.plugin import BackendConfig
from accel.plugins.mthreads import PLUGIN
from accel.plugins.mthreads._parse import parse_mtlink, parse_query_json, parse_query_text, parse_table
from accel.tools import ReplayRunner

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "mthreads"
MIB = 2**20


def sample(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def backend(mapping: dict[str, str]):  # type: ignore[no-untyped-def]
    return PLUGIN.open(BackendConfig(runner=ReplayRunner.from_mapping(mapping)))


# -- mthreads-gmi 2.4.1 table, S5000 x8 --------------------------------------------------------


def test_gmi_241_s5000_lists_eight_gpus_with_80g_and_on_die_ecc() -> None:
    table = parse_table(sample("mthreads-gmi_2.4.1_s5000_8gpu_ecc-ondie.txt"))
    assert (table.gmi_version, table.driver_version) == ("2.4.1", "5.1.0-server")
    assert [u.reading.index for u in table.units] == list(range(8))
    assert [u.reading.bus_id for u in table.units] == [
        "0000:18:00.0", "0000:3a:00.0", "0000:4b:00.0", "0000:5c:00.0",
        "0000:9a:00.0", "0000:ba:00.0", "0000:ca:00.0", "0000:da:00.0",
    ]  # fmt: skip
    first = table.units[0].reading
    assert first.model == "MTT S5000"
    assert first.memory_total_bytes == 81920 * MIB and first.memory_used_bytes == 0
    assert (first.link_width_current, first.link_width_max) == (16, 16)
    assert first.temperature_celsius == 48.0
    assert first.utilization_ratio == 0.0
    assert first.ecc_enabled is True
    assert first.extras["mthreads.com/eccMode"] == "On-die, EDC"
    assert first.extras["mthreads.com/perfState"] == "P0"
    assert table.units[0].device_type == "Physical"
    assert [u.reading.temperature_celsius for u in table.units] == [48, 48, 49, 48, 48, 50, 48, 49]
    assert table.processes == [] and table.problems == []


def test_s5000_inventory_ids_binding_and_health() -> None:
    be = backend({"mthreads-gmi": sample("mthreads-gmi_2.4.1_s5000_8gpu_ecc-ondie.txt")})
    inv = be.inventory()
    assert len(inv.devices) == 8
    dev = inv.devices[5]
    assert dev.id == "mthreads:pci-0000:ba:00.0"  # no UUID in the table: the PCI address
    assert dev.vendor == "mthreads" and dev.kind == "gpu" and dev.model == "MTT S5000"
    assert dev.memory[0].total_bytes == 85899345920
    assert dev.capabilities.ecc is True
    assert dev.versions.driver == "5.1.0-server"
    assert (dev.binding.visible_env, dev.binding.visible_id) == ("MUSA_VISIBLE_DEVICES", "5")
    assert (dev.binding.torch_device_type, dev.binding.collective_backend) == ("musa", "mccl")
    # Health is earned and mthreads-gmi prints an ECC mode, not a health reading: unknown, never healthy.
    assert all(d.health.state is HealthState.UNKNOWN and d.health.checked_at is None for d in inv.devices)
    assert inv.links == () and inv.processes == ()


# -- mthreads-gmi 1.12.2, S4000 with IOMMU misconfigured -----------------------------------------


def test_gmi_1122_s4000_reads_used_above_total_as_printed() -> None:
    table = parse_table(sample("mthreads-gmi_1.12.2_s4000_iommu-wrong-mem.txt"))
    assert (table.gmi_version, table.driver_version) == ("1.12.2", "1.2.0")
    (unit,) = table.units
    r = unit.reading
    assert (r.model, r.bus_id) == ("MTT S4000", "0000:08:00.0")
    assert r.memory_used_bytes == 44302 * MIB and r.memory_total_bytes == 32768 * MIB
    assert r.utilization_ratio == 0.88 and r.temperature_celsius == 65.0
    assert r.ecc_enabled is None  # "N/A"
    assert r.extras["mthreads.com/mpcCapable"] is True
    assert "mthreads.com/perfState" not in r.extras  # 1.12.2 has no Perf column


def test_iommu_sample_becomes_a_condition_not_a_validation_crash() -> None:
    be = backend({"mthreads-gmi": sample("mthreads-gmi_1.12.2_s4000_iommu-wrong-mem.txt")})
    (dev,) = be.inventory().devices
    assert dev.memory[0].total_bytes == 32768 * MIB
    assert dev.memory[0].used_bytes == 32768 * MIB  # clamped: "full" is the safe reading
    (cond,) = dev.health.conditions
    assert cond.reason == "MemoryTotalBelowUsed" and cond.subsystem == "memory"
    assert "clamped" in (cond.message or "") and str(44302 * MIB) in (cond.message or "")
    assert dev.health.state is HealthState.DEGRADED
    (tel,) = be.telemetry()
    assert tel.memory_used_bytes == 32768 * MIB and tel.utilization_ratio == 0.88
    assert "power_watts" in tel.unsupported  # the table never prints power
    assert {"uuid", "serial_number"} <= dev.unsupported  # no -q -j on this host


# -- mthreads-gmi -q -j, gmi 3.3.5 ----------------------------------------------------------------


def test_query_json_units_in_strings_and_trailing_space_key() -> None:
    q = parse_query_json(sample("mthreads-gmi-q-json_3.3.5-server_s5000_abridged.txt"))
    assert q.driver_version == "3.3.5-server"
    a, b = q.readings
    assert a.uuid == "399282a8-ba01-1475-893c-2eeca9e302f5"
    assert a.serial_number == "MY10YL225BF06077"
    assert a.bus_id == "0000:2a:00.0" and (a.pci_vendor_id, a.pci_device_id) == ("1ed5", "0400")
    assert a.memory_total_bytes == 81920 * MIB and a.memory_used_bytes == 0
    assert a.power_watts == 96.66  # the key is "Power Draw " with a trailing space
    assert a.power_limit_watts == 950.0
    assert a.temperature_celsius == 27.0
    assert a.firmware == {"mtbios": "4.3.41"}
    assert b.bus_id is None  # abridged upstream: no PCI block for GPU 1
    assert b.power_watts == 97.09 and b.temperature_celsius == 26.0


def test_query_json_inventory_uses_vendor_uuids() -> None:
    be = backend({"mthreads-gmi -q -j": sample("mthreads-gmi-q-json_3.3.5-server_s5000_abridged.txt")})
    inv = be.inventory()
    assert [d.id for d in inv.devices] == [
        "mthreads:399282a8-ba01-1475-893c-2eeca9e302f5",
        "mthreads:5ebdeb63-ba7a-5904-4f16-495b3e1de6c8",
    ]
    assert inv.devices[0].power.enforced_watts == 950.0
    assert inv.devices[0].serial_number == "MY10YL225BF06077"
    assert inv.devices[0].pci is not None and inv.devices[0].pci.vendor_id == "1ed5"
    assert [t.power_watts for t in be.telemetry()] == [96.66, 97.09]


def test_table_and_query_merge_by_bus_id() -> None:
    table = sample("mthreads-gmi_2.4.1_s5000_8gpu_ecc-ondie.txt").replace("00000000:18:00.0", "00000000:2a:00.0")
    query = sample("mthreads-gmi-q-json_3.3.5-server_s5000_abridged.txt")
    be = backend({"mthreads-gmi": table, "mthreads-gmi -q -j": query})
    devs = be.inventory().devices
    first = devs[0]
    assert first.id == "mthreads:399282a8-ba01-1475-893c-2eeca9e302f5"
    assert first.pci is not None and first.pci.link_width_max == 16  # from the table
    assert first.power.enforced_watts == 950.0  # from the JSON
    assert devs[1].id == "mthreads:5ebdeb63-ba7a-5904-4f16-495b3e1de6c8"  # matched by index 1
    assert len(devs) == 8


# -- formats without a sample ----------------------------------------------------------------------


def test_query_text_no_sample_reference_layout() -> None:
    text = """\
Driver Version                 : 3.3.5-server
Attached GPUs                  : 1
GPU 00000000:2A:00.0
    Index                      : 0
    Product Name               : MTT S5000
    GPU UUID                   : 399282a8-ba01-1475-893c-2eeca9e302f5
    Serial Number              : MY10YL225BF06077
    FB Memory Usage
        Total                  : 81920MiB
        Used                   : 1024MiB
    Power Readings
        Power Draw             : 96.66W
"""
    q = parse_query_text(text)
    (r,) = q.readings
    assert q.driver_version == "3.3.5-server"
    assert (r.uuid, r.bus_id, r.memory_used_bytes, r.power_watts) == (
        "399282a8-ba01-1475-893c-2eeca9e302f5", "0000:2a:00.0", 1024 * MIB, 96.66,
    )  # fmt: skip


def test_mtlink_no_sample_link_lines_and_the_published_error_text() -> None:
    links = parse_mtlink("GPU0 Link0 -> GPU1: Up\nGPU1 Link0 -> GPU0: Up\nGPU2 Link1 -> GPU3: Down\n")
    assert [(lk.a, lk.b, lk.state) for lk in links] == [(0, 1, LinkState.UP), (2, 3, LinkState.DOWN)]
    assert parse_mtlink("Error: the requested operation is not available on target device\n") == []


def test_mtlink_links_and_groups_in_inventory_no_sample() -> None:
    be = backend(
        {
            "mthreads-gmi": sample("mthreads-gmi_2.4.1_s5000_8gpu_ecc-ondie.txt"),
            "mthreads-gmi mtlink -s": "GPU0 -> GPU1: Up\nGPU1 -> GPU2: Up\nGPU4 -> GPU5: Down\n",
        }
    )
    inv = be.inventory()
    assert {(lk.a, lk.b) for lk in inv.links} == {
        ("mthreads:pci-0000:18:00.0", "mthreads:pci-0000:3a:00.0"),
        ("mthreads:pci-0000:3a:00.0", "mthreads:pci-0000:4b:00.0"),
        ("mthreads:pci-0000:9a:00.0", "mthreads:pci-0000:ba:00.0"),
    }
    assert all(lk.type is LinkType.MTLINK for lk in inv.links)
    (group,) = inv.domains  # the down link makes no group
    assert group.members == ("mthreads:pci-0000:18:00.0", "mthreads:pci-0000:3a:00.0", "mthreads:pci-0000:4b:00.0")
    assert inv.distance_matrix().level(inv.devices[0].id, inv.devices[1].id) == "LINK"


def test_mpc_parent_and_partition_rows_no_sample() -> None:
    text = sample("mthreads-gmi_2.4.1_s5000_8gpu_ecc-ondie.txt")
    row = "|16x(16x)            |48C   YES\n"
    text = text.replace("     Physical      P0     " + row, "     MPC Parent    P0     " + row, 1)
    be = backend({"mthreads-gmi": text})
    inv = be.inventory()
    assert inv.devices[0].partition_mode.scheme == "other"
    assert inv.devices[0].partition_mode.compute_mode == "mpc"
    assert inv.devices[1].partition_mode.scheme == "none"


# -- errors ----------------------------------------------------------------------------------------


def test_bad_row_stays_listed_as_unknown_and_is_a_typed_problem() -> None:
    # The row's bus id is garbage, so only its index (2) still identifies the GPU: it stays
    # listed under that index, health unknown, and the inventory says it is partial.
    text = sample("mthreads-gmi_2.4.1_s5000_8gpu_ecc-ondie.txt").replace("00000000:4b:00.0", "00000000:zz:00.0")
    table = parse_table(text)
    assert len(table.units) == 7
    (err,) = table.problems
    assert err.tool == "mthreads-gmi" and err.command == "mthreads-gmi" and err.lineno == 17
    be = backend({"mthreads-gmi": text})
    inv = be.inventory()
    assert len(inv.devices) == 8 and not inv.complete
    unread = next(d for d in inv.devices if d.id == "mthreads:index-2")
    assert unread.index == 2 and unread.model == "unknown"
    assert unread.health.state == "unknown" and not unread.health.monitored
    assert [c.reason for c in unread.health.conditions] == ["DeviceNotRead"]
    (problem,) = inv.problems
    assert problem.kind == "record" and problem.line == 17 and problem.command == "mthreads-gmi"
    assert problem.device_id == "mthreads:index-2" and problem.backend == "mthreads"
    assert "left out" in (inv.sources[0].detail or "")
    # No telemetry is invented for it.
    assert "mthreads:index-2" not in {t.device_id for t in be.telemetry()}


def test_garbage_value_becomes_a_condition_on_that_gpu() -> None:
    text = sample("mthreads-gmi_2.4.1_s5000_8gpu_ecc-ondie.txt").replace("|49C   YES", "|hotC  YES", 1)
    inv = backend({"mthreads-gmi": text}).inventory()
    dev = inv.devices[2]
    assert [c.reason for c in dev.health.conditions] == ["UnreadableValue"]
    assert "line 18" in (dev.health.conditions[0].message or "")


def test_no_table_is_a_parse_error_naming_the_tool() -> None:
    with pytest.raises(ParseError) as info:
        parse_table("mthreads-gmi: command failed\n")
    assert info.value.tool == "mthreads-gmi"
    with pytest.raises(ParseError):
        parse_query_json('{"GPU": [')


def test_a_known_gpu_whose_row_fails_later_keeps_its_id_and_last_reading() -> None:
    clean = sample("mthreads-gmi_2.4.1_s5000_8gpu_ecc-ondie.txt")
    be = backend({"mthreads-gmi": clean})
    first = be.inventory()
    known = first.devices[2]
    assert known.id == "mthreads:pci-0000:4b:00.0" and first.complete
    # The same GPU's row is unreadable on the next read (only its index still identifies it).
    be.runner = ReplayRunner.from_mapping({"mthreads-gmi": clean.replace("00000000:4b:00.0", "00000000:zz:00.0")})
    inv = be.inventory()
    assert [d.id for d in inv.devices] == [d.id for d in first.devices]  # never listed twice
    again = inv.devices[2]
    assert again.model == known.model and again.health.state == "unknown"
    assert [c.reason for c in again.health.conditions] == ["DeviceNotRead"]
    (problem,) = inv.problems
    assert problem.device_id == known.id and problem.line == 17


# -- samples2: mthreads-gmi 2.3.2 table, quoted partially in vllm-omni#2337 (issue 13) ---------


def test_gmi_232_s5000_partial_quote_reads_three_gpus() -> None:
    table = parse_table(sample("mthreads-gmi_2.3.2_s5000_vllm-omni-2337_partial.txt"))
    assert (table.gmi_version, table.driver_version) == ("2.3.2", "3.3.5-server")
    units = [u.reading for u in table.units]
    assert [u.index for u in units] == [0, 1, 2]
    assert [u.bus_id for u in units] == ["0000:2a:00.0", "0000:3a:00.0", "0000:4c:00.0"]
    assert all(u.model == "MTT S5000" for u in units)
    assert all(u.memory_total_bytes == 81920 * MIB for u in units)
    assert [u.memory_used_bytes for u in units] == [66641 * MIB, 64889 * MIB, 10 * MIB]
    assert [u.temperature_celsius for u in units] == [52.0, 51.0, 52.0]
    assert all(u.utilization_ratio == 0.0 for u in units)
    assert units[0].ecc_enabled is True and units[0].extras["mthreads.com/eccMode"] == "On-die, EDC"
    assert units[2].ecc_enabled is None  # the quote ends before GPU 2's ECC Mode cell
    assert not any(u.health_read for u in units)  # an ECC *mode* is not a health reading
    assert table.problems == []
