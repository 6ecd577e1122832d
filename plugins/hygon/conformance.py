"""The replay scenarios the conformance kit certifies ``hygon`` on (a test facility).

Each shipped replay (verbatim ``hy-smi`` / DTK ``rocm-smi`` samples) runs with a fake sysfs
holding the DCUs' PCI functions and amdgpu-style DRM files, as on a real host: the concise
table prints no bus ids and no absolute memory.  hy-smi starts one process per command and a
snapshot runs at most 4 (JSON, concise, rocminfo, topology).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from accel.plugin import BackendConfig
from accel.toolkit import scenario_path

__all__ = ["CONFORMANCE_SCENARIOS"]

BUDGET = 4

_HOSTS: dict[str, tuple[str, int, dict[str, Any]]] = {
    "k100ai-1dcu": (
        "1x K100_AI, DTK 24.04.3 rocm-smi --json.",
        1,
        {"unique_ids": (0x7100FA8866904061,), "vram_bytes": 65520 * 2**20},
    ),
    "z100l-1dcu": (
        "1x Z100L, rocm-smi --json.",
        1,
        {"unique_ids": (0xA000000000000000,), "device_id": 0x55B7, "market_name": "Z100L", "vram_bytes": 32752 * 2**20},
    ),
    "k100-8dcu": ("8x K100 64 GB, hy-smi concise table.", 8, {"market_name": "K100", "vram_bytes": 64 * 2**30}),
    "dtk23.10-4dcu": ("4x DCU, DTK 23.10 rocm-smi concise table.", 4, {"market_name": "DCU", "vram_bytes": 32 * 2**30}),
    "k100-8dcu-faults": (
        "k100-8dcu plus what only the ROCm SMI library sees (native.toml): ECC errors on DCU 2, xGMI 0-1.",
        8,
        {"market_name": "K100", "vram_bytes": 64 * 2**30},
    ),
}


_NATIVE_KIT = ("k100ai-1dcu", "k100-8dcu-faults")


def _factory(name: str, count: int, kw: dict[str, Any], read: str = "auto") -> Callable[[Path], BackendConfig]:
    def config(tmp_path: Path) -> BackendConfig:
        from accel.tools import ReplayRunner

        from .testing import build_hygon_sysfs

        root = build_hygon_sysfs(tmp_path / "sys", count, **kw)
        return BackendConfig(
            runner=ReplayRunner(scenario_path(__package__ or "accel.plugins.hygon", name)),
            sysfs_root=root,
            options={"read": read},
        )

    return config


def _scenarios() -> dict[str, Any]:
    from accel.conformance import Scenario

    out: dict[str, Any] = {
        # The concise-table replays read no health (no RAS/ECC columns): the kit skips the
        # NOT_SUPPORTED row there, as every DCU is already unknown before the injection.
        name: Scenario(name=name, config=_factory(name, count, kw), snapshot_budget=BUDGET, description=text)
        for name, (text, count, kw) in _HOSTS.items()
    }
    # Hosts read through the fake librocm_smi64.so rendered from the replay: the JSON + rocminfo
    # one and the native-only one (the differential test covers every replay; the kit on each
    # would double this plugin's share of CI time).
    out.update(
        {
            f"{name}@native": Scenario(
                name=f"{name}@native",
                config=_factory(name, count, kw, read="native"),
                snapshot_budget=BUDGET,
                description=f"native path (rsmi_*): {text}",
            )
            for name, (text, count, kw) in _HOSTS.items()
            if name in _NATIVE_KIT
        }
    )
    out["k100ai-1dcu-bare"] = Scenario(
        name="k100ai-1dcu-bare",
        options={"scenario": "k100ai-1dcu"},
        snapshot_budget=BUDGET,
        xfail={"inventory.ids-match-pci": "a replay without sysfs has no PCI bus ids (rocm-smi --json prints none)"},
        description="The K100_AI replay alone, without sysfs: no PCI information.",
    )
    return out


CONFORMANCE_SCENARIOS: dict[str, Any] = _scenarios()
