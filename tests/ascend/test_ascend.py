"""Ascend: every npu-smi sample is a fixture with the values a person reads in it; replays."""

from __future__ import annotations

import contextlib
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accel.errors import AccelError, ParseError, ToolTimeoutError
from accel.model import DomainKind, HealthState, LinkType, MemoryKind
from accel.plugin import BackendConfig, ProbeStatus
from accel.plugins.ascend import PLUGIN
from accel.plugins.ascend._parse import (
    parse_board,
    parse_common,
    parse_health,
    parse_info,
    parse_mapping,
    parse_topo,
    parse_usages,
)
from accel.testing import FakeSysfs
from accel.toolkit import ReplayScenario

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "ascend"
MiB = 2**20


def text(name: str) -> str:
    return (FIX / name).read_text(encoding="utf-8")


# ---- npu-smi info, every layout ------------------------------------------------------------


def test_910b3_8npu() -> None:
    r = parse_info(text("npu-smi-info_24.1.rc1.b030_910b3_8npu.txt"))
    assert (r.tool_version, r.driver_version) == ("24.1.rc1.b030", "24.1.rc1.b030")
    assert [c.npu_id for c in r.chips] == list(range(8))
    assert {c.name for c in r.chips} == {"910B3"} and {c.health for c in r.chips} == {"OK"}
    assert r.chips[0].bus_id == "0000:c1:00.0" and r.chips[7].bus_id == "0000:42:00.0"
    assert r.chips[0].hbm_total_bytes == 65536 * MiB and r.chips[0].hbm_used_bytes == 3318 * MiB
    assert r.chips[0].ddr_total_bytes == 0 and r.chips[0].power_watts == 101.8
    assert r.chips[0].temperature_celsius == 43.0 and r.chips[0].hugepages_total == 0


def test_910b2c_2npu_no_processes() -> None:
    r = parse_info(text("npu-smi-info_23.0.rc3_910b2c_2npu.txt"))
    assert [(c.name, c.bus_id, c.hbm_used_bytes) for c in r.chips] == [
        ("910B2C", "0000:5a:00.0", 4302 * MiB),
        ("910B2C", "0000:29:00.0", 4302 * MiB),
    ]
    assert r.processes == () and r.errors == ()


def test_910a_8npu_warning_and_processes() -> None:
    r = parse_info(text("npu-smi-info_24.1.RC2_910a_8npu_warning_processes.txt"))
    assert [c.health for c in r.chips] == ["OK", "OK", "OK", "Warning", "OK", "OK", "OK", "Warning"]
    assert r.chips[3].power_watts == 206.9 and r.chips[3].ddr_total_bytes == 15039 * MiB
    assert r.chips[0].hbm_total_bytes == 32768 * MiB and r.chips[0].hugepages_used == 1232
    assert len(r.processes) == 32 and r.processes[0].pid == 37656
    assert r.processes[0].name == "hlt_host_devmm_" and r.processes[0].memory_bytes == 686 * MiB


def test_910a_old_1_9_3_ids_4_to_7_ddr_and_hbm() -> None:
    r = parse_info(text("npu-smi-info_1.9.3_910a_npu4-7.txt"))
    assert [c.npu_id for c in r.chips] == [4, 5, 6, 7] and r.driver_version == "21.0.rc1"
    c = r.chips[3]
    assert (c.bus_id, c.ddr_used_bytes, c.ddr_total_bytes, c.hbm_total_bytes) == (
        "0000:02:00.0",
        2563 * MiB,
        15078 * MiB,
        32768 * MiB,
    )
    assert c.hugepages_total is None


def test_910a_22_0_3_broken_alignment_power_na() -> None:
    (c,) = parse_info(text("npu-smi-info_22.0.3_910a_npu4_hugepages-970.txt")).chips
    assert (c.npu_id, c.device_id, c.power_watts, c.temperature_celsius) == (4, 0, None, 43.0)
    assert (c.hugepages_used, c.hugepages_total) == (0, 970)
    assert (c.ddr_used_bytes, c.ddr_total_bytes, c.hbm_total_bytes) == (861 * MiB, 21534 * MiB, None)


def test_310_four_chips_on_npu_215() -> None:
    r = parse_info(text("npu-smi-info_20.2.0_310_atlas800-3000_4chips.txt"))
    assert [(c.npu_id, c.chip_id, c.device_id) for c in r.chips] == [(215, i, i) for i in range(4)]
    assert [c.bus_id for c in r.chips] == ["0000:da:00.0", "0000:dc:00.0", "0000:dd:00.0", "0000:db:00.0"]
    assert r.chips[0].ddr_total_bytes == 8192 * MiB and r.chips[0].power_watts == 12.8


def test_910c_16_dies_second_die_power_dash() -> None:
    r = parse_info(text("npu-smi-info_25.3.rc1_910c-a3_8npu-16chips_processes.txt"))
    assert len(r.chips) == 16 and [c.phy_id for c in r.chips] == list(range(16))
    assert r.chips[0].power_watts == 166.9 and r.chips[1].power_watts is None
    assert r.chips[0].hbm_used_bytes == 46536 * MiB and r.chips[1].bus_id == "0000:9f:00.0"
    assert [(p.npu_id, p.chip_id, p.pid, p.name) for p in r.processes][:2] == [
        (0, 0, 2173027, None),
        (0, 1, 2173030, None),
    ]
    assert r.processes[0].memory_bytes == 43266 * MiB


def test_310p3_two_cards_ids_4_5() -> None:
    r = parse_info(text("npu-smi-info_25.5.1_310p3_2cards_host.txt"))
    assert [(c.npu_id, c.device_id, c.bus_id) for c in r.chips] == [(4, 0, "0000:81:00.0"), (5, 1, "0000:85:00.0")]
    assert r.chips[0].ddr_total_bytes == 21525 * MiB and r.chips[0].power_watts is None


def test_310p3_container_shim_lines_skipped() -> None:
    r = parse_info(text("npu-smi-info_25.5.1_310p3_in-container_hami-vnpu-softslice.txt"))
    (c,) = r.chips
    assert c.npu_id == 32768 and c.ddr_total_bytes == 8192 * MiB and c.ddr_used_bytes == 0
    assert len(r.preamble) == 5 and "limiter" in r.preamble[0]


# ---- other views ---------------------------------------------------------------------------


def test_mapping_mcu_rows_are_not_devices() -> None:
    m = parse_mapping(text("npu-smi-info-m_910b_8npu_with-mcu.txt"))
    assert len(m) == 16 and sum(not x.is_mcu for x in m) == 8
    assert [x.logic_id for x in m if not x.is_mcu] == list(range(8))
    p = parse_mapping(text("npu-smi-info-m_310p3_4cards_2chips.txt"))
    assert [(x.npu_id, x.chip_id, x.logic_id) for x in p if not x.is_mcu] == [
        (1, 0, 0),
        (1, 1, 1),
        (2, 0, 2),
        (2, 1, 3),
        (4, 0, 4),
        (4, 1, 5),
        (5, 0, 6),
        (5, 1, 7),
    ]
    assert {x.name for x in parse_mapping(text("npu-smi-info-m_24.1.RC2_910a_8npu.txt"))} == {"Ascend 910A"}
    assert [x.npu_id for x in parse_mapping(text("npu-smi-info-m_20.2.0_310_atlas800-3000.txt"))] == [215] * 4


def test_topo_910b3_full_hccs_mesh_and_affinity() -> None:
    t = parse_topo(text("npu-smi-info-t-topo_910b3_8npu_hccs.txt"))
    assert t.labels == tuple(f"NPU{i}" for i in range(8))
    assert all(t.codes[(a, b)] == ("X" if a == b else "HCCS") for a in t.labels for b in t.labels)
    assert t.affinity["NPU0"] == "144-167" and t.affinity["NPU7"] == "48-71"


def test_board_views() -> None:
    b = parse_board(text("npu-smi-info-t-board_910b_npu0_chip0_vdie.txt"))
    assert b.uuid == "901421D4021035141711E6136DA7040A00102001" and b.bus_id == "0000:81:00.0"
    assert b.firmware_version == "7.1.0.4.218" and b.chip_name == "xxx"
    card = parse_board(text("npu-smi-info-t-board-i0_25.5.2_910b2c_card-serial.txt"))
    assert (card.serial_number, card.product_name, card.bus_id) == ("102415083974", "IT21HMDB02-B2", "0000:66:00.0")
    assert card.uuid is None and card.software_version == "25.5.2"


def test_common_and_usages() -> None:
    npu, blocks = parse_common(text("npu-smi-info-t-common_910b_npu0.txt"))
    chip, mcu = blocks
    assert npu == 0 and chip.aicore_count == 32 and chip.aicore_max_hertz == 1e9 and chip.power_watts == 69.0
    assert chip.memory_usage_ratio == 0.06 and mcu.is_mcu and mcu.temperature_celsius == 48.0
    npu, (u,) = parse_usages(text("npu-smi-info-t-usages_910b_npu0.txt"))
    assert u.chip_id == 0 and u.ddr_capacity_bytes == 15171 * MiB and u.hbm_capacity_bytes == 32768 * MiB
    assert u.ddr_usage_ratio == 0.03


def test_health_detail_reference_format_no_sample() -> None:
    d = parse_health("Health Status : Warning\nError Code : 80E18401 0x80CB8009\n")
    assert d.status == "Warning" and d.error_codes == ("0x80E18401", "0x80CB8009")
    assert parse_health("Health Status : OK\nError Code : NA\n").error_codes == ()


def test_unparseable_is_a_located_parse_error() -> None:
    with pytest.raises(ParseError) as exc:
        parse_info("npu-smi: command not found\n")
    assert exc.value.tool == "npu-smi" and exc.value.command == "npu-smi info"
    bad = text("npu-smi-info_24.1.rc1.b030_910b3_8npu.txt").replace("0000:81:00.0", "0000:ZZ:00.0")
    r = parse_info(bad)
    assert len(r.chips) == 7 and len(r.errors) == 1 and r.errors[0].lineno is not None


# ---- fuzzing --------------------------------------------------------------------------------

PARSERS = {
    "npu-smi-info_": parse_info,
    "npu-smi-info-m_": parse_mapping,
    "npu-smi-info-t-topo": parse_topo,
    "npu-smi-info-t-board": parse_board,
    "npu-smi-info-t-common": parse_common,
    "npu-smi-info-t-usages": parse_usages,
}
SAMPLES = sorted(p.name for p in FIX.iterdir())


def _parser(name: str):  # type: ignore[no-untyped-def]
    return next(fn for prefix, fn in PARSERS.items() if name.startswith(prefix))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=st.sampled_from(SAMPLES),
    op=st.sampled_from(["truncate", "shuffle", "garbage", "drop_col", "huge", "delete_line"]),
    seed=st.integers(0, 2**16),
)
def test_fuzzed_samples_raise_only_accel_errors(name: str, op: str, seed: int) -> None:
    rng = random.Random(seed)
    lines = text(name).splitlines()
    if op == "truncate":
        blob = "\n".join(lines)[: rng.randrange(len("\n".join(lines)) + 1)]
    elif op == "shuffle":
        rng.shuffle(lines)
        blob = "\n".join(lines)
    elif op == "garbage":
        i = rng.randrange(len(lines))
        lines[i] = lines[i][: rng.randrange(len(lines[i]) + 1)] + "\ufffd\x00\x1b[31m|::|" + "é" * rng.randrange(5)
        blob = "\n".join(lines)
    elif op == "drop_col":
        blob = "\n".join(ln.replace("|", " ", 1) if rng.random() < 0.3 else ln for ln in lines)
    elif op == "huge":
        blob = "\n".join(ln.replace("0", "9" * rng.randrange(1, 400), 1) for ln in lines)
    else:
        del lines[rng.randrange(len(lines))]
        blob = "\n".join(lines)
    with contextlib.suppress(AccelError):
        _parser(name)(blob)


# ---- backend over replays -------------------------------------------------------------------


def open_scenario(name: str, **options: object):  # type: ignore[no-untyped-def]
    return PLUGIN.open(BackendConfig(options={"scenario": name, **options}))


def test_910b_8_replay_done_criteria() -> None:
    with open_scenario("910b-8") as be:
        inv = be.inventory()
    assert len(inv.devices) == 8
    assert all(d.model == "Ascend 910B3" for d in inv.devices)
    assert all(d.memory_total_bytes == 64 * 2**30 for d in inv.devices)
    assert all(d.memory[0].kind is MemoryKind.HBM and len(d.memory) == 1 for d in inv.devices)
    assert all(d.health.state is HealthState.HEALTHY for d in inv.devices)
    assert [d.binding.visible_id for d in inv.devices] == [str(i) for i in range(8)]
    assert inv.devices[0].binding.visible_env == "ASCEND_RT_VISIBLE_DEVICES"
    assert (inv.devices[0].binding.torch_device_type, inv.devices[0].binding.collective_backend) == ("npu", "hccl")
    assert [d.pci.bus_id for d in inv.devices if d.pci] == [
        "0000:c1:00.0",
        "0000:c2:00.0",
        "0000:81:00.0",
        "0000:82:00.0",
        "0000:01:00.0",
        "0000:02:00.0",
        "0000:41:00.0",
        "0000:42:00.0",
    ]
    assert inv.devices[0].cpu_affinity == "144-167"
    (dom,) = inv.domains
    assert dom.kind is DomainKind.HCCS_GROUP and dom.size == 8
    assert len(inv.links) == 28 and {lk.type for lk in inv.links} == {LinkType.HCCS}
    assert inv.sources[0].tool_invocations == 3


def test_910a_8_replay_two_domains_of_four_and_warnings() -> None:
    with open_scenario("910a-8") as be:
        inv = be.inventory()
    assert [d.size for d in inv.domains] == [4, 4]
    assert {d.model for d in inv.devices} == {"Ascend 910A"}  # table masked "xxx", -m says 910A
    warned = [d for d in inv.devices if d.health.conditions]
    assert [d.pci.bus_id for d in warned if d.pci] == ["0000:01:00.0", "0000:02:00.0"]
    assert warned[0].health.conditions[0].vendor_code == "huawei.npu:Warning"
    assert len(inv.processes) == 32
    assert {lk.type for lk in inv.links} == {LinkType.HCCS, LinkType.SYSTEM}


def test_910c_16_dies_paired_by_sio() -> None:
    with open_scenario("910c-16") as be:
        inv = be.inventory()
    assert len(inv.devices) == 16
    pairs = [d for d in inv.domains if d.kind is DomainKind.DIE_PAIR]
    assert len(pairs) == 8 and all(p.size == 2 for p in pairs)
    for p in pairs:
        a, b = (inv.device(m) for m in p.members)
        assert a.board_id == b.board_id  # the two dies of one NPU id
    sio = [lk for lk in inv.links if lk.type is LinkType.SIO]
    assert len(sio) == 8
    assert inv.devices[1].binding.device_nodes[0] == "/dev/davinci1"
    assert len(inv.processes) == 4


def test_310_four_chips_one_board() -> None:
    with open_scenario("310-4") as be:
        inv = be.inventory()
    assert len(inv.devices) == 4 and {d.board_id for d in inv.devices} == {"ascend:npu-215"}
    assert all(d.memory[0].kind is MemoryKind.DDR and d.memory_total_bytes == 8 * 2**30 for d in inv.devices)


def test_softslice_container_is_a_vendor_share() -> None:
    with open_scenario("310p3-softslice") as be:
        (dev,) = be.inventory().devices
    assert dev.sharing.mode.value == "vendor_share" and dev.memory_total_bytes == 8 * 2**30


def test_board_option_gives_vdie_uuid(tmp_path: Path) -> None:
    sc = ReplayScenario(tmp_path / "sc")
    sc.add(["npu-smi", "info"], sample=FIX / "npu-smi-info_23.0.rc3_910b2c_2npu.txt")
    sc.add(
        ["npu-smi", "info", "-t", "board", "-i", "0", "-c", "0"],
        sample=FIX / "npu-smi-info-t-board_910b_npu0_chip0_vdie.txt",
    )
    with PLUGIN.open(BackendConfig(runner=sc.runner(), options={"board": "true"})) as be:
        inv = be.inventory()
    assert inv.devices[0].id == "huawei:901421D4021035141711E6136DA7040A00102001"
    assert inv.devices[1].id == "huawei:pci-0000:29:00.0"  # no board answer: PCI id
    assert inv.sources[0].tool_invocations == 5


def test_hung_npu_smi_ends_in_timeout(tmp_path: Path) -> None:
    sc = ReplayScenario(tmp_path / "hung")
    sc.add(["npu-smi", "info"], sample=FIX / "npu-smi-info_23.0.rc3_910b2c_2npu.txt", delay_s=60)
    be = PLUGIN.open(BackendConfig(runner=sc.runner(), tool_timeout_s=0.2))
    with pytest.raises(ToolTimeoutError):
        be.inventory()
    be.close()


def test_probe_ignores_huawei_bmc_vga(tmp_path: Path) -> None:
    fs = FakeSysfs(tmp_path / "sys")
    fs.add_device("0000:03:00.0", vendor="19e5", device="1711", class_code="0x030000")
    res = PLUGIN.probe(BackendConfig(sysfs_root=fs.root, dev_root=tmp_path / "dev"))
    assert res.status is not ProbeStatus.PRESENT or "npu-smi found" in res.reason
    fs.add_device("0000:c1:00.0", vendor="19e5", device="d802", class_code="0x120000")
    res = PLUGIN.probe(BackendConfig(sysfs_root=fs.root, dev_root=tmp_path / "dev"))
    assert res.status is ProbeStatus.PRESENT and res.device_count == 1
    assert PLUGIN.probe(BackendConfig(options={"scenario": "910b-8"})).status is ProbeStatus.PRESENT
    assert PLUGIN.probe(BackendConfig(options={"scenario": "nope"})).status is ProbeStatus.ERROR


def test_scenario_samples_are_verbatim_copies() -> None:
    root = Path(__file__).resolve().parents[2] / "plugins" / "ascend" / "scenarios"
    for f in root.glob("*/*.txt"):
        if "CONSTRUCTED" in f.name:
            continue
        assert f.read_bytes() == (FIX / f.name).read_bytes(), f
