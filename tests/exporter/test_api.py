"""accel.exporter's public surface is curated and it imports only what the design allows."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# accel.leak is analysis over the model (it imports only accel.model and accel.errors itself).
# accel._net: the loopback check the exporter shares with the k8s extender (standard library only).
# accel.integrations.k8s._podresources: the kubelet PodResources client behind --pod-resources-socket
# (imported only when that option is given, or for type checking; it needs grpcio only when it calls).
ALLOWED = (
    "accel.exporter", "accel.model", "accel.discovery", "accel.plugin", "accel.errors", "accel.leak", "accel._net",
    "accel.integrations.k8s._podresources",
)


def test_public_api_is_curated_and_resolves() -> None:
    mod = importlib.import_module("accel.exporter")
    exported = list(mod.__all__)
    assert exported == sorted(exported, key=lambda s: (not s.isupper(), s))
    for name in exported:
        assert getattr(mod, name) is not None, name


def test_the_exporter_imports_only_the_model_discovery_plugin_leak_errors_and_net() -> None:
    bad = []
    for path in sorted((ROOT / "accel" / "exporter").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level:
                target = "accel." + (node.module or "") if node.level == 2 else "accel.exporter." + (node.module or "")
                if not any(target == a or target.startswith(a + ".") for a in ALLOWED):
                    bad.append(f"{path.name}: {target}")
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("accel"):
                bad.append(f"{path.name}: absolute import {node.module}")
    assert not bad, bad
