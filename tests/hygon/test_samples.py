"""Every file in vendor-samples/hygon, with the values a person reads in it."""

from __future__ import annotations

from pathlib import Path

import pytest

from accel.errors import ParseError
from accel.plugins.hygon._parse import parse_concise, parse_json, parse_rocminfo, parse_showtopo
from accel.toolkit import ParseContext

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "hygon"
MIB = 2**20


def ctx(tool: str = "hy-smi", command: str | None = None) -> ParseContext:
    return ParseContext(tool, command or tool)


def test_all_samples_are_fixtures() -> None:
    names = sorted(p.name for p in FIX.glob("*.txt"))
    assert names == [
        "hy-smi_k100-64g_8dcu_concise.txt",
        "rocm-smi-json_dtk24.04.3_k100ai_1dcu.txt",
        "rocm-smi-json_z100l_1dcu.txt",
        "rocm-smi_dtk23.10_4x-dcu_concise.txt",
        "rocminfo_dtk24.04.3_k100ai.txt",
    ]


def test_hy_smi_k100_8dcu_concise() -> None:
    rows, errors = parse_concise((FIX / "hy-smi_k100-64g_8dcu_concise.txt").read_text(), ctx())
    assert errors == []
    assert [r.index for r in rows] == list(range(8))
    assert [r.temperature_celsius for r in rows] == [53.0, 53.0, 54.0, 55.0, 54.0, 54.0, 55.0, 54.0]
    assert [r.power_watts for r in rows] == [96.0, 96.0, 95.0, 96.0, 97.0, 95.0, 93.0, 96.0]
    assert {r.power_cap_watts for r in rows} == {300.0}
    assert {r.performance_level for r in rows} == {"auto"}
    assert {r.mode for r in rows} == {"Normal"}
    assert {r.vram_used_ratio for r in rows} == {0.0} and {r.utilization_ratio for r in rows} == {0.0}
    assert {r.fan_ratio for r in rows} == {None}  # no Fan column in this layout


def test_rocm_smi_dtk23_10_4dcu_concise() -> None:
    rows, errors = parse_concise((FIX / "rocm-smi_dtk23.10_4x-dcu_concise.txt").read_text(), ctx("rocm-smi"))
    assert errors == []
    assert [r.index for r in rows] == [0, 1, 2, 3]
    assert [r.temperature_celsius for r in rows] == [30.0, 30.0, 29.0, 29.0]  # lower-case "c"
    assert [r.power_watts for r in rows] == [38.0, 41.0, 38.0, 39.0]
    assert {r.power_cap_watts for r in rows} == {280.0}
    assert {r.fan_ratio for r in rows} == {0.0}
    assert {r.mode for r in rows} == {None}  # no Mode column in DTK 23.10


def test_rocm_smi_json_dtk24_04_3_k100ai() -> None:
    readings, errors, unit = parse_json(
        (FIX / "rocm-smi-json_dtk24.04.3_k100ai_1dcu.txt").read_text(), ctx("rocm-smi", "rocm-smi --json")
    )
    assert errors == [] and unit == "MiB"
    (r,) = readings
    assert r.memory_total_bytes == 65520 * MIB == 68702699520  # MiB, where AMD prints bytes
    assert r.memory_used_bytes == 2 * MIB
    assert r.unique_id == "0x7100fa8866904061"
    assert r.pci_device_id == "6210"  # K100_AI
    assert r.name is None  # "DCU xxxx" was masked upstream
    assert r.serial_number is None  # "TPXxxxx" masked
    assert r.power_watts == 80.0
    assert r.temperatures_celsius == {"edge": 41.0, "junction": 39.0, "memory": 44.0}
    assert r.utilization_ratio == 0.0  # "DCU use (%)"


def test_rocm_smi_json_z100l() -> None:
    readings, errors, unit = parse_json((FIX / "rocm-smi-json_z100l_1dcu.txt").read_text(), ctx("rocm-smi"))
    assert errors == [] and unit == "MiB"
    (r,) = readings
    assert r.name == "Z100L" and r.pci_device_id == "55b7"
    assert r.memory_total_bytes == 32752 * MIB and r.memory_used_bytes == 2 * MIB
    assert r.serial_number == "TRCW200000000000"
    assert r.unique_id == "0xa000000000000000"
    assert r.power_watts == 38.0
    assert r.temperatures_celsius == {"edge": 38.0, "junction": 41.0, "memory": 39.0}


def test_rocminfo_k100ai() -> None:
    agents = parse_rocminfo((FIX / "rocminfo_dtk24.04.3_k100ai.txt").read_text(), ctx("rocminfo"))
    (a,) = agents  # the CPU agent is not a device
    assert a.device_type == "DCU" and a.name == "gfx928" and a.marketing_name == "K1xx_AI"
    assert a.uuid == "GPU-7100fa8866904061" and a.unique_id == "0x7100fa8866904061"
    assert a.compute_units == 12 and a.chip_id == "6210" and a.node == 8


# -- --showtopo: no recorded sample; the format the reference describes ----------------------------
SHOWTOPO_REFERENCE_FORMAT = """\
============================ System Management Interface =============================
=========================== Weight between two DCUs ==================================
       DCU0         DCU1         DCU2         DCU3
DCU0   0            15           15           40
DCU1   15           0            15           40
DCU2   15           15           0            40
DCU3   40           40           40           0
=========================== Hops between two DCUs ====================================
       DCU0         DCU1         DCU2         DCU3
DCU0   0            1            1            2
DCU1   1            0            1            2
DCU2   1            1            0            2
DCU3   2            2            2            0
========================= Link Type between two DCUs =================================
       DCU0         DCU1         DCU2         DCU3
DCU0   0            XGMI         XGMI         PCIE
DCU1   XGMI         0            XGMI         PCIE
DCU2   XGMI         XGMI         0            PCIE
DCU3   PCIE         PCIE         PCIE         0
================================== Numa Nodes ========================================
DCU[0]          : (Topology) Numa Node: 0
DCU[0]          : (Topology) Numa Affinity: 0
DCU[1]          : (Topology) Numa Node: 0
DCU[1]          : (Topology) Numa Affinity: 0
DCU[2]          : (Topology) Numa Node: 1
DCU[2]          : (Topology) Numa Affinity: 1
DCU[3]          : (Topology) Numa Node: 1
DCU[3]          : (Topology) Numa Affinity: 1
=================================== End of SMI Log ===================================
"""


def test_showtopo_reference_format_no_sample() -> None:
    topo = parse_showtopo(SHOWTOPO_REFERENCE_FORMAT, ctx("hy-smi", "hy-smi --showtopo"))
    assert topo.errors == []
    assert topo.xgmi_pairs() == [(0, 1), (0, 2), (1, 2)]
    assert topo.link_type[(0, 3)] == "PCIE"
    assert topo.hops[(0, 3)] == 2 and topo.weight[(0, 1)] == 15
    assert topo.numa_node == {0: 0, 1: 0, 2: 1, 3: 1}


def test_showtopo_hcu_numa_lines_reference_format_no_sample() -> None:
    text = "HCU[0] : (Topology) Numa Node 0\nHCU[1] : (Topology) Numa Node 1\n"
    assert parse_showtopo(text, ctx()).numa_node == {0: 0, 1: 1}


@pytest.mark.parametrize(
    ("parser", "text"),
    [
        (parse_concise, "hygon module is loaded\n"),
        (parse_concise, "DCU  Temp   AvgPwr\n=====\n"),
        (parse_json, "not json"),
        (parse_rocminfo, "ROCk module is NOT loaded, possibly no GPU devices\n"),
        (parse_showtopo, "nothing here\n"),
    ],
)
def test_unparseable_output_names_tool_command_and_line(parser, text) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ParseError) as err:
        parser(text, ParseContext("hy-smi", "hy-smi --showtopo"))
    assert err.value.tool == "hy-smi" and err.value.command == "hy-smi --showtopo"


def test_log_lines_before_the_table_and_a_bad_row_do_not_hide_the_others() -> None:
    text = (FIX / "hy-smi_k100-64g_8dcu_concise.txt").read_text()
    lines = text.splitlines()
    lines.insert(0, "[HAMI-core Msg]: loading limiter")
    lines[4] = "X       bad      row"  # DCU 0's row
    rows, errors = parse_concise("\n".join(lines), ctx())
    assert [r.index for r in rows] == [1, 2, 3, 4, 5, 6, 7]
    assert len(errors) == 1 and errors[0].lineno == 5
