"""AMD: a real ``amd-smi static`` text output for an Instinct MI350X (gfx950).

The AMD plugin does not parse amd-smi text output, so this only pins the stored fixture (its
provenance is in tests/fixtures/SOURCES.md): present, the SKU, and the values a person reads.
"""

from __future__ import annotations

from pathlib import Path

SAMPLE = (
    Path(__file__).resolve().parents[1]
    / "fixtures"
    / "amd"
    / "amd-smi-static_mi350x_gpu0_rocm-systems-2987_partial.txt"
)


def test_mi350x_amd_smi_static_sample_is_stored() -> None:
    text = SAMPLE.read_text(encoding="utf-8")
    lines = text.splitlines()
    assert lines[0].startswith("$ amd-smi static ")
    assert "        MARKET_NAME: AMD Instinct MI350X" in lines
    assert "        DEVICE_ID: 0x75a0" in lines
    assert "        TARGET_GRAPHICS_VERSION: gfx950" in lines
    assert "        BDF: 0000:05:00.0" in lines
    assert "        PRODUCT_NAME: AMD Instinct MI350 OAM" in lines
    # Partial: GPU 0 only, cut after the RAS block (no VBIOS/VRAM block, no GPU 1).
    assert text.count("GPU: ") == 1 and "VRAM:" not in text
