"""`accel show` and `accel ps` (issue 16): aligned labels, no literal "None", processes per device."""

from __future__ import annotations

from pathlib import Path

import pytest

from accel.cli import main
from accel.cli._render import device_text
from accel.model import Device

GOLDEN = Path(__file__).with_name("show_dgx-h100_0.txt")


def test_show_matches_the_golden_output(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", "--sim", "dgx-h100", "0"]) == 0
    assert capsys.readouterr().out == GOLDEN.read_text()


@pytest.mark.parametrize("profile", ["dgx-h100", "ascend-910b-8", "mi300x-8", "a100-mig"])
def test_every_label_is_separated_from_its_value(capsys: pytest.CaptureFixture[str], profile: str) -> None:
    assert main(["show", "--sim", profile, "0"]) == 0
    lines = capsys.readouterr().out.splitlines()[1:]
    rows = [ln for ln in lines if not ln.startswith("    - ")]
    starts = {len(ln) - len(ln[2:].split("  ", 1)[1].lstrip()) for ln in rows if "  " in ln[2:]}
    assert len(starts) == 1, lines  # one value column
    assert all("None" not in ln for ln in lines), lines


def test_unknown_binding_and_runtime_parts_are_left_out() -> None:
    d = Device.model_validate(
        {
            "id": "acme:pci-0000:01:00.0",
            "vendor": "acme",
            "kind": "gpu",
            "model": "X",
            "versions": {"runtime": "1.0"},
            "binding": {"torch_device_type": "xpu"},
        }
    )
    text = device_text(d)
    assert "None" not in text
    assert "torch / collective  xpu\n" in text
    assert "runtime             1.0\n" in text


@pytest.mark.parametrize(
    ("argv", "golden"),
    [
        (["ps", "--sim", "dgx-h100"], "ps_dgx-h100.txt"),
        (["ps", "--sim", "a100-mig"], "ps_a100-mig.txt"),
        # A real npu-smi sample (910C A3, 4 processes, no names printed): unknown names are '-'.
        (["ps", "--backend", "ascend", "-o", "scenario=910c-16"], "ps_ascend_910c-16.txt"),
    ],
)
def test_ps_matches_the_golden_output(capsys: pytest.CaptureFixture[str], argv: list[str], golden: str) -> None:
    assert main(argv) == 0
    assert capsys.readouterr().out == GOLDEN.with_name(golden).read_text()


def test_ps_json_is_the_process_list(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    assert main(["ps", "--sim", "dgx-h100", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)  # the list, and what could not be read (issue 32)
    assert doc["problems"] == [] and doc["complete"] is True
    procs = doc["processes"]
    assert len(procs) == 8
    assert {"pid", "device_id", "name", "memory_bytes"} <= set(procs[0])


def test_ps_with_no_processes_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ps", "--backend", "metax", "-o", "scenario=c550-8"]) == 0
    out, err = capsys.readouterr()
    assert out == "" and "no processes reported" in err
