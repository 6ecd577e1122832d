"""accel.toolkit, the extra parts: the backend machinery and text helpers the five CLI plugins share."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from accel.errors import (
    BackendUnavailableError,
    DeviceError,
    ParseError,
    ToolError,
    ToolTimeoutError,
)
from accel.model import Binding, DeviceKind, DomainKind, Link, LinkState, LinkType
from accel.plugin import BackendConfig
from accel.plugins import enflame, iluvatar, kunlunxin, metax, mthreads
from accel.testing import FakeSysfs
from accel.toolkit import (
    Collection,
    ParseContext,
    Snapshot,
    ToolSession,
    UnitReading,
    link_domains,
    matrix_links,
    merge_readings,
    parse_listing,
    read_header_records,
    read_matrix,
    split_lines,
    visible_binding,
)
from accel.toolkit._records import split_cells
from accel.toolkit._snapshot import CliBackend
from accel.toolkit._unit import build_unit
from accel.tools import ReplayRunner

CTX = ParseContext("tool", "tool -L")
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _build(reading: UnitReading):  # type: ignore[no-untyped-def]
    return build_unit(
        reading, vendor="demo", kind=DeviceKind.GPU, tool="tool", binding=visible_binding("DEMO_VISIBLE"), timestamp=NOW
    )


# -- text helpers -----------------------------------------------------------------------------------


def test_split_cells_with_and_without_outer_border() -> None:
    assert split_cells("| a | b |") == ("  a ", " b ")
    assert split_cells("0    MTT S5000 |0000:18:00.0 |0%") == ("0    MTT S5000 ", "0000:18:00.0 ", "0%")


def test_read_header_records_multi_row_and_doubled_rules() -> None:
    text = """\
| ID  Name  | Bus     |
| Temp      | Mem     |
+-----------+---------+
| 0   A     | 01:00.0 |
| 30C       | 1MiB    |
+-----------+---------+
|-----------|---------|
| 1   B     | 02:00.0 |
| 31C       | 2MiB    |
+-----------+---------+

tail
"""
    lines = split_lines(text)
    records, end = read_header_records(lines, [lines[0].text, lines[1].text], start=2)
    assert [r.fields["Name"] for r in records] == ["A", "B"]
    assert [r.fields["Temp"] for r in records] == ["30C", "31C"]
    assert lines[end].blank  # stops at the first line that is not table


def test_read_header_records_one_row_records_without_rules_between() -> None:
    text = "| DevID | Addr |\n-------------\n|  0 | a |\n|  1 | b |\n-------------\n"
    lines = split_lines(text)
    records, _ = read_header_records(lines, [lines[0].text], start=1)
    assert [r.fields["Addr"] for r in records] == ["a", "b"]


@pytest.mark.parametrize(
    ("line", "index", "name", "uuid", "bus"),
    [
        ("GPU 0: MXC500 (UUID: GPU-abc12345)", 0, "MXC500", "GPU-abc12345", None),
        ("GPU#3    MXC600-AL    0000:06:00.0    Available (UUID: GPU-def67890)", 3, "MXC600-AL", "GPU-def67890",
         "0000:06:00.0"),
        ("XPU 1: P800 OAM  GPU-b3509946-0bc6-5744-bd7c-a0b87dadef02", 1, "P800 OAM",
         "GPU-b3509946-0bc6-5744-bd7c-a0b87dadef02", None),
        ("XPU 2: 00000000:21:00.0", 2, None, None, "0000:21:00.0"),
    ],
)  # fmt: skip
def test_parse_listing_published_forms(
    line: str, index: int, name: str | None, uuid: str | None, bus: str | None
) -> None:
    (got,) = parse_listing("banner line\n" + line + "\n", words=("GPU", "XPU"), ctx=CTX)
    assert (got.index, got.name, got.uuid, got.bus_id) == (index, name, uuid, bus)


def test_matrix_links_and_domains() -> None:
    text = "      GPU0  GPU1  GPU2\nGPU0  X     MX    SYS\nGPU1  MX    X     SYS\nGPU2  SYS   SYS   X\n"
    matrix = read_matrix(text, CTX, header=r"^\s+GPU0", valid_code=re.compile("X|MX|SYS"))
    ids = {"GPU0": "v:a", "GPU1": "v:b", "GPU2": "v:c"}
    links, domains = matrix_links(
        matrix, ids, {"MX": LinkType.METAXLINK, "SYS": LinkType.SYSTEM}, domain_kind=DomainKind.METAXLINK_GROUP
    )
    assert [(lk.a, lk.b, lk.type) for lk in links] == [
        ("v:a", "v:b", LinkType.METAXLINK), ("v:a", "v:c", LinkType.SYSTEM), ("v:b", "v:c", LinkType.SYSTEM),
    ]  # fmt: skip
    assert [d.members for d in domains] == [("v:a", "v:b")]


def test_link_domains_ignore_down_links() -> None:
    links = [
        Link(a="v:a", b="v:b", type=LinkType.MTLINK),
        Link(a="v:c", b="v:d", type=LinkType.MTLINK, state=LinkState.DOWN),
    ]
    assert [d.members for d in link_domains(links, DomainKind.MTLINK_GROUP)] == [("v:a", "v:b")]


def test_merge_readings_by_bus_id_then_index() -> None:
    a = UnitReading(index=0, bus_id="0000:01:00.0", model="A")
    b = UnitReading(index=1, model="B")
    merged = merge_readings(
        [a, b], [UnitReading(index=5, bus_id="0000:01:00.0", uuid="U0"), UnitReading(index=1, uuid="U1")]
    )
    assert [(r.index, r.uuid) for r in merged] == [(0, "U0"), (1, "U1")]
    assert len(merge_readings([a], [UnitReading(index=9, bus_id="0000:09:00.0")])) == 2


# -- building units ---------------------------------------------------------------------------------


def test_build_unit_ids_binding_and_never_printed_fields() -> None:
    dev, tel = _build(
        UnitReading(index=2, model="M", bus_id="0000:3b:00.0", memory_total_bytes=10, memory_used_bytes=4)
    )
    assert dev.id == "demo:pci-0000:3b:00.0"
    assert dev.binding == Binding(visible_env="DEMO_VISIBLE", visible_id="2")
    assert {"uuid", "serial_number", "architecture"} <= dev.unsupported
    assert tel.memory_free_bytes == 6 and "power_watts" in tel.unsupported and "energy_joules" in tel.unsupported
    dev, _ = _build(UnitReading(index=0, uuid="GPU-1", bus_id="0000:3b:00.0"))
    assert dev.id == "demo:GPU-1"


def test_build_unit_used_above_total_is_clamped_with_a_condition() -> None:
    dev, tel = _build(UnitReading(index=0, bus_id="0000:01:00.0", memory_total_bytes=100, memory_used_bytes=150))
    assert dev.memory[0].used_bytes == 100 and tel.memory_used_bytes == 100
    assert dev.health.conditions[0].reason == "MemoryTotalBelowUsed" and dev.health.state == "degraded"


def test_build_unit_without_uuid_or_bus_id_is_a_parse_error() -> None:
    with pytest.raises(ParseError, match="neither a UUID nor a PCI bus id"):
        _build(UnitReading(index=0))


def test_dropped_readings_are_not_listed_unsupported() -> None:
    r = UnitReading(index=0, bus_id="0000:01:00.0")
    r.dropped.add("power_watts")
    _, tel = _build(r)
    assert "power_watts" not in tel.unsupported and "temperature_celsius" in tel.unsupported


# -- the backend ------------------------------------------------------------------------------------


def test_cli_backend_errors_and_close() -> None:
    dev, tel = _build(UnitReading(index=0, bus_id="0000:01:00.0"))
    be = CliBackend("demo", lambda: Snapshot(devices=(dev,), telemetry=(tel,)))
    assert [t.device_id for t in be.telemetry([dev.id])] == [dev.id]
    with pytest.raises(DeviceError):
        be.health(["demo:nope"])
    be.close()
    be.close()
    with pytest.raises(BackendUnavailableError):
        be.inventory()


def test_cli_backend_wraps_a_plugin_bug() -> None:
    be = CliBackend("demo", lambda: {}["missing"])  # type: ignore[index, return-value]
    with pytest.raises(BackendUnavailableError, match="KeyError"):
        be.inventory()


def test_collection_remembers_failures_and_a_hang_still_raises() -> None:
    runner = ReplayRunner.from_mapping(
        {"tool": "ok\n", "tool -L": {"returncode": 2, "stderr": "bad"}, "tool slow": {"delay_s": 5}}
    )
    col = Collection("demo", "1", ToolSession(runner, "tool", timeout_s=0.05))
    assert col.main(lambda text, _cmd: text) == "ok\n"
    assert col.extra(lambda text, _cmd: text, "-L") is None and "tool -L" in col.notes[0]
    assert col.main(lambda _t, _c: (_ for _ in ()).throw(ParseError("boom"))) is None  # type: ignore[arg-type]
    with pytest.raises(ParseError, match="boom"):
        col.require([])
    with pytest.raises(ToolTimeoutError):
        col.extra(lambda text, _cmd: text, "slow")
    assert col.snapshot([], []).source is not None


# -- the five plugins' probes -----------------------------------------------------------------------

PLUGINS = [
    (mthreads.PLUGIN, "1ed5", "mtgpu.0", "mthreads-gmi"),
    (iluvatar.PLUGIN, "1e3e", "iluvatar0", "ixsmi"),
    (metax.PLUGIN, "9999", "mxcd", "mx-smi"),
    (kunlunxin.PLUGIN, "1d22", "xpu0", "xpu_smi"),
    (enflame.PLUGIN, "1e36", None, "efsmi"),
]


@pytest.mark.parametrize(("plugin", "vendor_id", "node", "tool"), PLUGINS, ids=[p[3] for p in PLUGINS])
def test_probe_order_pci_then_nodes_then_tool(
    plugin, vendor_id: str, node: str | None, tool: str, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    sysfs, dev = tmp_path / "sys", tmp_path / "dev"
    nothing = ReplayRunner.from_mapping({"other-tool": ""})
    fake = FakeSysfs(sysfs)
    config = BackendConfig(runner=nothing, sysfs_root=sysfs, dev_root=dev)
    assert plugin.probe(config).status == "absent"
    if node is not None:
        fake.add_device_node(dev, node)
        assert plugin.probe(config).status == "present"
    with_tool = BackendConfig(runner=ReplayRunner.from_mapping({tool: ""}), sysfs_root=sysfs, dev_root=tmp_path / "x")
    assert plugin.probe(with_tool).status == "present"
    fake.add_device("0000:3b:00.0", vendor=vendor_id, device="0001", class_code="0x030000")
    result = plugin.probe(BackendConfig(runner=nothing, sysfs_root=sysfs, dev_root=tmp_path / "x"))
    assert result.status == "present" and vendor_id in result.reason and result.device_count == 1


@pytest.mark.parametrize(("plugin", "vendor_id", "node", "tool"), PLUGINS, ids=[p[3] for p in PLUGINS])
def test_open_over_an_absent_tool_raises_a_tool_error(plugin, vendor_id: str, node: str | None, tool: str) -> None:  # type: ignore[no-untyped-def]
    be = plugin.open(BackendConfig(runner=ReplayRunner.from_mapping({"other-tool": ""})))
    with pytest.raises(ToolError):  # a replay without the tool: ReplayMissingError, a ToolError
        be.inventory()


@pytest.mark.parametrize(("plugin", "vendor_id", "node", "tool"), PLUGINS, ids=[p[3] for p in PLUGINS])
def test_every_shipped_scenario_opens(plugin, vendor_id: str, node: str | None, tool: str) -> None:  # type: ignore[no-untyped-def]
    from accel.toolkit import scenario_names

    names = scenario_names(plugin.package)
    assert names
    for name in names:
        config = BackendConfig(options={"scenario": name})
        assert plugin.probe(config).status == "present"
        inv = plugin.open(config).inventory()
        assert inv.devices and all(d.vendor == plugin.info.name for d in inv.devices)
