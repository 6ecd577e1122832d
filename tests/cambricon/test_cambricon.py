"""Cambricon: every cnmon sample is a fixture with the values a person reads in it; replays."""

from __future__ import annotations

import contextlib
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accel.errors import AccelError, ParseError, ToolTimeoutError
from accel.model import DomainKind, HealthState, LinkType
from accel.plugin import BackendConfig, ProbeStatus
from accel.plugins.cambricon import PLUGIN
from accel.plugins.cambricon._parse import parse_cnmon, parse_topo
from accel.testing import FakeSysfs
from accel.toolkit import ReplayScenario

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "cambricon"
MiB = 2**20


def text(name: str) -> str:
    return (FIX / name).read_text(encoding="utf-8")


def test_v5_10_13_mlu370_x8() -> None:
    r = parse_cnmon(text("cnmon_v5.10.13_mlu370-x8_2cards.txt"))
    assert (r.version, r.driver_version) == ("5.10.13", "5.10.13")
    assert [(c.card, c.name, c.bus_id) for c in r.chips] == [
        (0, "MLU370-X8", "0000:39:00.0"),
        (1, "MLU370-X8", "0000:3d:00.0"),
    ]
    c = r.chips[1]
    assert (c.memory_used_bytes, c.memory_total_bytes) == (0, 23374 * MiB)
    assert (c.power_watts, c.power_cap_watts, c.temperature_celsius) == (106.0, 250.0, 39.0)
    assert c.ecc_errors is None and c.compute_mode == "Default" and c.firmware == "v1.1.6"
    assert r.processes == ()


def test_v4_20_no_bus_id_vmemory() -> None:
    r = parse_cnmon(text("cnmon_v4.20.11_mlu370-x4_3cards_vmemory.txt"))
    assert len(r.chips) == 3 and r.version == "4.20.11"
    c = r.chips[0]
    assert c.bus_id is None and c.driver == "v4.20.11" and c.inited == "On"
    assert c.memory_total_bytes == 23308 * MiB and c.vmemory_total_bytes == 1048576 * MiB
    assert (c.power_watts, c.power_cap_watts) == (30.0, 150.0)


def test_v5_10_31_masked_name_and_total() -> None:
    r = parse_cnmon(text("cnmon_v5.10.31_mlu5xx-masked_8cards_mode-full.txt"))
    assert len(r.chips) == 8 and {c.name for c in r.chips} == {"MLUXXX-XX"}
    assert all(c.memory_total_bytes is None and c.ecc_errors == 0 for c in r.chips)
    assert r.chips[7].bus_id == "0000:d3:00.0" and r.chips[0].power_cap_watts == 550.0
    assert {c.mode for c in r.chips} == {"FULL"}


TOPO = """\
        MLU0    MLU1    MLU2    MLU3    CPU Affinity
MLU0    X       MLK     PIX     SYS     0-31
MLU1    MLK     X       SYS     PIX     0-31
MLU2    PIX     SYS     X       MLK2    32-63
MLU3    SYS     PIX     MLK2    X       32-63
"""


def test_topo_reference_format_no_sample() -> None:
    t = parse_topo(TOPO)
    assert t.labels == ("MLU0", "MLU1", "MLU2", "MLU3")
    assert t.codes[("MLU2", "MLU3")] == "MLK2" and t.affinity["MLU3"] == "32-63"
    with pytest.raises(ParseError):
        parse_topo(TOPO.replace("PIX     SYS     X", "PIX     ???     X"))


def test_unparseable_is_located() -> None:
    with pytest.raises(ParseError) as exc:
        parse_cnmon("cnmon: error while loading shared libraries\n")
    assert exc.value.tool == "cnmon"
    r = parse_cnmon(text("cnmon_v5.10.13_mlu370-x8_2cards.txt").replace("0000:3D:00.0", "0000:QQ:00.0"))
    assert len(r.chips) == 1 and r.errors[0].lineno is not None


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=st.sampled_from(sorted(p.name for p in FIX.iterdir())),
    op=st.sampled_from(["truncate", "shuffle", "garbage", "huge", "delete_line"]),
    seed=st.integers(0, 2**16),
)
def test_fuzzed_samples_raise_only_accel_errors(name: str, op: str, seed: int) -> None:
    rng = random.Random(seed)
    lines = text(name).splitlines()
    if op == "truncate":
        blob = text(name)[: rng.randrange(len(text(name)) + 1)]
    elif op == "shuffle":
        rng.shuffle(lines)
        blob = "\n".join(lines)
    elif op == "garbage":
        i = rng.randrange(len(lines))
        lines[i] = lines[i][: rng.randrange(len(lines[i]) + 1)] + "\ufffd|/ MiB/"
        blob = "\n".join(lines)
    elif op == "huge":
        blob = "\n".join(ln.replace("0", "9" * rng.randrange(1, 400), 1) for ln in lines)
    else:
        del lines[rng.randrange(len(lines))]
        blob = "\n".join(lines)
    for parser in (parse_cnmon, parse_topo):
        with contextlib.suppress(AccelError):
            parser(blob)


def test_mlu370_x8_replay_two_chips_one_card() -> None:
    with PLUGIN.open(BackendConfig(options={"scenario": "mlu370-x8"})) as be:
        inv = be.inventory()
    assert [d.id for d in inv.devices] == ["cambricon:pci-0000:39:00.0", "cambricon:pci-0000:3d:00.0"]
    assert {d.board_id for d in inv.devices} == {"cambricon:card-0"}
    assert all(d.memory_total_bytes == 23374 * MiB for d in inv.devices)
    # Health is earned and this cnmon output prints no numeric Ecc-Error count: unknown, never healthy.
    assert all(d.health.state is HealthState.UNKNOWN and d.health.checked_at is None for d in inv.devices)
    b = inv.devices[1].binding
    assert (b.visible_env, b.visible_id, b.torch_device_type, b.collective_backend) == (
        "MLU_VISIBLE_DEVICES",
        "1",
        "mlu",
        "cncl",
    )
    assert inv.sources[0].tool_invocations == 2  # cnmon + cnmon topo -m (not recorded here)


def test_ecc_errors_become_conditions(tmp_path: Path) -> None:
    sc = ReplayScenario(tmp_path / "ecc")
    sc.add(
        ["cnmon"],
        stdout=text("cnmon_v5.10.31_mlu5xx-masked_8cards_mode-full.txt").replace(
            "| 0%                  0 |", "| 0%                  3 |", 1
        ),
    )
    sc.add(["cnmon", "topo", "-m"], stdout=TOPO)
    with PLUGIN.open(BackendConfig(runner=sc.runner())) as be:
        inv = be.inventory()
    bad = inv.devices[0]
    assert bad.health.conditions[0].vendor_code == "cambricon.mlu:ecc-error"
    assert bad.health.state is HealthState.DEGRADED
    assert all(d.health.state is HealthState.HEALTHY for d in inv.devices[1:])
    assert [d.size for d in inv.domains] == [2, 2] and inv.domains[0].kind is DomainKind.MLULINK_GROUP
    assert {lk.type for lk in inv.links} == {LinkType.MLULINK}


def test_hung_cnmon_times_out(tmp_path: Path) -> None:
    sc = ReplayScenario(tmp_path / "hung")
    sc.add(["cnmon"], stdout="", delay_s=60)
    with PLUGIN.open(BackendConfig(runner=sc.runner(), tool_timeout_s=0.2)) as be, pytest.raises(ToolTimeoutError):
        be.inventory()


def test_probe_by_pci_id(tmp_path: Path) -> None:
    fs = FakeSysfs(tmp_path / "sys")
    fs.add_device("0000:39:00.0", vendor="cabc", device="0370", class_code="0x120000")
    res = PLUGIN.probe(BackendConfig(sysfs_root=fs.root, dev_root=tmp_path / "dev"))
    assert res.status is ProbeStatus.PRESENT and res.device_count == 1


# -- samples2: more real cnmon outputs (issue 13) ----------------------------------------------


def _inv(tmp_path: Path, name: str):  # type: ignore[no-untyped-def]
    sc = ReplayScenario(tmp_path / "s")
    sc.add(["cnmon"], stdout=text(name))
    sc.add(["cnmon", "topo", "-m"], stdout=TOPO)
    with PLUGIN.open(BackendConfig(runner=sc.runner())) as be:
        return be.inventory()


def test_v5_10_22_mlu370_x8_ecc_zero_mode_full() -> None:
    r = parse_cnmon(text("cnmon_v5.10.22_mlu370-x8_2cards_ecc0.txt"))
    assert (r.version, r.driver_version) == ("5.10.22", "5.10.22")
    assert [(c.card, c.name, c.bus_id) for c in r.chips] == [
        (0, "MLU370-X8", "0000:13:00.0"),
        (1, "MLU370-X8", "0000:16:00.0"),
    ]
    c = r.chips[0]
    assert (c.memory_used_bytes, c.memory_total_bytes) == (0, 20638 * MiB)
    assert (c.power_watts, c.power_cap_watts, c.temperature_celsius) == (107.0, 250.0, 28.0)
    assert r.chips[1].temperature_celsius == 32.0
    assert c.utilization_ratio == 0.0 and c.ecc_errors == 0 and c.mode == "FULL"
    assert r.processes == ()


def test_v5_10_22_numeric_ecc_earns_health(tmp_path: Path) -> None:
    inv = _inv(tmp_path, "cnmon_v5.10.22_mlu370-x8_2cards_ecc0.txt")
    assert len(inv.devices) == 2
    assert all(d.health.checked_at is not None for d in inv.devices)
    assert inv.devices[1].memory[0].total_bytes == 20638 * MiB


def test_v5_10_10_mlu370_x4_exclusive_ecc_na_off_column() -> None:
    # Card 1 prints its Ecc-Error "N/A" one column left of the border ("N/A  |"): still N/A.
    r = parse_cnmon(text("cnmon_v5.10.10_mlu370-x4_2cards_exclusive.txt"))
    assert (r.version, r.driver_version) == ("5.10.10", "5.10.10")
    assert [c.bus_id for c in r.chips] == ["0000:1b:00.0", "0000:36:00.0"]
    c = r.chips[1]
    assert c.name == "MLU370-X4" and c.firmware == "v1.1.6"
    assert (c.memory_used_bytes, c.memory_total_bytes) == (0, 23308 * MiB)
    assert (c.power_watts, c.power_cap_watts, c.temperature_celsius) == (27.0, 150.0, 41.0)
    assert all(x.ecc_errors is None and x.compute_mode == "Exclusive" for x in r.chips)
    assert r.processes == ()


def test_v5_10_10_ecc_na_reads_no_health(tmp_path: Path) -> None:
    inv = _inv(tmp_path, "cnmon_v5.10.10_mlu370-x4_2cards_exclusive.txt")
    assert [d.health.checked_at for d in inv.devices] == [None, None]
