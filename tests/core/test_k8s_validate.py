"""Everything `accel dra` prints passes `kubernetes-validate --strict` for Kubernetes 1.34 and 1.37.

kubernetes-validate 1.37.0 ships the published OpenAPI schemas of 1.25 to 1.37; both versions
here have ``sharedCounters`` / ``consumesCounters`` in resource.k8s.io/v1, so both modes are
checked against both.  These are schemas only: no API server runs here, so cross-field rules
the server enforces (counter sets in slices of their own, name uniqueness in a pool) are
checked by tests/core/test_dra_safety.py instead.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from accel.integrations.k8s import claim_templates, device_classes, resource_slices
from accel.model import HostInventory
from accel.plugin import BackendConfig
from accel.sim import PLUGIN, list_profiles

kv = pytest.importorskip("kubernetes_validate")
amd = pytest.importorskip("accel.plugins.amd")

VERSIONS = ["1.34.0", "1.37.0"]


def _inventories() -> list[tuple[str, HostInventory]]:
    out = [(p, PLUGIN.open(BackendConfig(options={"profile": p})).inventory()) for p in list_profiles()]
    for s in ("mi300x-8-cpx", "mi300x-8"):
        with amd.PLUGIN.open(BackendConfig(options={"scenario": s})) as b:
            out.append((f"amd:{s}", b.inventory()))
    return out


CASES = _inventories()


def _objects(inv: HostInventory, partitionable: bool) -> list[dict[str, Any]]:
    return [
        *resource_slices(inv, partitionable=partitionable).slices,
        *device_classes(inv, partitionable=partitionable),
        *claim_templates(inv, partitionable=partitionable),
    ]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("partitionable", [False, True], ids=["default", "partitionable"])
@pytest.mark.parametrize(("name", "inv"), CASES, ids=[c[0] for c in CASES])
def test_strict_schema(name: str, inv: HostInventory, partitionable: bool, version: str) -> None:
    objs = _objects(inv, partitionable)
    assert {o["kind"] for o in objs} == {"ResourceSlice", "DeviceClass", "ResourceClaimTemplate"}
    if partitionable and inv.partitions:
        assert any("sharedCounters" in o.get("spec", {}) for o in objs)
    for obj in objs:
        kv.validate(obj, version, strict=True)  # raises ValidationError


def test_strict_rejects_what_it_should() -> None:
    """The validator is not a no-op: an unknown field fails --strict."""
    obj = resource_slices(CASES[0][1], partitionable=True).slices[0]
    bad = json.loads(json.dumps(obj))
    bad["spec"]["sharedCounter"] = bad["spec"].pop("sharedCounters")
    with pytest.raises(kv.ValidationError):
        kv.validate(bad, "1.37.0", strict=True)


@pytest.mark.parametrize("version", VERSIONS)
def test_the_command_line_validator_too(tmp_path: Path, version: str) -> None:
    inv = dict(CASES)["amd:mi300x-8-cpx"]
    files = []
    for i, obj in enumerate(_objects(inv, True)[:12]):
        f = tmp_path / f"{i}.json"
        f.write_text(json.dumps(obj))
        files.append(str(f))
    exe = Path(sys.executable).with_name("kubernetes-validate")
    if not exe.exists():
        pytest.skip("kubernetes-validate console script not installed")
    proc = subprocess.run([str(exe), "--strict", "-k", version, *files], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
