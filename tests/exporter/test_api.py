"""accel.integrations.exporter's public surface is curated and it imports only what the design allows;
the old import path ``accel.exporter`` gives the same objects."""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# accel.leak is analysis over the model (it imports only accel.model and accel.errors itself).
# accel._net: the loopback check the exporter shares with the k8s extender (standard library only).
# accel.integrations.k8s._podresources: the kubelet PodResources client behind --pod-resources-socket
# (imported only when that option is given, or for type checking; it needs grpcio only when it calls).
ALLOWED = (
    "accel.integrations.exporter", "accel.model", "accel.discovery", "accel.plugin", "accel.errors", "accel.leak",
    "accel._net", "accel.integrations.k8s._podresources",
)
PACKAGE = ROOT / "accel" / "integrations" / "exporter"


def test_public_api_is_curated_and_resolves() -> None:
    mod = importlib.import_module("accel.integrations.exporter")
    exported = list(mod.__all__)
    assert exported == sorted(exported, key=lambda s: (not s.isupper(), s))
    for name in exported:
        assert getattr(mod, name) is not None, name


def test_the_exporter_imports_only_the_model_discovery_plugin_leak_errors_and_net() -> None:
    bad = []
    for path in sorted(PACKAGE.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level:
                base = {1: "accel.integrations.exporter.", 2: "accel.integrations.", 3: "accel."}[node.level]
                target = base + (node.module or "")
                if not any(target == a or target.startswith(a + ".") for a in ALLOWED):
                    bad.append(f"{path.name}: {target}")
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("accel"):
                bad.append(f"{path.name}: absolute import {node.module}")
    assert not bad, bad


def test_the_old_import_path_gives_the_same_objects() -> None:
    import accel.exporter as old
    import accel.integrations.exporter as new

    assert old.__all__ == new.__all__
    for name in new.__all__:
        assert getattr(old, name) is getattr(new, name), name
    from accel.exporter import AccelCollector, SnapshotSource, rules_yaml

    assert (AccelCollector, SnapshotSource, rules_yaml) == (new.AccelCollector, new.SnapshotSource, new.rules_yaml)
    with pytest.raises(AttributeError):
        old.no_such_name  # noqa: B018


def test_importing_the_old_path_loads_neither_the_collector_nor_prometheus_client() -> None:
    code = ("import sys, json, accel.exporter; print(json.dumps(sorted(m for m in sys.modules "
            "if m.startswith(('prometheus_client', 'accel.integrations.exporter.')))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert json.loads(out.stdout) == []
