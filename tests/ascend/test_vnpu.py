"""Ascend vNPU actuation through npu-smi: parsers on real outputs, the fake's fidelity, create /
destroy with typed refusals, the inventory (option vnpu), and the CLI."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from accel.cli import main
from accel.errors import (
    NotSupportedError,
    ParseError,
    PartitionBusyError,
    PartitionCreateFailedError,
    PartitionModeOffError,
    PartitionNoPlacementError,
    PartitionNotFoundError,
    PartitionProcessesRunningError,
    PartitionProfileNotSupportedError,
    ToolTimeoutError,
)
from accel.model import PartitionFamily
from accel.plugin import BackendConfig, Capability, SupportsPartitionActuation, actuator
from accel.plugins.ascend import PLUGIN
from accel.plugins.ascend._vnpu import family_of
from accel.plugins.ascend._vnpu_fake import FakeChip, FakeVnpuNpuSmi, render_info_vnpu, render_template_info
from accel.plugins.ascend._vnpu_parse import SetOutcome, parse_info_vnpu, parse_set_result, parse_template_info
from accel.toolkit._scenario import shipped_scenario_runner

FIX = Path(__file__).parent / "vnpu_fixtures"
GIB = 2**30


def text(name: str) -> str:
    return (FIX / name).read_text()


# -- parsing every fixture -------------------------------------------------------------------
@pytest.mark.parametrize(
    "name,expected",
    [
        (
            "template-info_910b4_a2-blog.txt",
            [
                ("vir10_3c_16g", 10, 16, 3),
                ("vir10_4c_16g_m", 10, 16, 4),
                ("vir10_3c_16g_nm", 10, 16, 3),
                ("vir05_1c_8g", 5, 8, 1),
            ],
        ),
        ("template-info_910b4-1_26.0.rc1.txt", [("vir10_3c_32g", 10, 32, 3), ("vir05_1c_16g", 5, 16, 1)]),
        (
            "template-info_310p3_22.0.4.txt",
            [
                ("vir01", 1, 3, 1),
                ("vir02", 2, 6, 2),
                ("vir02_1c", 2, 6, 1),
                ("vir04", 4, 12, 4),
                ("vir04_3c", 4, 12, 3),
                ("vir04_3c_ndvpp", 4, 12, 3),
                ("vir04_4c_dvpp", 4, 12, 4),
            ],
        ),
    ],
)
def test_template_info_fixtures(name: str, expected: list[tuple[str, int, int, int]]) -> None:
    got = parse_template_info(text(name))
    assert [(t.name, t.aicore, t.memory_gib, int(t.aicpu)) for t in got] == expected
    if name.startswith("template-info_310p3"):
        dvpp = got[-1]  # vir04_4c_dvpp takes every media engine: VPC 12, VENC 3, JPEGD 16 / VDEC 12, JPEGE 8
        assert (dvpp.vpc, dvpp.venc, dvpp.jpegd, dvpp.pngd, dvpp.vdec, dvpp.jpege) == (12, 3, 16, 0, 12, 8)


@pytest.mark.parametrize(
    "name,aicore,memory,rows",
    [
        ("info-vnpu_910b4_empty_a2-blog.txt", (20, 20), (28, 32), []),
        (
            "info-vnpu_910b4_2vnpu_one-in-use_a2-blog.txt",
            (0, 20),
            (0, 32),
            [(100, 0, "ffffffffffff", True, "vir10_3c_16g"), (101, 1, "000000000000", False, "vir10_3c_16g")],
        ),
        ("info-vnpu_910b4-1_empty_26.0.rc1.txt", (20, 20), (60, 64), []),
        (
            "info-vnpu_910b4-1_2vnpu_26.0.rc1.txt",
            (0, 20),
            (0, 64),
            [(212, 0, "000000000000", False, "vir10_3c_32g"), (213, 1, "000000000000", False, "vir10_3c_32g")],
        ),
        ("info-vnpu_310p_300i-duo_1vnpu_transcribed.txt", (4, 8), (21, 42), [(212, 0, "000000000000", False, "vir04")]),
        (
            "info-vnpu_310p3_3vnpu_in-use_fragment.txt",
            None,
            None,
            [
                (100, 0, "ffffffffffff", True, "vir01"),
                (101, 1, "ffffffffffff", True, "vir02"),
                (102, 2, "ffffffffffff", True, "vir04"),
            ],
        ),
    ],
)
def test_info_vnpu_fixtures(
    name: str,
    aicore: tuple[int, int] | None,
    memory: tuple[int, int] | None,
    rows: list[tuple[int, int, str, bool, str]],
) -> None:
    info = parse_info_vnpu(text(name))
    assert info.resources.get("AICORE") == aicore and info.resources.get("Memory") == memory
    assert info.count == len(rows)
    assert [(r.vnpu_id, r.vgroup_id, r.container_id, r.in_use, r.template) for r in info.vnpus] == rows
    if aicore is not None:
        assert info.resources["PNGD"] == (None, None)  # NA/NA: the query does not support it


@pytest.mark.parametrize(
    "name,vnpu_id",
    [
        ("create-vnpu_ok_910b4_a2-blog.txt", None),
        ("create-vnpu_ok_910b4-1_26.0.rc1.txt", None),
        ("destroy-vnpu_ok_310p_300i-duo.txt", 213),
        ("destroy-vnpu_ok_mind-cluster-doc.txt", 103),
    ],
)
def test_set_result_fixtures(name: str, vnpu_id: int | None) -> None:
    said = parse_set_result(text(name))
    assert said.outcome is SetOutcome.OK and said.vnpu_id == vnpu_id


@pytest.mark.parametrize(
    "printed,outcome",
    [  # the refusal lines of npu-smi's npu_chip_set.c / npu_set_print.c (constructed from its printf)
        ("The vnpu is not in docker mode, does not support setting create-vnpu.\n", SetOutcome.MODE_OFF),
        ("NPU is working in SMP mode, does not support vnpu creation.\n", SetOutcome.SMP),
        ("Insufficient number of cores available, unallocated cores number:2.000000.\n", SetOutcome.NO_RESOURCE),
        ("Insufficient number of AICPU available, unallocated AICPU number:0.\n", SetOutcome.NO_RESOURCE),
        ("Error parameter of -f.\n", SetOutcome.BAD_TEMPLATE),
        ("Error parameter of -v.\n", SetOutcome.NO_SUCH_VNPU),
        ("create vnpu failed.\n", SetOutcome.FAILED),
        ("destroy vnpu 101 failed.\n", SetOutcome.FAILED),
        ("This device does not support setting create-vnpu.\n", SetOutcome.NOT_SUPPORTED),
        ("something else\n", SetOutcome.UNKNOWN),
    ],
)
def test_set_refusals_are_classified(printed: str, outcome: SetOutcome) -> None:
    assert parse_set_result(printed).outcome is outcome


def test_info_vnpu_refusal_and_partial_reads_raise() -> None:
    with pytest.raises(ParseError, match="not in docker mode"):
        parse_info_vnpu("The vnpu is not in docker mode, does not support querying info-vnpu.\n")
    lost_row = text("info-vnpu_910b4-1_2vnpu_26.0.rc1.txt").replace(
        "|  213      |  1             |  000000000000  |  0       |  vir10_3c_32g        |\n", ""
    )
    with pytest.raises(ParseError, match="Total number of vnpu: 2' but 1"):
        parse_info_vnpu(lost_row)
    with pytest.raises(ParseError, match="template info"):
        parse_template_info("garbage\n")
    with pytest.raises(ParseError, match="7 \\+ 3 numbers"):
        parse_template_info(text("template-info_910b4-1_26.0.rc1.txt").replace("10        32", "10        xx"))


def test_family_of_products() -> None:
    assert [
        family_of(m)
        for m in (
            "Ascend 310P3",
            "Ascend 910B3",
            "Ascend 910B4-1",
            "Ascend 910A",
            "Ascend910",
            "Ascend 310",
            "Ascend 950PR",
        )
    ] == ["310P", "910B", "910B", "910", None, None, None]


# -- the fake prints what the real tool prints ------------------------------------------------
def chip_910b(
    npu: int,
    phy: int,
    templates_file: str = "template-info_910b4-1_26.0.rc1.txt",
    memory_gib: int = 64,
    reserved: int = 4,
) -> FakeChip:
    """A 910B chip as the real info-vnpu shows it (20 AI cores, AICPU 6/6 idle and 7 in all,
    VPC 9, VENC 0, VDEC 2, JPEGD 24, JPEGE 4)."""
    return FakeChip(
        npu,
        0,
        phy,
        "910B",
        tuple(parse_template_info(text(templates_file))),
        20,
        memory_gib,
        memory_reserved_gib=reserved,
        aicpu=7,
        aicpu_idle_free=6,
        media={"vpc": 9, "venc": 0, "vdec": 2, "jpegd": 24, "jpege": 4},
    )


def test_fake_renders_the_real_outputs_byte_for_byte() -> None:
    for name in ("template-info_910b4-1_26.0.rc1.txt", "template-info_910b4_a2-blog.txt"):
        assert render_template_info(parse_template_info(text(name))) == text(name)
    b4 = chip_910b(0, 0, "template-info_910b4_a2-blog.txt", memory_gib=32)
    assert render_info_vnpu(b4) == text("info-vnpu_910b4_empty_a2-blog.txt")
    fake = FakeVnpuNpuSmi(shipped_scenario_runner("accel.plugins.ascend", "910b-8"), [chip_910b(7, 7)])
    for vid in (212, 213):
        out = fake.run(
            ["npu-smi", "set", "-t", "create-vnpu", "-i", "7", "-c", "0", "-f", "vir10_3c_32g", "-v", str(vid)]
        ).stdout
        assert out == text("create-vnpu_ok_910b4_a2-blog.txt")
    assert fake.run(["npu-smi", "info", "-t", "info-vnpu", "-i", "7", "-c", "0"]).stdout == text(
        "info-vnpu_910b4-1_2vnpu_26.0.rc1.txt"
    )
    fake2 = FakeVnpuNpuSmi(shipped_scenario_runner("accel.plugins.ascend", "910b-8"), [b4])
    for _ in range(2):
        fake2.run(["npu-smi", "set", "-t", "create-vnpu", "-i", "0", "-c", "0", "-f", "vir10_3c_16g"])
    fake2.attach(100)
    assert fake2.run(["npu-smi", "info", "-t", "info-vnpu", "-i", "0", "-c", "0"]).stdout == text(
        "info-vnpu_910b4_2vnpu_one-in-use_a2-blog.txt"
    )


# -- actuation over the 910b-8 replay plus the fake ------------------------------------------
@pytest.fixture
def fake() -> FakeVnpuNpuSmi:
    """The 910b-8 recordings (8x 910B3) with vNPU state: 910B3 has the 910B4-1's bin-1 templates
    (npu-smi's template_name_910b_bin1 / bin2_1: vir10_3c_32g, vir05_1c_16g)."""
    return FakeVnpuNpuSmi(
        shipped_scenario_runner("accel.plugins.ascend", "910b-8"), [chip_910b(n, n) for n in range(8)]
    )


@pytest.fixture
def backend(fake: FakeVnpuNpuSmi) -> Iterator[SupportsPartitionActuation]:
    be = PLUGIN.open(BackendConfig(runner=fake, options={"vnpu": True}))
    try:
        yield actuator(be, PLUGIN.info.capabilities)
    finally:
        be.close()


def dev_id(backend: SupportsPartitionActuation, npu: int) -> str:
    inv = backend.inventory()  # type: ignore[attr-defined]
    return next(d.id for d in inv.devices if d.extras["huawei.com/npuId"] == npu)


def test_declares_actuation() -> None:
    assert {Capability.PARTITIONS, Capability.PARTITION_ACTUATION} <= PLUGIN.info.capabilities


def test_created_vnpu_is_in_the_next_inventory_and_destroy_removes_it(
    backend: SupportsPartitionActuation, fake: FakeVnpuNpuSmi
) -> None:
    parent = dev_id(backend, 7)
    inv = backend.inventory()  # type: ignore[attr-defined]
    profiles = [p for p in inv.partition_profiles if p.parent_id == parent]
    assert [(p.name, p.memory_bytes, p.compute_units, p.compute_ratio, p.max_instances) for p in profiles] == [
        ("vir10_3c_32g", 32 * GIB, 10, 0.5, 2),
        ("vir05_1c_16g", 16 * GIB, 5, 0.25, 4),
    ]
    made = backend.create_partition(parent, "vir10_3c_32g")
    # phy id 7: the ids are 7*16+100 .. +115, the lowest free named with -v
    assert made.id == f"{parent}/vnpu212" and fake.calls[-2][-2:] == ("-v", "212")
    assert (made.memory_bytes, made.compute_units, made.compute_ratio) == (32 * GIB, 10, 0.5)
    assert made.binding.visible_env == "ASCEND_VISIBLE_DEVICES" and made.binding.visible_id == "212"
    assert made.binding.device_nodes[0] == "/dev/vdavinci212"
    assert made.family is PartitionFamily.HARDWARE_ISOLATED
    inv = backend.inventory()  # type: ignore[attr-defined]
    assert [p.model_dump() for p in inv.partitions] == [made.model_dump()]
    assert backend.partitions() == (made,)
    backend.destroy_partition(made.id)
    assert backend.inventory().partitions == ()  # type: ignore[attr-defined]
    assert backend.partitions() == ()


def test_refusals_are_typed(backend: SupportsPartitionActuation, fake: FakeVnpuNpuSmi) -> None:
    parent = dev_id(backend, 0)
    with pytest.raises(PartitionProfileNotSupportedError, match="offered: vir10_3c_32g, vir05_1c_16g"):
        backend.create_partition(parent, "vir16")
    a = backend.create_partition(parent, "vir10_3c_32g")
    b = backend.create_partition(parent, "vir05_1c_16g")
    assert b.id.endswith("/vnpu101")
    with pytest.raises(PartitionNoPlacementError, match=r"needs 10 AI cores; .* has 5 free"):
        backend.create_partition(parent, "vir10_3c_32g")
    with pytest.raises(PartitionNoPlacementError, match="not placed by slot"):
        backend.create_partition(parent, "vir05_1c_16g", placement_start=0)
    fake.attach(100)
    with pytest.raises(PartitionBusyError, match="used by container ffffffffffff") as busy:
        backend.destroy_partition(a.id)
    assert busy.value.code == "partition.busy" and busy.value.partition_id == a.id
    fake.detach(100)
    backend.destroy_partition(a.id)
    with pytest.raises(PartitionNotFoundError):
        backend.destroy_partition(a.id)
    with pytest.raises(PartitionNotFoundError):
        backend.destroy_partition("huawei:pci-nowhere/vnpu1")
    backend.destroy_partition(b.id)


def test_the_tools_own_refusals_are_typed(backend: SupportsPartitionActuation, fake: FakeVnpuNpuSmi) -> None:
    parent = dev_id(backend, 1)
    fake.mode = "vm"
    with pytest.raises(PartitionModeOffError, match="not in docker mode") as off:
        backend.create_partition(parent, "vir05_1c_16g")
    assert off.value.code == "partition.mode-off"
    fake.mode, fake.smp = "docker", True
    with pytest.raises(PartitionModeOffError, match="SMP mode"):
        backend.create_partition(parent, "vir05_1c_16g")
    fake.smp = False
    # The tool's own core check: our read of the free cores is bypassed by a stale view.
    fake.chips[(1, 0)].aicpu = 0
    with pytest.raises(PartitionNoPlacementError, match="Insufficient number of AICPU") as nop:
        backend.create_partition(parent, "vir05_1c_16g")
    assert nop.value.vendor_code == "huawei.npu-smi:no-resource:217"


def test_a_create_that_fails_half_way_is_undone(backend: SupportsPartitionActuation, fake: FakeVnpuNpuSmi) -> None:
    parent = dev_id(backend, 2)
    fake.fail_create = fake.leave_behind = True
    with pytest.raises(PartitionCreateFailedError, match="destroyed again") as failed:
        backend.create_partition(parent, "vir05_1c_16g")
    assert failed.value.left_behind == () and fake.chips[(2, 0)].vnpus == {}
    fake.fail_create = True
    with pytest.raises(PartitionCreateFailedError, match="nothing was left"):
        backend.create_partition(parent, "vir05_1c_16g")
    # the vNPU left cannot be destroyed (a container took it): it is named, and listed
    fake.fail_create = fake.leave_behind = True
    orig = fake._destroy
    fake._destroy = lambda opts: ("destroy vnpu 132 failed.\n", 196)  # type: ignore[method-assign]
    with pytest.raises(PartitionCreateFailedError, match="could not be destroyed") as stuck:
        backend.create_partition(parent, "vir05_1c_16g")
    fake._destroy = orig  # type: ignore[method-assign]
    assert stuck.value.left_behind == (f"{parent}/vnpu132",)
    assert [p.id for p in backend.partitions()] == [f"{parent}/vnpu132"]


def test_hung_tool_is_a_timeout(backend: SupportsPartitionActuation, fake: FakeVnpuNpuSmi) -> None:
    fake.hang = True
    with pytest.raises(ToolTimeoutError):
        backend.create_partition(dev_id(backend, 3), "vir05_1c_16g")


def test_ids_run_out_before_cores_on_a_full_chip(backend: SupportsPartitionActuation) -> None:
    parent = dev_id(backend, 4)
    made = [backend.create_partition(parent, "vir05_1c_16g") for _ in range(4)]
    assert [m.id.rsplit("vnpu", 1)[1] for m in made] == ["164", "165", "166", "167"]
    with pytest.raises(PartitionNoPlacementError):
        backend.create_partition(parent, "vir05_1c_16g")


def test_products_without_vnpus_and_busy_parents() -> None:
    with PLUGIN.open(BackendConfig(options={"scenario": "910c-16", "vnpu": True})) as be:
        d = be.inventory().devices[0]
        with pytest.raises(PartitionProfileNotSupportedError, match="offers no vNPU templates"):
            be.create_partition(d.id, "vir05_1c_16g")  # type: ignore[attr-defined]
        assert be.partitions() == () and be.partition_profiles() == ()  # type: ignore[attr-defined]
    with PLUGIN.open(BackendConfig(options={"scenario": "910a-8", "vnpu": True})) as be:
        d = be.inventory().devices[0]  # the 910A with processes 37656 ... in its table
        with pytest.raises(PartitionProcessesRunningError, match="37640"):
            be.create_partition(d.id, "vir02")  # type: ignore[attr-defined]


def test_without_the_option_no_vnpu_view_runs_and_actuation_is_refused(fake: FakeVnpuNpuSmi) -> None:
    with PLUGIN.open(BackendConfig(runner=fake)) as be:
        inv = be.inventory()
        with pytest.raises(NotSupportedError, match="vnpu=1"):
            be.create_partition(inv.devices[0].id, "vir05_1c_16g")  # type: ignore[attr-defined]
        assert be.partitions() == ()  # type: ignore[attr-defined]
    assert inv.partitions == () and inv.partition_profiles == () and fake.calls == []


def test_310p_duo_chips(tmp_path: Path) -> None:
    """2x 310P3 (NPU 4 and 5, Device 0 and 1; 21525 MiB visible): AI cores 8, AI CPUs 7 and a
    24 GiB pool (HAMi's 310P3: aiCore 8, aiCPU 7, memoryCapacity 24576), media engines of the real
    300I Duo info-vnpu (VPC 12, VENC 3, VDEC 12, JPEGD 16, JPEGE 8), templates of the real 310P3
    template-info; ids phy*16+100 .. +107, at most 7."""
    tmpl = tuple(parse_template_info(text("template-info_310p3_22.0.4.txt")))
    media = {"vpc": 12, "venc": 3, "vdec": 12, "jpegd": 16, "jpege": 8}
    chips = [FakeChip(npu, 0, phy, "310P", tmpl, 8, 24, aicpu=7, media=media) for npu, phy in ((4, 0), (5, 1))]
    fake = FakeVnpuNpuSmi(shipped_scenario_runner("accel.plugins.ascend", "310p3-2"), chips)
    with PLUGIN.open(BackendConfig(runner=fake, options={"vnpu": True})) as be:
        act = actuator(be, PLUGIN.info.capabilities)
        parent = dev_id(act, 5)
        first = act.create_partition(parent, "vir04")
        assert first.id == f"{parent}/vnpu116" and first.family is PartitionFamily.HARDWARE_ISOLATED
        # the 12 GiB template as its container sees it: 12 GiB * 21525 MiB / 24 GiB
        assert (first.memory_bytes, first.compute_ratio) == (12 * GIB * 21525 // (24 * 1024), 0.5)
        assert act.create_partition(parent, "vir01").family is PartitionFamily.SOFTWARE_SHARE
        act.create_partition(parent, "vir02_1c")
        # 4 + 1 + 2 cores used, 1 left; AICPU 4 + 1 + 1 used, 1 left: vir01 fits, vir02 does not
        with pytest.raises(PartitionNoPlacementError):
            act.create_partition(parent, "vir02")
        act.create_partition(parent, "vir01")
        # the DVPP engines run out: vir04_4c_dvpp on the other chip after a vir04 takes half
        other = dev_id(act, 4)
        act.create_partition(other, "vir04")
        with pytest.raises(PartitionNoPlacementError):
            act.create_partition(other, "vir04_4c_dvpp")
        profs = {p.name: p for p in be.inventory().partition_profiles if p.parent_id == parent}
        assert profs["vir01"].max_instances == 7 and profs["vir04"].max_instances == 2


# -- the CLI ---------------------------------------------------------------------------------
def test_cli_create_list_destroy_and_refusal(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, fake: FakeVnpuNpuSmi
) -> None:
    monkeypatch.setattr("accel.toolkit._plugin.runner_for", lambda config, package: fake)
    base = ("--backend", "ascend", "-o", "scenario=910b-8", "-o", "vnpu=1")
    code = main(["partition", "profiles", *base, "--json"])
    docs = json.loads(capsys.readouterr().out)
    assert code == 0 and len(docs) == 16 and {d["name"] for d in docs} == {"vir10_3c_32g", "vir05_1c_16g"}
    code = main(["partition", "create", "6", "vir10_3c_32g", *base, "--json"])
    made = json.loads(capsys.readouterr().out)
    assert code == 0 and made["id"].endswith("/vnpu196") and made["memory_bytes"] == 32 * GIB
    code = main(["partition", "list", *base])
    out = capsys.readouterr().out
    assert code == 0 and made["id"] in out and "vir10_3c_32g" in out
    code = main(["partition", "create", "6", "vir16", *base])
    err = capsys.readouterr().err
    assert code == 2 and "[partition.profile-not-supported]" in err
    fake.attach(196)
    code = main(["partition", "destroy", made["id"], *base])
    assert code == 1 and "[partition.busy]" in capsys.readouterr().err
    fake.detach(196)
    code = main(["partition", "clear", *base])
    capsys.readouterr()
    assert code == 0 and all(not c.vnpus for c in fake.chips.values())


def test_vnpu_views_cost_one_run_per_chip_and_one_per_model(fake: FakeVnpuNpuSmi) -> None:
    """8x 910B3: npu-smi info, -m, -t topo, then one template-info and eight info-vnpu."""
    for option, runs in ((False, 3), (True, 12)):
        with PLUGIN.open(BackendConfig(runner=fake, options={"vnpu": option})) as be:
            source = be.inventory().sources[0]
        assert source.tool_invocations == runs
    assert sum(1 for c in fake.calls if "template-info" in c) == 1


def test_a_failed_create_whose_aftermath_cannot_be_read_names_the_vnpu(
    backend: SupportsPartitionActuation, fake: FakeVnpuNpuSmi
) -> None:
    parent = dev_id(backend, 5)
    create = fake._create

    def fail_then_hang(opts: dict[str, str]) -> tuple[str, int]:
        fake.fail_create = fake.leave_behind = True
        out = create(opts)
        fake.hang = True  # the read after the failure hangs
        return out

    fake._create = fail_then_hang  # type: ignore[assignment]
    with pytest.raises(PartitionCreateFailedError, match="may be left") as failed:
        backend.create_partition(parent, "vir05_1c_16g")
    assert failed.value.left_behind == (f"{parent}/vnpu180",)
    assert [p.id for p in backend.partitions()] == [f"{parent}/vnpu180"]  # listed, so `clear` finds it
