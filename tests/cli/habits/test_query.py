"""`--query FIELD,... --format csv[,noheader][,nounits]` (issue 16): nvidia-smi's scripting habit.

Golden outputs over real vendor samples (replayed), SI base units, ``[N/A]`` for what was not
read (never 0).
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from accel.cli import EXIT_OK, EXIT_USAGE, main

HERE = Path(__file__).parent


@pytest.mark.parametrize(
    ("argv", "golden"),
    [
        (
            ["ls", "--backend", "ascend", "-o", "scenario=910b-8", "--query",
             "index,uuid,pci.bus_id,name,memory.total,memory.used,utilization.gpu,power.draw,temperature.gpu,health"],
            "query_ascend_910b-8.csv",
        ),
        (
            ["ls", "--backend", "metax", "-o", "scenario=c550-8", "--query",
             "index,bus_id,model,memory_total_bytes,power_watts,power_limit_watts,temperature_celsius,fan_ratio",
             "--format", "csv,noheader,nounits"],
            "query_metax_c550-8_noheader_nounits.csv",
        ),
    ],
)
def test_query_matches_the_golden_output(capsys: pytest.CaptureFixture[str], argv: list[str], golden: str) -> None:
    assert main(argv) == EXIT_OK
    assert capsys.readouterr().out == (HERE / golden).read_text()


def test_values_are_si_and_unknown_is_na(capsys: pytest.CaptureFixture[str]) -> None:
    # The npu-smi sample prints HBM 65536 MB and no UUID.  Asked by nvidia-smi's name
    # (memory.total) the answer is nvidia-smi's MiB; asked by the model's name, SI bytes.
    rows = (HERE / "query_ascend_910b-8.csv").read_text().splitlines()
    first = next(csv.reader(io.StringIO(rows[1]), skipinitialspace=True))
    assert first[1] == "[N/A]"
    assert first[4] == "65536 MiB"
    assert main(["ls", "--backend", "ascend", "-o", "scenario=910b-8", "-i", "0",
                 "--query", "memory_total_bytes", "--format", "csv,noheader"]) == EXIT_OK
    assert capsys.readouterr().out == f"{65536 * 2**20} B\n"
    assert main(["ls", "--sim", "dgx-h100", "-o", "faults=not_supported=power_watts", "-i", "0",
                 "--query", "index,power.draw", "--format", "csv,noheader"]) == EXIT_OK
    assert capsys.readouterr().out == "0, [N/A]\n"


def test_watch_prints_the_header_once(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["watch", "--sim", "dgx-h100", "-i", "0,1", "--count", "3", "--interval", "0",
                 "--query", "timestamp,index,power.draw"]) == EXIT_OK
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "timestamp, index, power.draw [W]"
    assert len(lines) == 1 + 3 * 2
    assert all(line.endswith(" W") for line in lines[1:])


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--query", "index,bogus"], "unknown field 'bogus'"),
        (["--query", "index", "--format", "json"], "expected csv[,noheader][,nounits]"),
        (["--query", "index", "--format", "csv,nope"], "expected csv[,noheader][,nounits]"),
        (["--format", "csv,noheader"], "--format needs --query"),
    ],
)
def test_bad_queries_are_one_line_usage_errors(
    capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    assert main(["ls", "--sim", "dgx-h100", *extra]) == EXIT_USAGE
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
