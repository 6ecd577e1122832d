"""`accel dmon` (issue 16): nvidia-smi dmon's rows for every vendor, clean when piped."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from accel.cli import EXIT_OK, EXIT_USAGE, main

GOLDEN = Path(__file__).with_name("dmon_ascend_910b-8.txt")
STAMP = re.compile(r"^  \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d ")


def test_dmon_matches_the_golden_output_over_a_real_sample(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["dmon", "--backend", "ascend", "-o", "scenario=910b-8", "-c", "1", "-d", "0", "-s", "pumce"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert all(STAMP.match(ln) for ln in lines[2:])  # every row starts with its timestamp
    assert "\n".join(ln[22:] for ln in lines) + "\n" == GOLDEN.read_text()


def test_one_row_per_device_per_sample_and_the_header_once(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["dmon", "--sim", "dgx-h100", "-c", "3", "-d", "0", "-i", "0,5"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "\x1b" not in out  # no screen control: clean when piped
    lines = out.splitlines()
    assert [ln.startswith("#") for ln in lines[:2]] == [True, True]
    rows = lines[2:]
    assert len(rows) == 3 * 2
    assert [r.split()[1] for r in rows] == ["0", "5"] * 3  # whole-list positions


def test_unread_values_are_dashes_not_zero(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["dmon", "--sim", "dgx-h100", "-c", "1", "-d", "0", "-i", "0", "-s", "p",
                 "-o", "faults=not_supported=power_watts"]) == EXIT_OK
    row = capsys.readouterr().out.splitlines()[2].split()
    assert row[2] == "-" and row[3] != "-"


@pytest.mark.parametrize(("extra", "message"), [(["-s", "x"], "field groups"), (["-s", ""], "field groups"),
                                                (["-c", "-1"], "--count"), (["-d", "nan"], "--interval")])
def test_bad_options_are_usage_errors(capsys: pytest.CaptureFixture[str], extra: list[str], message: str) -> None:
    assert main(["dmon", "--sim", "dgx-h100", *extra]) == EXIT_USAGE
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
