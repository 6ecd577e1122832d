"""Ascend: logic ids and the binding, typed problems, earned health, the 25.x/26.x layouts.

See docs/ascend.md for the id rule these tests pin down.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accel.errors import AccelError
from accel.model import HealthState, ProblemKind
from accel.plugin import BackendConfig
from accel.plugins.ascend import PLUGIN
from accel.plugins.ascend._parse import parse_info
from accel.toolkit import ReplayScenario

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "ascend"
MiB = 2**20


def text(name: str) -> str:
    return (FIX / name).read_text(encoding="utf-8")


def inventory(tmp_path: Path, info: str, **more: str):  # type: ignore[no-untyped-def]
    """The inventory of a host whose ``npu-smi info`` prints ``info`` (and ``-m`` prints
    ``more["m"]`` when given; every other command unrecorded)."""
    sc = ReplayScenario(tmp_path / "sc")
    sc.add(["npu-smi", "info"], stdout=info)
    if "m" in more:
        sc.add(["npu-smi", "info", "-m"], stdout=more["m"])
    with PLUGIN.open(BackendConfig(runner=sc.runner())) as be:
        return be.inventory()


def _container_3_to_7() -> str:
    """The 8x 910B3 sample as a container that mounts only host NPUs 3..7 sees it (npu-smi
    prints host NPU ids there): header, then the records of NPU 3..7 (vllm-ascend#16256:
    host devices 3,4,5,6,7 are numbered 0..4 inside such a container)."""
    lines = text("npu-smi-info_24.1.rc1.b030_910b3_8npu.txt").splitlines()
    header, body = lines[:6], lines[6:]
    keep = body[9:24]  # the records of NPU 3..7 (3 lines each), up to the device table's end
    assert keep[0].startswith("| 3 ") and keep[12].startswith("| 7 ")
    return "\n".join(header + keep) + "\n"


# ---- A: which id is the index, which goes in the binding -----------------------------------


def test_npu_ids_from_3_bind_logic_ids_from_0(tmp_path: Path) -> None:
    inv = inventory(tmp_path, _container_3_to_7())
    assert [d.extras["huawei.com/npuId"] for d in inv.devices] == [3, 4, 5, 6, 7]
    assert [d.index for d in inv.devices] == [0, 1, 2, 3, 4]
    assert [d.binding.visible_id for d in inv.devices] == ["0", "1", "2", "3", "4"]
    assert inv.devices[0].pci is not None and inv.devices[0].pci.bus_id == "0000:82:00.0"
    assert {d.extras["huawei.com/chipLogicIdSource"] for d in inv.devices} == {"table-order"}
    assert {d.binding.visible_env for d in inv.devices} == {"ASCEND_RT_VISIBLE_DEVICES"}
    assert inv.complete  # -m unrecorded in a replay is a note, not a problem


def test_logic_ids_printed_by_m_win_over_table_order(tmp_path: Path) -> None:
    # 310P3 cards: NPU ids 1, 2, 4, 5 with two chips each; -m numbers the chips 0..7.
    m = text("npu-smi-info-m_310p3_4cards_2chips.txt")
    info = text("npu-smi-info_24.1.rc1.b030_910b3_8npu.txt")
    inv = inventory(tmp_path, info, m=m)
    # The 910B3 table does not match those NPU ids except 1, 2, 4, 5 (chip 0): those take the
    # printed logic id, the others their table place.
    by_npu = {d.extras["huawei.com/npuId"]: d for d in inv.devices}
    mapped = {n: d.extras["huawei.com/chipLogicIdSource"] for n, d in by_npu.items()}
    assert mapped[1] == mapped[2] == mapped[4] == mapped[5] == "npu-smi info -m"
    assert mapped[0] == mapped[3] == "table-order"


def test_a_failed_record_keeps_the_places_of_the_others(tmp_path: Path) -> None:
    # npu-smi 1.9.3, NPU ids 4..7; the second row of NPU 5 is garbled.
    info = text("npu-smi-info_1.9.3_910a_npu4-7.txt").replace("2123 / 15171", "2123 / 15x71")
    inv = inventory(tmp_path, info)
    assert len(inv.devices) == 4
    # The unread one is listed in its place, by logic id, as every CLI plugin lists an unread unit.
    assert [d.index for d in inv.devices] == [0, 1, 2, 3]
    unread = inv.devices[1]
    assert unread.id == "huawei:pci-0000:82:00.0" and unread.model == "unknown"
    assert unread.health.state is HealthState.UNKNOWN
    assert [c.reason for c in unread.health.conditions] == ["DeviceNotRead"]
    assert unread.binding.visible_id == "1" and unread.binding.visible_env == "ASCEND_RT_VISIBLE_DEVICES"
    assert [d.binding.visible_id for d in inv.devices if d is not unread] == ["0", "2", "3"]
    assert all(d.model != "unknown" for d in inv.devices if d is not unread)


# ---- C: typed problems -----------------------------------------------------------------------


def test_one_corrupted_row_of_four_is_one_problem_naming_the_line(tmp_path: Path) -> None:
    info = text("npu-smi-info_1.9.3_910a_npu4-7.txt").replace("2123 / 15171", "2123 / 15x71")
    inv = inventory(tmp_path, info)
    assert len(inv.devices) == 4 and not inv.complete
    states = [d.health.state for d in inv.devices]
    assert states.count(HealthState.UNKNOWN) == 1 and states.count(HealthState.HEALTHY) == 3
    (problem,) = inv.problems
    assert problem.kind is ProblemKind.RECORD and problem.backend == "ascend"
    assert problem.command == "npu-smi info" and problem.line == 11
    assert problem.device_id == "huawei:pci-0000:82:00.0" and problem.code == "parse.error"
    assert inv.sources[0].detail is None or "skipped" not in inv.sources[0].detail


def test_a_failed_secondary_command_is_a_command_problem(tmp_path: Path) -> None:
    sc = ReplayScenario(tmp_path / "sc")
    sc.add(["npu-smi", "info"], sample=FIX / "npu-smi-info_23.0.rc3_910b2c_2npu.txt")
    sc.add(["npu-smi", "info", "-m"], stdout="", stderr="dcmi module initialize failed", returncode=255)
    with PLUGIN.open(BackendConfig(runner=sc.runner())) as be:
        inv = be.inventory()
    assert len(inv.devices) == 2 and not inv.complete
    (problem,) = inv.problems
    assert problem.kind is ProblemKind.COMMAND and problem.command == "npu-smi info -m"
    assert problem.device_id is None


def test_unparseable_mapping_is_a_problem_not_a_failure(tmp_path: Path) -> None:
    inv = inventory(tmp_path, text("npu-smi-info_23.0.rc3_910b2c_2npu.txt"), m="garbage\n")
    assert len(inv.devices) == 2
    (problem,) = inv.problems
    assert problem.command == "npu-smi info -m" and problem.code == "parse.error"


def test_scenarios_are_complete() -> None:
    for name in ("910b-8", "910a-8", "910c-16", "310-4", "310p3-2", "950pr-3"):
        with PLUGIN.open(BackendConfig(options={"scenario": name})) as be:
            inv = be.inventory()
        assert inv.complete, (name, inv.problems)


# ---- D: the Health column is a health reading ------------------------------------------------


def test_health_column_sets_checked_at(tmp_path: Path) -> None:
    inv = inventory(tmp_path, text("npu-smi-info_24.1.rc1.b030_910b3_8npu.txt"))
    assert all(d.health.checked_at is not None and d.health.monitored for d in inv.devices)
    assert {d.health.checked_at for d in inv.devices} == {inv.collected_at}


# ---- B: npu-smi 24.x / 25.x / 26.x outputs ---------------------------------------------------


def test_950pr_25_7_three_npus_two_alarm(tmp_path: Path) -> None:
    name = "npu-smi-info_25.7.rc1_950pr_3npu_alarm_processes.txt"
    r = parse_info(text(name))
    assert (r.tool_version, r.driver_version) == ("25.7.rc1", "25.7.rc1") and r.errors == ()
    assert [(c.npu_id, c.chip_id, c.name, c.health) for c in r.chips] == [
        (0, 0, "Ascend950PR", "Alarm"),
        (1, 0, "Ascend950PR", "Alarm"),
        (2, 0, "Ascend950PR", "OK"),
    ]
    c0, c2 = r.chips[0], r.chips[2]
    assert c0.bus_id == "0000:71:00.0" and c0.power_watts == 205.7 and c0.temperature_celsius == 71.0
    assert c0.hbm_total_bytes == 114688 * MiB and c0.hbm_used_bytes == 90633 * MiB
    assert c0.aicore_ratio == 1.0 and c0.ddr_total_bytes == 0
    assert c2.hbm_total_bytes == 131072 * MiB and c2.hbm_used_bytes == 5413 * MiB and c2.aicore_ratio == 0.0
    assert [(p.npu_id, p.chip_id, p.pid, p.name, p.memory_bytes) for p in r.processes] == [
        (0, 0, 1530715, "python", 4724 * MiB),
        (0, 0, 1655234, "python", 4728 * MiB),
    ]
    inv = inventory(tmp_path, text(name))
    assert [d.model for d in inv.devices] == ["Ascend950PR"] * 3
    assert [d.health.state for d in inv.devices] == [HealthState.DEGRADED, HealthState.DEGRADED, HealthState.HEALTHY]
    # The 950 layout prints no Chip row and its -t views take no -c.
    assert "npu-smi info -t health -i 0:" in (inv.sources[0].detail or "")
    assert [c.reason for c in inv.devices[0].health.conditions] == ["NpuHealthAlarm"]
    assert all(d.health.checked_at is not None for d in inv.devices)
    assert [p.pid for p in inv.processes] == [1530715, 1655234]
    assert {p.device_id for p in inv.processes} == {"huawei:pci-0000:71:00.0"}
    assert inv.devices[0].memory_total_bytes == 114688 * MiB


def test_950pr_25_7_rc1_6_gpustack_6148_partial() -> None:
    # The output gpustack#6148 reports as "no gpu display": first record as quoted.
    r = parse_info(text("npu-smi-info_25.7.rc1.6_950pr_1npu_gpustack-6148_partial.txt"))
    (c,) = r.chips
    assert (r.tool_version, c.npu_id, c.name, c.health, c.bus_id) == (
        "25.7.rc1.6", 0, "Ascend950PR", "OK", "0000:01:00.0"
    )
    assert c.power_watts == 201.2 and c.temperature_celsius == 55.0
    assert c.hbm_total_bytes == 131072 * MiB and c.hbm_used_bytes == 5225 * MiB and c.aicore_ratio == 0.0


def test_950dt_25_6_bus_id_na_listed_unknown(tmp_path: Path) -> None:
    name = "npu-smi-info_25.6.rc1.b169_950dt_npu0-1-6-7_busid-na.txt"
    r = parse_info(text(name))
    assert [(c.npu_id, c.name, c.bus_id, c.health) for c in r.chips] == [
        (n, "Ascend950DT", None, "OK") for n in (0, 1, 6, 7)
    ]
    assert [c.hbm_used_bytes for c in r.chips] == [6632 * MiB, 6711 * MiB, 66466 * MiB, 66461 * MiB]
    assert {c.hbm_total_bytes for c in r.chips} == {86016 * MiB}
    assert [c.power_watts for c in r.chips] == [380.7, 380.3, 381.1, 379.5]
    assert [c.temperature_celsius for c in r.chips] == [44.0, 51.0, 50.0, 46.0]
    assert r.chips[1].aicore_ratio == 0.05
    assert [(p.npu_id, p.pid, p.memory_bytes) for p in r.processes] == [
        (6, 3621066, 40000 * MiB),
        (6, 3624823, 61140 * MiB),
        (6, 3624824, 20000 * MiB),
    ]
    # No bus id, no die id: no stable id.  Each chip is still listed, by its logic id, with
    # health unknown, and each is a typed problem.
    inv = inventory(tmp_path, text(name))
    assert [d.id for d in inv.devices] == [f"huawei:index-{i}" for i in range(4)]
    assert {d.health.state for d in inv.devices} == {HealthState.UNKNOWN}
    assert [p.kind for p in inv.problems] == [ProblemKind.DEVICE] * 4 and not inv.complete
    assert [p.device_id for p in inv.problems] == [d.id for d in inv.devices]


def test_a3_24_1_partial_last_record_is_a_problem(tmp_path: Path) -> None:
    name = "npu-smi-info_24.1.rc3.7_910c-a3_vllm-ascend-2035_partial.txt"
    r = parse_info(text(name))
    assert [(c.npu_id, c.chip_id, c.phy_id, c.bus_id) for c in r.chips] == [
        (0, 0, 0, "0000:9d:00.0"),
        (0, 1, 1, "0000:9f:00.0"),
    ]
    assert r.chips[0].power_watts == 178.8 and r.chips[1].power_watts is None  # second die: "-"
    assert [c.hbm_used_bytes for c in r.chips] == [3397 * MiB, 3186 * MiB]
    assert r.chips[0].hbm_total_bytes == 65536 * MiB and r.chips[0].temperature_celsius == 36.0
    (err,) = r.errors
    assert err.lineno == 13
    inv = inventory(tmp_path, text(name))
    assert len(inv.devices) == 3 and inv.devices[2].id == "huawei:index-2"
    assert inv.devices[2].health.state is HealthState.UNKNOWN
    (problem,) = inv.problems
    assert problem.kind is ProblemKind.RECORD and problem.line == 13 and problem.device_id == "huawei:index-2"


def test_a3_25_2_1_partial() -> None:
    r = parse_info(text("npu-smi-info_25.2.1_910c-a3_ucm-748_partial.txt"))
    assert r.tool_version == "25.2.1" and r.errors == ()
    assert [(c.npu_id, c.chip_id, c.phy_id, c.name, c.bus_id) for c in r.chips] == [
        (0, 0, 0, "Ascend910", "0000:9d:00.0"),
        (0, 1, 1, "Ascend910", "0000:9f:00.0"),
        (1, 0, 2, "Ascend910", "0000:99:00.0"),
    ]
    assert [c.power_watts for c in r.chips] == [166.5, None, 168.1]
    assert [c.hbm_used_bytes for c in r.chips] == [3131 * MiB, 2886 * MiB, 3125 * MiB]
    assert {c.hbm_total_bytes for c in r.chips} == {65536 * MiB}
    assert [c.temperature_celsius for c in r.chips] == [38.0, 37.0, 37.0]


def test_910b3_26_0_single_npu_1(tmp_path: Path) -> None:
    name = "npu-smi-info_26.0.rc1_910b3_npu1_verl-6756_partial.txt"
    r = parse_info(text(name))
    (c,) = r.chips
    assert (r.tool_version, c.npu_id, c.chip_id, c.name, c.health, c.bus_id) == (
        "26.0.rc1", 1, 0, "910B3", "OK", "0000:08:00.0"
    )
    assert c.power_watts == 83.5 and c.temperature_celsius == 38.0
    assert c.hbm_used_bytes == 18049 * MiB and c.hbm_total_bytes == 65536 * MiB  # "18049/ 65536"
    (dev,) = inventory(tmp_path, text(name)).devices
    assert dev.model == "Ascend 910B3" and dev.index == 0 and dev.binding.visible_id == "0"


# ---- a mutated real sample never loses a chip silently --------------------------------------

_INFO_SAMPLES = sorted(p.name for p in FIX.glob("npu-smi-info_*.txt") if "partial" not in p.name)


@given(
    name=st.sampled_from(_INFO_SAMPLES),
    where=st.floats(min_value=0, max_value=1, exclude_max=True),
    char=st.sampled_from(["x", "|", " ", "/", "-", "9", "+"]),
)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_mutated_sample_loses_no_chip_silently(tmp_path: Path, name: str, where: float, char: str) -> None:
    original = text(name)
    lines = original.splitlines(keepends=True)
    data = [i for i, ln in enumerate(lines) if ln.startswith("| ") and "Process" not in ln and "npu-smi" not in ln]
    i = data[int(where * len(data))]
    col = int(where * 997) % max(1, len(lines[i]) - 1)
    lines[i] = lines[i][:col] + char + lines[i][col + 1 :]
    mutated = "".join(lines)
    base = len(parse_info(original).chips)
    sc = ReplayScenario(tmp_path / f"m{abs(hash((name, where, char)))}")
    sc.add(["npu-smi", "info"], stdout=mutated)
    try:
        with PLUGIN.open(BackendConfig(runner=sc.runner())) as be:
            inv = be.inventory()
    except AccelError:
        return  # a typed failure of the whole read is loud, not silent
    if len(inv.devices) < base:
        assert inv.problems, f"{name}: {base} chips became {len(inv.devices)} with no problem reported"


def test_a_stray_line_never_binds_by_npu_id(tmp_path: Path) -> None:
    # A mangled left border on NPU 7's first row: the record is unframed.  Its bus id (second
    # row) still names the chip; the NPU id 7 is never taken for a logic id.
    info = text("npu-smi-info_1.9.3_910a_npu4-7.txt").replace("| 7     910A", "x 7     910A")
    inv = inventory(tmp_path, info)
    assert not inv.complete
    assert [d.binding.visible_id for d in inv.devices[:3]] == ["0", "1", "2"]
    assert all(d.index != 7 for d in inv.devices)
    assert "huawei:pci-0000:02:00.0" in {d.id for d in inv.devices}
