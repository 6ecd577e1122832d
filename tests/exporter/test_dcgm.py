"""dcgm-exporter's names: the field table against dcgm-exporter's default counters and the docs, the
recording rules under promtool, and the queries of NVIDIA's Grafana dashboard 12239 answered by a real
Prometheus that scrapes ``accel exporter --sim dgx-h100`` with the rules loaded."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from accel.integrations.exporter._dcgm import DCGM_FIELDS, DCGM_RULE_GROUPS, dcgm_rules_yaml
from tests.exporter._procs import exporter, free_port, get, prometheus, query, wait_for

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "dcgm-exporter"
DATA = Path(__file__).parent / "data"
PROMTOOL = shutil.which("promtool")
PROMETHEUS = shutil.which("prometheus")
#: The dashboard's panels whose field accel cannot produce (DCP profiling), with the field.
NOT_PRODUCIBLE_PANELS = {"Tensor Core Utilization": "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"}


def _csv_fields() -> dict[str, set[tuple[str, bool]]]:
    fields: dict[str, set[tuple[str, bool]]] = {}
    for line in (FIXTURES / "default-counters-fields.csv").read_text().splitlines():
        name, kind = line.split(",")
        fields.setdefault(name.lstrip("#"), set()).add((kind, not name.startswith("#")))
    return fields


def test_every_default_counter_is_in_the_table_with_its_type_and_default() -> None:
    csv = _csv_fields()
    mine = {f.name: f for f in DCGM_FIELDS}
    assert set(mine) == set(csv)
    for f in DCGM_FIELDS:
        assert (f.type, f.default) in csv[f.name], f.name
        assert f.produced or f.why or f.type == "label", f.name


def test_the_docs_table_says_what_the_code_produces() -> None:
    text = (ROOT / "docs" / "exporter.md").read_text()
    section = text.split("## dcgm-exporter labels and names", 1)[1].split("\n## ", 1)[0]
    rows = {line.split("|")[1].strip().strip("`"): line for line in section.splitlines()
            if line.startswith("| `DCGM_")}
    assert set(rows) == {f.name for f in DCGM_FIELDS}
    for f in DCGM_FIELDS:
        assert ("not producible" in rows[f.name]) == (f.why is not None), f.name
    records = {r["record"] for g in DCGM_RULE_GROUPS for r in g["rules"]}
    assert records == {f.name for f in DCGM_FIELDS if f.produced} | {"device:accel_dcgm_labels:info"}


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    return subprocess.run([PROMTOOL, *args], capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(PROMTOOL is None, reason="promtool is not installed (apt-get install prometheus)")
def test_the_rules_pass_promtool_check_and_unit_tests(tmp_path: Path) -> None:
    (tmp_path / "dcgm_rules.yml").write_text(dcgm_rules_yaml())
    out = _promtool("check", "rules", str(tmp_path / "dcgm_rules.yml"))
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"SUCCESS: {sum(1 for f in DCGM_FIELDS if f.produced) + 1} rules found" in out.stdout
    shutil.copy(DATA / "dcgm_rules_test.yml", tmp_path / "dcgm_rules_test.yml")
    out = _promtool("test", "rules", str(tmp_path / "dcgm_rules_test.yml"))
    assert out.returncode == 0, out.stdout + out.stderr


def _dashboard() -> dict[str, object]:
    doc: dict[str, object] = json.loads((FIXTURES / "dashboard-12239-queries.json").read_text())
    return doc


def _fill(expr: str) -> str:
    # Grafana's "All" for both variables.
    return expr.replace("$instance", ".*").replace("$gpu", ".*")


@pytest.mark.skipif(PROMETHEUS is None, reason="prometheus is not installed (apt-get install prometheus)")
def test_dashboard_12239_queries_return_series_from_accel(tmp_path: Path) -> None:
    assert PROMETHEUS is not None
    doc = _dashboard()
    assert doc["gnetId"] == 12239
    panels = doc["panels"]
    assert isinstance(panels, list) and len(panels) == 8
    rules = tmp_path / "dcgm_rules.yml"
    rules.write_text(dcgm_rules_yaml())
    port = free_port()
    with exporter(["--sim", "dgx-h100"], port), prometheus(PROMETHEUS, tmp_path, port, rules) as (base, prom):
        wanted = [p for p in panels if p["title"] not in NOT_PRODUCIBLE_PANELS]

        def all_answer() -> bool | None:
            return True if all(query(base, _fill(p["expr"])) for p in wanted) else None

        wait_for("every producible panel of dashboard 12239 has series", all_answer, 60, prom)
        temps = query(base, _fill(panels[0]["expr"]))
        assert len(temps) == 8  # dgx-h100: one series per GPU
        assert {r["metric"]["gpu"] for r in temps} == {str(i) for i in range(8)}
        assert {r["metric"]["modelName"] for r in temps} == {"NVIDIA H100 80GB HBM3"}
        assert all(r["metric"]["UUID"].startswith("GPU-") and r["metric"]["Hostname"] for r in temps)
        # The variables: label_values(DCGM_FI_DEV_GPU_TEMP, instance) and (..., gpu).
        for var in doc["variables"]:  # type: ignore[attr-defined]
            label = var["query"].split(",")[1].strip(" )")
            values = json.loads(get(f"{base}/api/v1/label/{label}/values?match[]=DCGM_FI_DEV_GPU_TEMP"))["data"]
            assert values, var
        # Units: MiB of framebuffer agree with accel's bytes. The rule ran at another instant than this
        # query, and the simulator's used memory moves between scrapes, so the recorded value must lie
        # within what accel reported over the last minute.
        fb = {r["metric"]["device"]: float(r["value"][1]) for r in query(base, "DCGM_FI_DEV_FB_USED")}
        low = {r["metric"]["device"]: float(r["value"][1]) / 2**20
               for r in query(base, "min_over_time(accel_memory_used_bytes[1m])")}
        high = {r["metric"]["device"]: float(r["value"][1]) / 2**20
                for r in query(base, "max_over_time(accel_memory_used_bytes[1m])")}
        assert fb.keys() == low.keys() == high.keys()
        for device, mib in fb.items():
            assert low[device] <= mib <= high[device], (device, low[device], mib, high[device])
        for title, field in NOT_PRODUCIBLE_PANELS.items():
            expr = next(p["expr"] for p in panels if p["title"] == title)
            assert query(base, _fill(expr)) == [], title
            assert not next(f for f in DCGM_FIELDS if f.name == field).produced
