"""A reading no running device reports is unknown and a typed problem, never a number (issue 32).

Each vendor's shipped scenario is replayed with its first device's temperature cell turned to
-39 C (what a signed-byte wrap of 0xD9 prints), which used to pass on ascend, iluvatar, metax,
hygon, cambricon and enflame: the model's bound is -40 C, what any part can have, not what a
running server reports.  The toolkit's :data:`~accel.toolkit._values.PLAUSIBLE` rule (docs/hostile-input.md)
now leaves it out: ``temperature_celsius`` is ``None`` in that device's sample and the
inventory has a ``field`` problem naming the device (exit 5).  Ascend's ``hugepagesUsed=-15``
too: a negative count never is a reading.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from accel.cli import EXIT_PARTIAL, main
from accel.toolkit._values import PLAUSIBLE, extra_implausible, implausible

ROOT = Path(__file__).resolve().parents[2]

#: vendor: (scenario, file, the first device's temperature as printed, the same at -39 C)
CELLS = {
    "ascend": ("910b-8", "npu-smi-info_24.1.rc1.b030_910b3_8npu.txt", "101.8       43 ", "101.8      -39 "),
    "iluvatar": ("bi-v150-16", "ixsmi_4.1.0_bi-v150_16gpu_8boards.txt", "| 0%   32C   P0", "| 0%  -39C   P0"),
    "metax": ("c550-8", "mx-smi_2.2.4_c550_8gpu_gpu-state.txt", "| 29C         53W", "| -39C        53W"),
    "hygon": ("k100-8dcu", "hy-smi_k100-64g_8dcu_concise.txt", "0       53.0C ", "0       -39.0C"),
    "cambricon": ("mlu370-x8", "cnmon_v5.10.13_mlu370-x8_2cards.txt", "|  0%   32C ", "|  0%  -39C "),
    "enflame": ("s60g-sriov", "efsmi_1.6.3.12_s60g_2vf-sriov.txt", "| 34\u2103    LP0", "| -39\u2103   LP0"),
    "mthreads": ("s5000-8", "mthreads-gmi_2.4.1_s5000_8gpu_ecc-ondie.txt", "|48C   YES", "|-39C  YES"),
    "kunlunxin": ("p800-8", "xpu_smi_5.0.21.21_p800-oam_8xpu.txt", "| N/A   37C  N/A", "| N/A  -39C  N/A"),
}


def _replay(tmp_path: Path, vendor: str, edits: list[tuple[str, str]]) -> Path:
    scenario, name, *_ = CELLS[vendor]
    dst = tmp_path / vendor
    shutil.copytree(ROOT / "plugins" / vendor / "scenarios" / scenario, dst)
    table = dst / name
    text = table.read_text(encoding="utf-8")
    for old, new in edits:
        assert old in text, (vendor, old)
        text = text.replace(old, new, 1)
    table.write_text(text, encoding="utf-8")
    return dst


def _read(capsys: pytest.CaptureFixture[str], vendor: str, replay: Path) -> tuple[int, dict, dict, str]:  # type: ignore[type-arg]
    code = main(["ls", "--backend", vendor, "--replay", str(replay), "--json"])
    inv = json.loads(capsys.readouterr().out)
    main(["watch", "--backend", vendor, "--replay", str(replay), "--json", "--count", "1", "--interval", "0"])
    out, err = capsys.readouterr()
    return code, inv, json.loads(out), err


@pytest.mark.parametrize("vendor", sorted(CELLS))
def test_a_temperature_below_freezing_is_unknown_and_a_field_problem(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, vendor: str
) -> None:
    _, _, old, new = CELLS[vendor]
    clean = _read(capsys, vendor, _replay(tmp_path / "clean", vendor, []))
    code, inv, refresh, err = _read(capsys, vendor, _replay(tmp_path / "cold", vendor, [(old, new)]))
    first = clean[1]["devices"][0]["id"]
    before = {s["device_id"]: s["temperature_celsius"] for s in clean[2]["samples"]}
    after = {s["device_id"]: s["temperature_celsius"] for s in refresh["samples"]}
    assert before[first] is not None and after[first] is None  # unknown, never -39
    assert {k: v for k, v in after.items() if k != first} == {k: v for k, v in before.items() if k != first}
    assert code == EXIT_PARTIAL
    problems = [p for p in inv["problems"] if p["kind"] == "field" and p["device_id"] == first]
    # temperature_celsius, or the sensor it came from (hy-smi's temperatures_celsius['edge'])
    assert len(problems) == 1 and "celsius" in problems[0]["message"] and "= -39.0 " in problems[0]["message"]
    assert "below 0 C" in problems[0]["message"] and problems[0]["code"] == "model.out-of-bounds"
    assert "-39" not in json.dumps(refresh["samples"])
    assert "accel: warning:" in err and "below 0 C" in err


def test_a_negative_hugepage_count_is_left_out(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    cell = ("101.8       43                0    / 0", "101.8       43                -15  / 0")
    replay = _replay(tmp_path, "ascend", [cell])
    code = main(["ls", "--backend", "ascend", "--replay", str(replay), "--json"])
    inv = json.loads(capsys.readouterr().out)
    first = inv["devices"][0]
    assert code == EXIT_PARTIAL
    assert "huawei.com/hugepagesUsed" not in first["extras"] and first["extras"]["huawei.com/hugepagesTotal"] == 0
    (problem,) = inv["problems"]
    assert problem["kind"] == "field" and problem["device_id"] == first["id"]
    assert "hugepagesUsed" in problem["message"] and "never negative" in problem["message"]


@pytest.mark.parametrize(
    ("name", "value", "refused"),
    [
        ("temperature_celsius", -39.0, True),
        ("temperature_celsius", -0.5, True),
        ("temperature_celsius", 0.0, False),
        ("temperature_celsius", 95.0, False),
        ("temperatures_celsius", -1, True),
        ("process_count", -1, True),
        ("process_count", 0, False),
        ("hugepages_used", -15, True),
        ("power_watts", -3.0, False),  # the model's own bound refuses this one
        ("temperature_celsius", "hot", False),  # not a number: not a reading to judge
    ],
)
def test_implausible(name: str, value: object, refused: bool) -> None:
    assert (implausible(name, value) is not None) is refused


def test_extras_are_judged_by_their_name_in_snake_case() -> None:
    assert extra_implausible("huawei.com/hugepagesUsed", -15) == PLAUSIBLE["_used"][2]
    assert extra_implausible("huawei.com/hugepagesUsed", 12) is None
    assert extra_implausible("vendor.com/boardTempCelsius", -5) is not None
    assert extra_implausible("vendor.com/memoryTotalBytes", -1) is not None  # the model's bound
