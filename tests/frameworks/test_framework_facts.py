"""Framework facts, read from each backend's binding, against Ray's managers and vLLM's platforms.

``upstream.json`` holds what the upstream files declare (with repo@commit:path sources).  Every
disagreement is either fixed in the plugin's binding or listed in :data:`ALLOWED` with the
reason that ``docs/frameworks.md`` gives; a new disagreement, or a listed one that went away,
fails here.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from accel.integrations.frameworks import (
    REFERENCE_SCENARIOS,
    FrameworkFacts,
    markdown_table,
    read_facts,
)

ROOT = Path(__file__).resolve().parents[2]
UPSTREAM = json.loads((Path(__file__).with_name("upstream.json")).read_text(encoding="utf-8"))
DOC = ROOT / "docs" / "frameworks.md"

#: (backend, upstream, field) -> why accel's binding differs on purpose.
ALLOWED: dict[tuple[str, str, str], str] = {
    ("amd", "vllm", "dist_backend"): (
        "vLLM names torch.distributed's backend ('nccl', which ROCm builds of torch run on RCCL); "
        "accel's collective_backend names the vendor library, rccl"
    ),
    ("amd", "vllm", "device_control_env_var"): (
        "vLLM's ROCm platform copies HIP_VISIBLE_DEVICES into CUDA_VISIBLE_DEVICES at import; Ray's AMD "
        "manager sets HIP_VISIBLE_DEVICES, which both honour"
    ),
    ("metax", "vllm", "dist_backend"): (
        "vLLM-metax uses torch's 'nccl' backend name over MACA's NCCL-compatible library; accel reads no "
        "collective library name for MetaX and guesses none"
    ),
    ("kunlunxin", "vllm", "device_type"): (
        "vLLM-Kunlun runs Kunlunxin's torch build that registers the device as 'cuda'; other stacks "
        "(PaddlePaddle) call it 'xpu', so accel leaves torch_device_type unknown"
    ),
    ("kunlunxin", "vllm", "dist_backend"): (
        "vLLM-Kunlun uses torch's 'nccl' backend name; the library underneath is BKCL, which accel names"
    ),
}

_RAY_FIELDS = {"resource_name": "ray_resource", "visible_env": "ray_visible_env"}
_VLLM_FIELDS = {
    "device_type": "vllm_device_type",
    "dist_backend": "collective_backend",
    "device_control_env_var": "vllm_device_control_env_var",
    "ray_device_key": "ray_resource",
}


@pytest.fixture(scope="module")
def facts() -> dict[str, FrameworkFacts]:
    return {row.backend: row for row in read_facts()}


def disagreements(facts: dict[str, FrameworkFacts]) -> dict[tuple[str, str, str], tuple[object, object]]:
    out: dict[tuple[str, str, str], tuple[object, object]] = {}
    for kind, fields in (("ray", _RAY_FIELDS), ("vllm", _VLLM_FIELDS)):
        for entry in UPSTREAM[kind]:
            row = facts[entry["backend"]].as_dict()
            for theirs, ours in fields.items():
                if entry.get(theirs) is None:
                    continue  # the upstream file does not declare it
                if row[ours] != entry[theirs]:
                    out[(entry["backend"], kind, theirs)] = (row[ours], entry[theirs])
    return out


def test_every_vendor_is_read_from_its_backend(facts: dict[str, FrameworkFacts]) -> None:
    assert set(facts) == set(REFERENCE_SCENARIOS)
    for row in facts.values():
        assert row.visible_env is not None, row  # every vendor now has a visibility variable
        assert row.index_scheme in {"uuid", "index", "logic id"}, row


def test_known_rows(facts: dict[str, FrameworkFacts]) -> None:
    ascend, nvidia, enflame = facts["ascend"], facts["nvidia"], facts["enflame"]
    assert (ascend.visible_env, ascend.index_scheme, ascend.ray_resource) == (
        "ASCEND_RT_VISIBLE_DEVICES", "logic id", "NPU")
    assert (nvidia.index_scheme, nvidia.torch_device_type, nvidia.collective_backend) == ("uuid", "cuda", "nccl")
    # Toolkit backends carry a Ray resource now (Ray's MetaX manager; the vLLM platforms' ray_device_key).
    assert {facts[n].ray_resource for n in ("metax", "mthreads", "kunlunxin", "enflame")} == {"GPU"}
    assert facts["iluvatar"].ray_resource is None  # nothing names one
    # The gap the issue names, closed from vllm-gcu's platform: TOPS_VISIBLE_DEVICES, gcu, eccl.
    assert (enflame.visible_env, enflame.torch_device_type, enflame.collective_backend) == (
        "TOPS_VISIBLE_DEVICES", "gcu", "eccl")


def test_every_upstream_fact_has_a_source() -> None:
    pattern = re.compile(r"^[\w.-]+/[\w.-]+@[0-9a-f]{40}:\S+")
    for kind in ("ray", "vllm", "other"):
        for entry in UPSTREAM[kind]:
            assert pattern.match(entry["source"]), entry
            assert entry["backend"] in REFERENCE_SCENARIOS


def test_disagreements_are_exactly_the_explained_ones(facts: dict[str, FrameworkFacts]) -> None:
    found = disagreements(facts)
    assert set(found) == set(ALLOWED), {k: found.get(k) for k in set(found) ^ set(ALLOWED)}


def test_enflame_collective_library_matches_vllm_gcu(facts: dict[str, FrameworkFacts]) -> None:
    (gcu,) = [e for e in UPSTREAM["vllm"] if e["backend"] == "enflame"]
    assert facts["enflame"].collective_backend == gcu["collective_library"]


def test_docs_explain_every_disagreement() -> None:
    text = DOC.read_text(encoding="utf-8")
    for (backend, kind, fld), why in ALLOWED.items():
        assert f"| `{backend}` | {kind} | `{fld}` | {why} |" in text, (backend, kind, fld)


def test_docs_table_is_the_generated_one(facts: dict[str, FrameworkFacts]) -> None:
    text = DOC.read_text(encoding="utf-8")
    start, end = "<!-- generated: frameworks table -->\n", "<!-- end generated -->"
    assert start in text and end in text
    table = text.split(start, 1)[1].split(end, 1)[0]
    assert table == markdown_table(facts[name] for name in REFERENCE_SCENARIOS)
