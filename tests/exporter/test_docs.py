"""The docs and the Grafana dashboard name only families that exist, and every family is documented."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from accel.exporter import FAMILIES, RULE_GROUPS
from accel.integrations.exporter._dcgm import DCGM_RULE_GROUPS

ROOT = Path(__file__).resolve().parents[2]
NAMES = {f.name for f in FAMILIES}
METRIC = re.compile(r"\baccel_[a-z_]+\b")
#: Words of the form accel_* in the docs that are not metric names.
NOT_METRICS = {"accel_backend_example", "accel_job"}  # accel_job: a label (accel_device_accel_job_info)


def _exprs(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["expr"]] if isinstance(node.get("expr"), str) else []
        query = node.get("query")
        if isinstance(query, dict) and isinstance(query.get("query"), str):
            found.append(query["query"])
        return found + [e for v in node.values() for e in _exprs(v)]
    if isinstance(node, list):
        return [e for v in node for e in _exprs(v)]
    return []


def test_grafana_dashboard_parses_and_names_existing_families() -> None:
    doc = json.loads((ROOT / "docs" / "grafana" / "accel-exporter.json").read_text())
    assert doc["uid"] == "accel-exporter" and doc["panels"]
    exprs = _exprs(doc)
    assert len(exprs) >= 20
    used = {m for e in exprs for m in METRIC.findall(e)}
    assert used and used <= NAMES, sorted(used - NAMES)
    assert {"accel_health_state", "accel_utilization_ratio", "accel_exporter_backend_up"} <= used


def test_every_family_is_in_the_families_and_mapping_tables() -> None:
    text = (ROOT / "docs" / "exporter.md").read_text()
    families = text.split("## Families", 1)[1].split("\n## ", 1)[0]
    mapping = text.split("## Mapping to other exporters", 1)[1].split("\n## ", 1)[0]
    for name in NAMES:
        assert f"`{name}`" in families, name
        assert f"`{name}`" in mapping, name
    records = [r["record"] for g in (*RULE_GROUPS, *DCGM_RULE_GROUPS) for r in g["rules"] if "record" in r]
    for record in records:
        text = text.replace(record, "")
    mentioned = set(METRIC.findall(text)) - NOT_METRICS
    assert mentioned <= NAMES, sorted(mentioned - NAMES)


def test_every_rule_is_documented() -> None:
    text = (ROOT / "docs" / "exporter.md").read_text()
    for group in RULE_GROUPS:
        for rule in group["rules"]:
            assert f"`{rule.get('alert') or rule.get('record')}`" in text
