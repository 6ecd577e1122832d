"""The kit itself: requirement table, inert plugin, strict xfail, overrides, certify, reports."""

from __future__ import annotations

import json
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from accel.conformance import (
    REQUIREMENTS,
    ConformanceSuite,
    Level,
    load_results,
    report,
    run,
    run_all,
)
from accel.conformance._requirements import ROW_ATTR
from accel.errors import ConfigError
from tests.conformance._kit import run_suite_module

GOOD = """
from pathlib import Path
from accel.conformance import ConformanceSuite
from accel.plugin import BackendConfig
from tests.conformance import conformance_fake as fake


class TestAcme(ConformanceSuite):
    backend = "acme"
    plugin = fake.PLUGIN
    {extra}

    @classmethod
    def backend_config(cls, tmp_path: Path) -> BackendConfig:
        config = fake.make_config(tmp_path)
        {oracle}
        return config
"""
ORACLE = "cls.oracle = fake.AcmeOracle(vendor_ids=[fake.VENDOR_ID], root=config.sysfs_root)"


def _good(extra: str = "", oracle: str = ORACLE) -> str:
    return GOOD.replace("{extra}", extra).replace("{oracle}", oracle)


# -- the requirement table ----------------------------------------------------------------------
def test_every_row_has_exactly_one_suite_test_and_back() -> None:
    # The rows live in one mixin per section (accel.conformance._suite._<section>), so the suite's
    # tests are its attributes through the MRO, not its own __dict__.
    tests = {
        name: getattr(getattr(ConformanceSuite, name), ROW_ATTR, None)
        for name in dir(ConformanceSuite) if name.startswith("test_")
    }
    assert None not in tests.values(), [n for n, r in tests.items() if r is None]
    assert sorted(tests.values()) == sorted(REQUIREMENTS)
    for name, rid in tests.items():
        assert name == "test_" + rid.replace(".", "_").replace("-", "_")
        assert getattr(ConformanceSuite, name).__doc__ == REQUIREMENTS[rid].doc
        # ... and it is defined in the module of its requirement section.
        section = REQUIREMENTS[rid].section
        assert getattr(ConformanceSuite, name).__module__ == f"accel.conformance._suite._{section}", name


def test_rows_are_one_sentence_with_a_level() -> None:
    assert len(REQUIREMENTS) >= 45
    for req in REQUIREMENTS.values():
        assert req.doc.endswith(".") and req.doc.count(". ") == 0, req.id
        assert req.level in set(Level)
    sections = {r.section for r in REQUIREMENTS.values()}
    assert sections == {
        "discovery",
        "inventory",
        "memory",
        "topology",
        "partitions",
        "health",
        "telemetry",
        "errors",
        "lifecycle",
        "cost",
    }


# -- inert unless asked ----------------------------------------------------------------------------
def test_plugin_is_inert_for_ordinary_tests(tmp_path: Path) -> None:
    rc, output, results = run_suite_module(tmp_path, "def test_plain():\n    assert 1 + 1 == 2\n")
    assert rc == 0, output
    assert results is None
    assert "accel conformance" not in output
    assert not (tmp_path / "report" / "results.json").exists()


def test_options_are_registered() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--help"], capture_output=True, text=True, check=True, cwd="/"
    )
    for opt in ("--accel-backend", "--accel-option", "--accel-scenario", "--accel-report", "--accel-certify"):
        assert opt in out.stdout


# -- strict xfail, overrides, certify --------------------------------------------------------------
def test_xfail_is_strict_and_a_known_failure_is_xfail(tmp_path: Path) -> None:
    extra = 'xfail = {"topology.self-is-x": "we think it fails", "cost.snapshot-budget": "expensive"}'
    rc, output, results = run_suite_module(tmp_path, _good(extra), "-o", "xfail_strict=false")
    assert results is not None and rc == 1, output
    rows = results["runs"][0]["rows"]
    assert rows["topology.self-is-x"]["status"] == "fail"
    assert "unexpectedly passed" in rows["topology.self-is-x"]["message"]
    assert "remove the entry" in rows["topology.self-is-x"]["message"]


def test_unknown_xfail_row_is_a_usage_error(tmp_path: Path) -> None:
    rc, output, _ = run_suite_module(tmp_path, _good('xfail = {"no.such-row": "x"}'))
    assert rc != 0 and "unknown rows ['no.such-row']" in output


def test_an_overridden_test_is_reported_as_overridden_never_passed(tmp_path: Path) -> None:
    extra = "def test_memory_total_bytes(self, accel):\n        return None"
    rc, output, results = run_suite_module(tmp_path, _good(extra), "--accel-certify")
    assert results is not None
    row = results["runs"][0]["rows"]["memory.total-bytes"]
    assert row["status"] == "overridden"
    assert "overridden in TestAcme" in row["message"]
    assert "overridden: memory.total-bytes" in output
    # pytest counts it as skipped, not passed, and certify mode fails on it.
    assert f"{len(REQUIREMENTS) - 1} passed, 1 skipped" in output
    assert rc == 1
    assert any("memory.total-bytes is overridden" in v for v in results["certification"]["violations"])


def test_certify_passes_and_writes_the_bundle(tmp_path: Path) -> None:
    rc, output, results = run_suite_module(tmp_path, _good(), "--accel-certify")
    assert rc == 0, output[-3000:]
    assert results is not None and results["certification"] == {"passed": True, "violations": []}
    bundle = tmp_path / "report"
    for name in (
        "results.json",
        "junit.xml",
        "run.log",
        "matrix.md",
        "matrix.json",
        "matrix.html",
        "PRODUCT.json",
        "certification.json",
        "README.md",
    ):
        assert (bundle / name).is_file(), name
    product = json.loads((bundle / "PRODUCT.json").read_text())["products"][0]
    assert product["vendor"] == "acme" and product["plugin_name"] == "acme"
    assert product["plugin_version"] == "0.3.1" and product["plugin_api_version"] == "1.0"
    assert product["driver_versions"] == ["535.104.05"]
    assert "PASS       memory.total-bytes" in (bundle / "run.log").read_text()


def test_certify_fails_on_a_skipped_required_row(tmp_path: Path) -> None:
    rc, output, results = run_suite_module(tmp_path, _good(oracle="pass"), "--accel-certify")
    assert rc == 1
    assert results is not None
    violations = results["certification"]["violations"]
    assert any("required memory.oracle-1pct is skip: no oracle" in v for v in violations), violations
    assert "certification: FAILED" in output


def test_junit_xml_alone_rebuilds_the_results(tmp_path: Path) -> None:
    rc, _output, results = run_suite_module(tmp_path, _good())
    assert rc == 0 and results is not None
    from_junit = load_results(tmp_path / "report" / "junit.xml")
    run_j, run_r = from_junit["runs"][0], results["runs"][0]
    assert {k: v["status"] for k, v in run_j["rows"].items()} == {k: v["status"] for k, v in run_r["rows"].items()}
    assert run_j["plugin"]["version"] == "0.3.1"
    assert run_j["label"] == "acme"


# -- the run/report API and the HTML page ----------------------------------------------------------
class _Page(HTMLParser):
    """Collects the matrix cells: (row id, status) per column, and every external reference."""

    def __init__(self) -> None:
        super().__init__()
        self.row: str | None = None
        self.cells: dict[str, list[str]] = {}
        self.headers: list[str] = []
        self.external: list[str] = []
        self._in_th = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "tr":
            self.row = a.get("data-row")
        if tag == "td" and self.row and a.get("data-status"):
            self.cells.setdefault(self.row, []).append(str(a["data-status"]))
        if tag in ("script", "link", "img") or (a.get("src") or a.get("href") or "").startswith("http"):
            self.external.append(tag)
        self._in_th = tag == "th"

    def handle_data(self, data: str) -> None:
        if self._in_th and data.startswith("sim["):
            self.headers.append(data)
        self._in_th = False


@pytest.fixture(scope="module")
def sim_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sim-run") / "out"
    result = run("sim", report=out)
    assert result.passed, result.output[-3000:]
    return out


def test_run_sim_writes_the_three_matrices(sim_report: Path) -> None:
    for name in ("matrix.md", "matrix.json", "matrix.html", "results.json", "junit.xml", "run.log"):
        assert (sim_report / name).is_file(), name
    md = (sim_report / "matrix.md").read_text()
    assert "| `memory.used-le-total` Used memory is reported and never exceeds total" in md
    assert "| sim[dgx-h100] | sim 1.0 | 1.0 | 550.54.15 | 8 | NVIDIA H100 80GB HBM3 |" in md


def test_html_matrix_parses_and_has_every_cell(sim_report: Path) -> None:
    page = _Page()
    page.feed((sim_report / "matrix.html").read_text())
    assert page.external == []  # self-contained
    profiles = {"a100-mig", "ascend-910b-8", "dgx-h100", "mi300x-8", "mixed-nvidia-ascend", "mlu370-x8", "rtx4090-4"}
    assert {h.removeprefix("sim[").removesuffix("]") for h in page.headers} >= profiles
    assert set(page.cells) == set(REQUIREMENTS)
    # a100-mig is a one-GPU host: a pairwise row has nothing to compare there, and says so.
    single = {"topology.pcie-levels-match-sysfs"}
    for rid, statuses in page.cells.items():
        assert len(statuses) == 7, rid
        assert set(statuses) <= ({"pass", "xfail", "skip"} if rid in single else {"pass", "xfail"}), (rid, statuses)
    assert page.cells["health.lost-device-isolated"] == ["pass"] * 7


def test_matrix_json_declared_against_measured(sim_report: Path) -> None:
    matrix = json.loads((sim_report / "matrix.json").read_text())
    caps = {c["capability"]: c["cells"] for c in matrix["capabilities"]}
    cell = caps["partitions"]["sim[a100-mig]"]
    assert cell["declared"] and cell["observed"] and cell["verdict"] == "+"
    assert caps["serial"]["sim[dgx-h100]"]["verdict"] == "!"  # observed, not declared
    col = next(c for c in matrix["columns"] if c["label"] == "sim[dgx-h100]")
    assert col["plugin"]["version"] == "1.0" and col["driver_versions"] == ["550.54.15"]


def test_report_merges_runs(sim_report: Path, tmp_path: Path) -> None:
    rc, output, _ = run_suite_module(tmp_path / "fake", _good())
    assert rc == 0, output
    paths = report([sim_report, tmp_path / "fake" / "report" / "junit.xml"], tmp_path / "merged")
    matrix = json.loads(paths["json"].read_text())
    labels = [c["label"] for c in matrix["columns"]]
    assert "acme" in labels and "sim[rtx4090-4]" in labels and len(labels) == 8
    assert "acme" in paths["md"].read_text() and "acme" in paths["html"].read_text()


def test_report_names_a_path_without_results(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"no results\.json or junit\.xml"):
        report([tmp_path], tmp_path / "out")


def test_run_all_writes_the_combined_matrix(tmp_path: Path) -> None:
    result = run_all(tmp_path / "docs", backends=["sim"])
    assert result.passed, result.output[-2000:]
    matrix: dict[str, Any] = json.loads((tmp_path / "docs" / "matrix.json").read_text())
    assert len(matrix["columns"]) == 7
