"""`accel conformance run --backend sim --report out/` through the main command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accel.cli import EXIT_OK, main
from accel.conformance import REQUIREMENTS


def test_accel_conformance_run_writes_the_matrix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert main(["conformance", "run", "--backend", "sim", "--scenario", "dgx-h100", "--report", str(out)]) == EXIT_OK
    for name in ("matrix.md", "matrix.json", "matrix.html"):
        assert (out / name).is_file(), name
    doc = json.loads((out / "matrix.json").read_text())
    assert len(doc["rows"]) == len(REQUIREMENTS)
    assert "sim[dgx-h100]" in (out / "matrix.md").read_text()
    capsys.readouterr()


def test_accel_conformance_bad_backend_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["conformance", "run", "--backend", "nope"])
    err = capsys.readouterr().err
    assert code != EXIT_OK and "Traceback" not in err
