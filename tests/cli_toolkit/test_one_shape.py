"""The toolkit pieces the one plugin shape needs (issue 15): what cambricon, hygon and ascend ask
of ToolBackend, Collection, UnitReading and build_unit, each checked on its own with a small
fake tool (a recorded replay), not through a vendor."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from accel.errors import BackendUnavailableError, OutOfBoundsError, ParseError
from accel.model import DeviceKind, DomainKind, LinkType, MemoryKind, ProblemKind
from accel.plugin import BackendConfig, Capability
from accel.toolkit import (
    BASE_CAPABILITIES,
    Collection,
    ParseContext,
    ProcessRow,
    ReplayScenario,
    Snapshot,
    SourceLine,
    ToolBackend,
    UnitReading,
    cli_plugin_info,
    matrix_links,
    processes_of,
    read_matrix,
    visible_binding,
)
from accel.toolkit._problems import problems_of
from accel.toolkit._unit import build_unit

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _unit(reading: UnitReading, **kw: object):  # type: ignore[no-untyped-def]
    return build_unit(
        reading,
        vendor="demo",
        kind=DeviceKind.GPU,
        tool="demo-smi",
        binding=visible_binding("DEMO_VISIBLE"),
        timestamp=NOW,
        **kw,  # type: ignore[arg-type]
    )


def test_plugin_info_vendor_may_differ_from_the_backend_id() -> None:
    info = cli_plugin_info("ascend", vendor="huawei", api="npu-smi", description="x", capabilities=(Capability.LINKS,))
    assert (info.name, info.vendor) == ("ascend", "huawei")
    assert info.capabilities == BASE_CAPABILITIES | {Capability.LINKS}
    assert cli_plugin_info("metax", api="mx-smi", description="x").vendor == "metax"


def test_fallback_id_only_without_uuid_or_bus_id_and_the_suffix() -> None:
    assert UnitReading(index=2, fallback_id="card-2").stable_id("demo") == "demo:card-2"
    assert UnitReading(bus_id="0000:3b:00.0", fallback_id="card-2").stable_id("demo") == "demo:pci-0000:3b:00.0"
    shared = UnitReading(bus_id="0000:3b:00.0", id_suffix="-chip1")
    assert shared.stable_id("demo") == "demo:pci-0000:3b:00.0-chip1"
    with pytest.raises(ParseError):
        UnitReading(index=2).stable_id("demo")


def test_device_nodes_by_index() -> None:
    bind = visible_binding("V", nodes=("/dev/acc{index}", "/dev/acc_ctl"))
    assert bind(UnitReading(index=3)).device_nodes == ("/dev/acc3", "/dev/acc_ctl")
    # Without an index only the shared node is known.
    assert bind(UnitReading()).device_nodes == ("/dev/acc_ctl",)
    # Nodes the tool printed for the unit win.
    assert bind(UnitReading(index=3, device_nodes=["/dev/x"])).device_nodes == ("/dev/x",)


def test_supported_identity_is_not_declared_unsupported() -> None:
    reading = UnitReading(index=0, bus_id="0000:3b:00.0")
    plain, _ = _unit(reading)
    assert {"uuid", "serial_number", "architecture"} <= plain.unsupported
    told, _ = _unit(reading, supported={"uuid"})
    assert "uuid" not in told.unsupported and {"serial_number", "architecture"} <= told.unsupported


def test_other_memory_regions_family_affinity_and_a_dropped_region() -> None:
    reading = UnitReading(
        index=0,
        bus_id="0000:3b:00.0",
        family="Demo",
        cpu_affinity="0-23",
        memory_kind=MemoryKind.HBM,
        memory_total_bytes=64 * 2**30,
        memory_used_bytes=2**30,
        other_memory=[(MemoryKind.DDR, 16 * 2**30, 2**20)],
    )
    dev, sample = _unit(reading)
    assert [(m.kind, m.total_bytes) for m in dev.memory] == [(MemoryKind.HBM, 64 * 2**30), (MemoryKind.DDR, 16 * 2**30)]
    assert (dev.family, dev.cpu_affinity) == ("Demo", "0-23")
    assert sample.memory_total_bytes == 64 * 2**30  # the first region
    masked = UnitReading(index=0, bus_id="0000:3b:00.0", dropped={"memory_used_bytes"})
    dev, sample = _unit(masked)
    # The memory column was printed but unreadable: a region of unknown size, used not "never".
    assert len(dev.memory) == 1 and dev.memory[0].total_bytes is None
    assert "memory_used_bytes" not in sample.unsupported
    assert _unit(UnitReading(index=0, bus_id="0000:3b:00.0"))[0].memory == ()


def test_link_counts_from_cell_codes() -> None:
    text = (
        "        MLU0    MLU1    MLU2\n"
        "MLU0    X       MLK2    SYS\n"
        "MLU1    MLK2    X       MLK\n"
        "MLU2    SYS     MLK     X\n"
    )
    ctx = ParseContext("demo", "demo topo")
    matrix = read_matrix(text, ctx, header=r"^\s*MLU0", valid_code=re.compile(r"X|MLK[0-9]*|SYS"))
    ids = {"MLU0": "d:a", "MLU1": "d:b", "MLU2": "d:c"}
    links, domains = matrix_links(
        matrix,
        ids,
        {"MLK": LinkType.MLULINK, "MLK2": LinkType.MLULINK},
        domain_kind=DomainKind.MLULINK_GROUP,
        domain_prefix="g",
        count_of=lambda code: int(code[3:] or 1),
    )
    assert [(lk.a, lk.b, lk.count) for lk in links] == [("d:a", "d:b", 2), ("d:b", "d:c", 1)]
    assert [d.members for d in domains] == [("d:a", "d:b", "d:c")]


def test_processes_of_leaves_out_impossible_values_as_problems() -> None:
    dev, _ = _unit(UnitReading(index=0, bus_id="0000:3b:00.0"))
    line = SourceLine("0  123  python  1 MiB", 7)
    rows = [ProcessRow(0, 123, "python", 10**30, line), ProcessRow(5, 9, "gone", 1, line)]
    problems: list = []  # type: ignore[type-arg]
    (proc,) = processes_of(rows, [dev], problems=problems, tool="demo-smi")
    assert proc.pid == 123 and proc.memory_bytes is None
    assert [type(p) for p in problems] == [OutOfBoundsError]


def test_problem_kinds_may_be_stated() -> None:
    located = ParseError("no stable id", tool="demo", command="demo", line="x", lineno=3)
    (inferred,) = problems_of("demo", [located])
    (stated,) = problems_of("demo", [located], kinds={id(located): ProblemKind.DEVICE})
    assert (inferred.kind, stated.kind) == (ProblemKind.RECORD, ProblemKind.DEVICE)
    assert stated.line == 3


# -- a ToolBackend over a fake tool ------------------------------------------------------------


class _Demo(ToolBackend):
    backend_name = "demo"
    vendor = "acme"
    tool = "demo-smi"
    alternatives = (("demo-smi", ("/opt/demo",)), ("old-smi", ()))
    kind = DeviceKind.GPU
    visible_env = "DEMO_VISIBLE"
    device_nodes = ("/dev/demo{index}",)

    def collect(self, col: Collection) -> Snapshot:
        count = col.required(lambda text, cmd: int(text), "count")
        col.secondary(lambda text, cmd: _strict(text, cmd), "detail")
        col.secondary(lambda text, cmd: text, "missing")
        helper = col.session_for("demo-helper")
        helper.optional(notes=col.notes)
        readings = [UnitReading(index=i, bus_id=f"0000:{i + 1:02x}:00.0") for i in range(count)]
        devices, samples = self.build(col, readings, versions={})
        return col.snapshot(devices, samples)


def _strict(text: str, command: str) -> str:
    if text != "ok":
        raise ParseError(f"unreadable {text!r}", tool="demo-smi")
    return text


def _host(tmp_path: Path, *, tool: str = "demo-smi", detail: str = "ok", detail_rc: int = 0) -> BackendConfig:
    sc = ReplayScenario(tmp_path / "host")
    sc.add([tool, "count"], stdout="2")
    sc.add([tool, "detail"], stdout=detail, returncode=detail_rc)
    sc.add(["demo-helper"], stdout="")
    return BackendConfig(runner=sc.runner())


def test_first_tool_found_and_the_vendor_of_the_devices(tmp_path: Path) -> None:
    config = _host(tmp_path, tool="old-smi")
    backend = _Demo(config, config.runner)  # type: ignore[arg-type]
    inv = backend.inventory()
    assert [d.id for d in inv.devices] == ["acme:pci-0000:01:00.0", "acme:pci-0000:02:00.0"]
    assert {d.vendor for d in inv.devices} == {"acme"}
    assert inv.devices[1].binding.device_nodes == ("/dev/demo1",)
    (source,) = inv.sources
    assert source.api == "old-smi" and source.backend == "demo"
    # count, detail, missing (never recorded) and the helper: every tool run is counted.
    assert source.tool_invocations == 4
    assert "old-smi missing: tool.replay-missing" in (source.detail or "")
    assert inv.complete


def test_no_tool_at_all_is_backend_unavailable(tmp_path: Path) -> None:
    sc = ReplayScenario(tmp_path / "none")
    sc.add(["other-tool"], stdout="")
    with pytest.raises(BackendUnavailableError, match="demo-smi"):
        _Demo(BackendConfig(runner=sc.runner()), sc.runner())


def test_a_failing_secondary_view_is_a_command_problem(tmp_path: Path) -> None:
    config = _host(tmp_path, detail_rc=3)
    inv = _Demo(config, config.runner).inventory()  # type: ignore[arg-type]
    (problem,) = inv.problems
    assert problem.kind is ProblemKind.COMMAND and problem.command == "demo-smi detail"
    assert len(inv.devices) == 2


def test_an_unreadable_secondary_view_is_a_problem_naming_its_command(tmp_path: Path) -> None:
    config = _host(tmp_path, detail="garbage")
    inv = _Demo(config, config.runner).inventory()  # type: ignore[arg-type]
    (problem,) = inv.problems
    assert problem.command == "demo-smi detail" and problem.code == "parse.error"
    assert len(inv.devices) == 2 and not inv.complete
