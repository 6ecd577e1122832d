"""The concise-table parser (shared rocm-smi lineage) reads the ROCm 6.1+ two-line layout.

Sample: ``tests/fixtures/amd/rocm-smi_rocm-smi-lib7.5.0_mi300x_1gpu_concise.txt`` (public issue
ROCm/legacy-rocm-build#5231).  Before this layout was known, the parser raised "no concise table".
"""

from __future__ import annotations

from pathlib import Path

from accel.plugins.hygon._parse import parse_concise
from accel.toolkit import ParseContext

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "amd"


def test_mi300x_two_line_header_values() -> None:
    text = (FIX / "rocm-smi_rocm-smi-lib7.5.0_mi300x_1gpu_concise.txt").read_text(encoding="utf-8")
    rows, errors = parse_concise(text, ParseContext("rocm-smi", "rocm-smi"))
    assert errors == []
    (row,) = rows  # the units line "(DID, GUID) (Junction) ..." is not a device
    assert row.index == 0
    assert row.temperature_celsius == 39.0  # 39.0°C (Junction)
    assert row.power_watts == 191.0  # 191.0W (Socket)
    assert row.power_cap_watts == 750.0
    assert row.fan_ratio == 0.0
    assert row.vram_used_ratio == 0.95
    assert row.utilization_ratio == 0.0
    assert row.performance_level == "auto"
