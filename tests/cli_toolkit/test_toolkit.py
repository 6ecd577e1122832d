"""accel.toolkit: values, tables, key/value blocks, errors, probe, scenarios."""

from __future__ import annotations

from pathlib import Path

import pytest

from accel.errors import ConfigError, ParseError
from accel.plugin import BackendConfig, ProbeStatus
from accel.testing import FakeSysfs
from accel.toolkit import (
    CliProbeSpec,
    ParseContext,
    ReplayScenario,
    ToolSession,
    find_aligned_table,
    find_box_tables,
    is_masked,
    parse_bus_id,
    parse_bytes,
    parse_celsius,
    parse_hertz,
    parse_kv,
    parse_ratio,
    parse_used_total,
    parse_watts,
    probe_cli,
    split_lines,
)


@pytest.mark.parametrize("text", ["N/A", "NA", "-", "--", "", "Not Supported", "xxx", "xxxxx", None])
def test_placeholders_and_masks_are_none(text: str | None) -> None:
    assert parse_bytes(text, bare_unit="MiB") is None
    assert parse_watts(text, bare_unit="W") is None
    assert parse_celsius(text, bare_unit="C") is None


def test_units_are_read_not_guessed() -> None:
    assert parse_bytes("23374 MiB") == 23374 * 2**20
    assert parse_bytes("8192", bare_unit="MB", binary_prefixes=True) == 8 * 2**30
    assert parse_bytes("1 GB", binary_prefixes=False) == 10**9
    with pytest.raises(ParseError, match="ambiguous"):
        parse_bytes("8192 MB")
    with pytest.raises(ParseError, match="no unit"):
        parse_bytes("8192")
    assert parse_watts("5000 mW") == 5.0
    assert parse_celsius("34℃") == 34.0 and parse_celsius("32C") == 32.0
    with pytest.raises(ParseError):
        parse_celsius("90F")
    assert parse_hertz("1000", bare_unit="MHZ") == 1e9
    assert parse_ratio("35%") == 0.35
    assert parse_used_total("0 MiB/ 23374 MiB") == (0, 23374 * 2**20)
    assert parse_used_total("46536/ 65536", bare_unit="MB", binary_prefixes=True) == (46536 * 2**20, 65536 * 2**20)
    assert parse_used_total("0MiB(81920MiB)") == (0, 81920 * 2**20)
    assert parse_used_total("0 MiB/ xxxxx MiB") == (0, None)
    assert is_masked("MLUXXX-XX") and is_masked("02Kxxx") and not is_masked("910B3")


def test_bus_ids() -> None:
    assert parse_bus_id("0000:DA:00.0") == "0000:da:00.0"
    assert parse_bus_id("00000000:18:00.0") == "0000:18:00.0"
    assert parse_bus_id("3b:00.0") == "0000:3b:00.0"
    assert parse_bus_id("N/A") is None
    with pytest.raises(ParseError):
        parse_bus_id("zz:00")


def test_errors_name_tool_command_and_line() -> None:
    ctx = ParseContext("npu-smi", "npu-smi info")
    line = split_lines("a\nPower 12 parsecs\n")[1]
    with pytest.raises(ParseError) as exc, ctx.at(line):
        parse_watts("12 parsecs")
    err = exc.value
    assert (err.tool, err.command, err.lineno) == ("npu-smi", "npu-smi info", 2)
    assert "parsecs" in str(err) and "npu-smi info" in str(err)


BOX = """log line from a shim
+------------------------------+
| tool 1.0        Version: 2.0 |
+---------------+--------------+
| ID   Name     | Mem          |
+===============+==============+
| 0    foo      | 3    / 8     |
+---------------+--------------+
| 1    bar      | N/A          |
+===============+==============+
"""


def test_box_table_by_landmarks_skips_preamble() -> None:
    (table,) = find_box_tables(BOX)
    assert table.title[0].text == "tool 1.0 Version: 2.0"
    assert table.column_names == ("ID", "Name", "Mem")
    assert [r.get("Name") for r in table.records] == ["foo", "bar"]
    assert table.records[0].get("Mem") == "3 / 8"


def test_aligned_matrix_with_row_labels_and_tab_header() -> None:
    rows = [
        "A0".ljust(11) + "X".ljust(7) + "L1".ljust(7) + "0-3",
        "A1".ljust(11) + "L1".ljust(7) + "X".ljust(7) + "4-7",
    ]
    text = "\t   A0     A1     CPU Affinity\n" + "\n".join(rows) + "\n\nLegend:\n"
    t = find_aligned_table(text, r"A0\s+A1", row_label=True)
    assert t is not None
    assert [dict(r) for _, r in t.rows][1] == {"": "A1", "A0": "L1", "A1": "X", "CPU Affinity": "4-7"}


def test_kv_sections_and_blocks() -> None:
    text = "GPU 0\n    FB Memory\n        Total : 80 MiB\n    Bus : 0000:01:00.0\n\nName : x\n"
    root = parse_kv(text)
    gpu = root.section("GPU 0")
    assert gpu is not None and gpu.get("bus") == "0000:01:00.0"
    fb = gpu.section("FB Memory")
    assert fb is not None and fb.get("Total") == "80 MiB"
    assert root.get("Name") == "x"


def test_probe_order_and_bmc_vga_ignored(tmp_path: Path) -> None:
    spec = CliProbeSpec("V", ("19e5",), "no-such-tool-xyz", pci_class_prefixes=("12",), device_globs=("davinci[0-9]*",))
    fs = FakeSysfs(tmp_path / "sys")
    fs.add_device("0000:03:00.0", vendor="19e5", device="1711", class_code="0x030000")  # iBMC VGA
    cfg = BackendConfig(sysfs_root=fs.root, dev_root=tmp_path / "dev")
    res = probe_cli(spec, cfg)
    assert res.status is ProbeStatus.ABSENT and "not an accelerator" in res.reason
    fs.add_device_node(tmp_path / "dev", "davinci0")
    assert probe_cli(spec, cfg).status is ProbeStatus.PRESENT
    fs.add_device("0000:c1:00.0", vendor="19e5", device="d802", class_code="0x120000")
    res = probe_cli(spec, cfg)
    assert res.status is ProbeStatus.PRESENT and res.device_count == 1


def test_scenario_writer_copies_verbatim_and_replays(tmp_path: Path) -> None:
    sample = tmp_path / "sample.txt"
    sample.write_bytes(b"hello \xe2\x84\x83\n")
    sc = ReplayScenario(tmp_path / "sc")
    sc.add(["tool", "x"], sample=sample)
    sc.add(["tool", "hang"], stdout="", delay_s=30)
    assert (tmp_path / "sc" / "sample.txt").read_bytes() == sample.read_bytes()
    session = ToolSession(sc.runner(), "tool", timeout_s=0.2)
    assert session.run("x").stdout == "hello ℃\n"
    assert session.optional("missing") is None and session.invocations == 2
    with pytest.raises(ConfigError):
        sc.add(["tool"], sample=sample, stdout="x")
