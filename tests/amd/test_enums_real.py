"""The fake's partition enums carry amdsmi 7.0.2's values (issue 13, finding 8).

The real values (``amdsmi_wrapper.py`` of amdsmi 7.0.2, from ``amdsmi.h``)::

    AMDSMI_COMPUTE_PARTITION_INVALID = 0, SPX = 1, DPX = 2, TPX = 3, QPX = 4, CPX = 5
    AMDSMI_MEMORY_PARTITION_UNKNOWN = 0, NPS1 = 1, NPS2 = 2, NPS4 = 4, NPS8 = 8

The plugin reads partitions by *name* (``amdsmi_get_gpu_compute_partition`` returns the string
``"SPX"``...), so it never depends on these numbers; the fake must still not teach a wrong one.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
from pathlib import Path

import pytest

from accel.plugins.amd.testing import make_fake_amdsmi, scenario

COMPUTE = {"INVALID": 0, "SPX": 1, "DPX": 2, "TPX": 3, "QPX": 4, "CPX": 5}
MEMORY = {"UNKNOWN": 0, "NPS1": 1, "NPS2": 2, "NPS4": 4, "NPS8": 8}


def _fake():  # type: ignore[no-untyped-def]
    return make_fake_amdsmi(scenario("mi300x-8"))


def test_fake_compute_partition_values_are_amdsmi_7_0_2() -> None:
    enum = _fake().AmdSmiComputePartitionType
    assert {m.name: int(m.value) for m in enum} == COMPUTE


def test_fake_memory_partition_values_are_amdsmi_7_0_2() -> None:
    enum = _fake().AmdSmiMemoryPartitionType
    assert {m.name: int(m.value) for m in enum} == MEMORY


def _wrapper_constants() -> dict[str, int] | None:
    """``AMDSMI_*_PARTITION_*`` constants of an installed amdsmi, read without importing it
    (the real package does not import without ``libamd_smi.so``)."""
    try:
        spec = importlib.util.find_spec("amdsmi")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        wrapper = Path(location) / "amdsmi_wrapper.py"
        if wrapper.is_file():
            out: dict[str, int] = {}
            for node in ast.parse(wrapper.read_text(encoding="utf-8")).body:
                if (isinstance(node, ast.Assign) and len(node.targets) == 1
                        and isinstance(node.targets[0], ast.Name)
                        and "_PARTITION_" in node.targets[0].id
                        and isinstance(node.value, ast.Constant) and isinstance(node.value.value, int)):
                    out[node.targets[0].id] = node.value.value
            return out
    return None


def test_fake_matches_installed_amdsmi() -> None:
    try:
        real = importlib.import_module("amdsmi")
    except Exception:  # noqa: BLE001 - the real package raises various errors without the library
        real = None
    fake = _fake()
    if real is not None and hasattr(real, "AmdSmiComputePartitionType"):
        for name in ("AmdSmiComputePartitionType", "AmdSmiMemoryPartitionType"):
            assert {m.name: int(m.value) for m in getattr(fake, name)} == {
                m.name: int(m.value) for m in getattr(real, name)}
        return
    constants = _wrapper_constants()
    if not constants:
        pytest.skip("the real amdsmi package is not installed (pip install amdsmi==7.0.2 to compare)")
    for name, value in COMPUTE.items():
        assert constants.get(f"AMDSMI_COMPUTE_PARTITION_{name}") == value
        assert int(fake.AmdSmiComputePartitionType[name]) == value
    for name, value in MEMORY.items():
        assert constants.get(f"AMDSMI_MEMORY_PARTITION_{name}") == value
        assert int(fake.AmdSmiMemoryPartitionType[name]) == value
