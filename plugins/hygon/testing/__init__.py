"""Test facilities for the Hygon plugin: a fake sysfs of Hygon DCUs (PCI vendor ``1d94``).

Hygon's kernel driver is a fork of amdgpu and exposes the same DRM files
(``mem_info_vram_total``, ``unique_id``, ``hwmon/``...), so the tree is built by the AMD fake
(:func:`accel.plugins.amd.testing.build_amdgpu_sysfs`) with the Hygon vendor id.  Pair it with
a replay runner over the recorded tool outputs::

    root = build_hygon_sysfs(tmp_path, count=8, vram_bytes=64 * 2**30)
    config = BackendConfig(runner=ReplayRunner(replay_dir), sysfs_root=root)
"""

from __future__ import annotations

from pathlib import Path

from accel.plugins.amd.testing import FakeGpu, FakeHost, build_amdgpu_sysfs

__all__ = ["build_hygon_sysfs", "hygon_host"]


def hygon_host(
    count: int,
    *,
    name: str = "hygon",
    device_id: int = 0x6210,
    market_name: str = "K100_AI",
    vram_bytes: int = 64 * 2**30,
    vram_used_bytes: int = 2 * 2**20,
    unique_ids: tuple[int, ...] = (),
) -> FakeHost:
    """A host of ``count`` DCUs on two NUMA nodes; ``unique_ids`` default to distinct values."""
    gpus = []
    for i in range(count):
        bus = f"0000:{0x11 + i * 0x20:02x}:00.0"
        uid = unique_ids[i] if i < len(unique_ids) else 0x1D94000000000000 + i
        gpus.append(
            FakeGpu(
                bus_id=bus,
                market_name=market_name,
                device_id=device_id,
                unique_id=uid,
                uuid="",
                gfx="gfx928",
                compute_units=120,
                vram_total=vram_bytes,
                vram_used=vram_used_bytes,
                numa_node=0 if i < max(count // 2, 1) else 1,
                vram_type="HBM2E",
                form_factor="PCIE",
                power_cap_w=300,
                power_cap_default_w=300,
                power_cap_max_w=300,
                ecc=False,
                bad_page_threshold=None,
                compute_partition=None,
                memory_partition=None,
                pcie_gen=4,
                serial="",
                driver_version="6.3.8-V1.5.2",
            )
        )
    return FakeHost(name, tuple(gpus), numa_cpus=("0-31", "32-63"), pci_vendor="1d94",
                    description=f"{count} Hygon DCU(s) in sysfs")


def build_hygon_sysfs(root: Path, count: int, **kw: object) -> Path:
    """Write the fake tree of :func:`hygon_host` ``(count, **kw)`` under ``root``; returns ``root``."""
    build_amdgpu_sysfs(hygon_host(count, **kw), root)  # type: ignore[arg-type]
    return root
