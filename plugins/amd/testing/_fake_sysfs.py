"""A fake amdgpu sysfs tree (on top of :class:`accel.testing.FakeSysfs`) from a FakeHost.

Lays out, per GPU, the PCI function with its bridges and NUMA node, the amdgpu files under it
(``mem_info_*``, ``gpu_busy_percent``, ``unique_id``, link speed, ``ras/``, ``hwmon/``,
``xgmi_hive_info/``, partition files), ``drm/cardN`` and ``drm/renderD*`` linked from
``class/drm``, ``module/amdgpu/initstate``, and the KFD topology with xGMI io-links.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from accel.testing import FakeSysfs

from ._profiles import FakeGpu, FakeHost

__all__ = ["build_amdgpu_sysfs", "remove_gpu", "remove_gpu_ras"]

_KFD_XGMI = 11
_KFD_PCIE = 2


def _bridges(bus_id: str) -> list[str]:
    b = int(bus_id[5:7], 16)
    r = max(b - 3, 0)
    return [f"0000:{r:02x}:01.0", f"0000:{r + 1:02x}:00.0", f"0000:{r + 2:02x}:00.0"]


def _files(gpu: FakeGpu) -> dict[str, str]:
    speed = {3: "8.0 GT/s PCIe", 4: "16.0 GT/s PCIe", 5: "32.0 GT/s PCIe"}[gpu.pcie_gen]
    files = {
        "mem_info_vram_total": f"{gpu.vram_total}\n",
        "mem_info_vram_used": f"{gpu.vram_used}\n",
        "mem_info_vis_vram_total": f"{gpu.vram_total}\n",
        "gpu_busy_percent": f"{gpu.gfx_activity}\n",
        "mem_busy_percent": f"{gpu.umc_activity}\n",
        "unique_id": f"{gpu.unique_id:016x}\n",
        "revision": f"0x{gpu.rev_id:02x}\n",
        "current_link_speed": speed + "\n",
        "max_link_speed": speed + "\n",
        "current_link_width": f"{gpu.pcie_width}\n",
        "max_link_width": f"{gpu.pcie_width}\n",
        "pcie_replay_count": "0\n",
        "vbios_version": gpu.vbios + "\n",
        "product_name": gpu.market_name + "\n",
        "hwmon/hwmon0/name": "amdgpu\n",
        "hwmon/hwmon0/power1_cap": f"{gpu.power_cap_w * 1_000_000}\n",
        "hwmon/hwmon0/power1_cap_max": f"{gpu.power_cap_max_w * 1_000_000}\n",
        "hwmon/hwmon0/power1_cap_min": f"{gpu.power_cap_min_w * 1_000_000}\n",
        "hwmon/hwmon0/power1_cap_default": f"{gpu.power_cap_default_w * 1_000_000}\n",
    }
    if gpu.serial:
        files["serial_number"] = gpu.serial + "\n"
    mi300 = gpu.gfx.startswith("gfx94")
    files["hwmon/hwmon0/power1_input" if mi300 else "hwmon/hwmon0/power1_average"] = f"{gpu.power_w * 1_000_000}\n"
    sensors = [("junction", gpu.temp_hotspot), ("mem", gpu.temp_vram)]
    if not mi300:
        sensors.insert(0, ("edge", gpu.temp_edge))
    for n, (label, value) in enumerate(sensors, start=1):
        files[f"hwmon/hwmon0/temp{n}_input"] = f"{value * 1000}\n"
        files[f"hwmon/hwmon0/temp{n}_label"] = label + "\n"
        if label == "junction":
            files[f"hwmon/hwmon0/temp{n}_crit"] = f"{gpu.temp_crit * 1000}\n"
            files[f"hwmon/hwmon0/temp{n}_emergency"] = f"{gpu.temp_emergency * 1000}\n"
    if gpu.ecc:
        for block in ("umc", "sdma", "gfx", "mmhub", "pcie_bif", "hdp", "xgmi_wafl"):
            ce, ue, de = gpu.ecc_counts.get(block.upper(), (0, 0, 0))
            files[f"ras/{block}_err_count"] = f"ue: {ue}\nce: {ce}\nde: {de}\n"
        flags = {0: "R", 1: "P", 2: "F"}
        files["ras/gpu_vram_bad_pages"] = "".join(
            f"0x{addr >> 12:08x} : 0x{size:08x} : {flags[status]}\n" for addr, size, status in gpu.bad_pages
        )
        files["ras/features"] = "feature mask: 0x00007fff\n"
    if gpu.xgmi_hive_id:
        files["xgmi_hive_info/xgmi_hive_id"] = f"{gpu.xgmi_hive_id}\n"
        files["xgmi_device_id"] = f"{gpu.xgmi_node_id}\n"
        files["xgmi_physical_id"] = f"{gpu.xgmi_node_id}\n"
    if gpu.compute_partition:
        files["current_compute_partition"] = gpu.compute_partition + "\n"
        files["available_compute_partition"] = "SPX, DPX, QPX, CPX\n"
    if gpu.memory_partition:
        files["current_memory_partition"] = gpu.memory_partition + "\n"
    return files


def build_amdgpu_sysfs(host: FakeHost, root: Path) -> FakeSysfs:
    """Write the fake tree for ``host`` under ``root`` and return the :class:`FakeSysfs`.

    With ``host.driver_live`` False, only the PCI functions exist: no DRM cards, no KFD and
    no ``module/amdgpu`` (the driver is not loaded, the hardware is still on the bus).
    """
    fs = FakeSysfs(root)
    for node, cpus in enumerate(host.numa_cpus):
        fs.add_numa_node(node, cpus, 512 * 2**30)
    dev_dirs: list[Path] = []
    for gpu in host.gpus:
        node = gpu.numa_node if gpu.numa_node < len(host.numa_cpus) else 0
        real = fs.add_device(
            gpu.bus_id,
            vendor=host.pci_vendor,
            device=f"{gpu.device_id:04x}",
            class_code=gpu.pci_class,
            bridges=_bridges(gpu.bus_id),
            numa_node=node,
            cpulist=host.numa_cpus[node],
            subsystem_vendor=host.pci_vendor,
            subsystem_device=f"{gpu.subsystem_id:04x}",
            extra_files=_files(gpu) if host.driver_live else None,
        )
        dev_dirs.append(real)
    if not host.driver_live:
        return fs
    module = root / "module" / "amdgpu"
    (module / "parameters").mkdir(parents=True, exist_ok=True)
    (module / "initstate").write_text("live\n")
    (module / "version").write_text(f"{host.gpus[0].driver_version}\n" if host.gpus else "\n")
    thresholds = {g.bad_page_threshold for g in host.gpus if g.ecc}
    (module / "parameters" / "bad_page_threshold").write_text(
        f"{thresholds.pop() if len(thresholds) == 1 and None not in thresholds else -1}\n"
    )
    drm_class = root / "class" / "drm"
    for n, (gpu, real) in enumerate(zip(host.gpus, dev_dirs, strict=True)):
        card = real / "drm" / f"card{n}"
        card.mkdir(parents=True, exist_ok=True)
        (real / "drm" / f"renderD{128 + n}").mkdir(exist_ok=True)
        os.symlink("../..", card / "device")
        os.symlink(os.path.relpath(card, drm_class), drm_class / f"card{n}")
        del gpu
    _kfd(host, root)
    return fs


def _kfd(host: FakeHost, root: Path) -> None:
    base = root / "class" / "kfd" / "kfd" / "topology" / "nodes"
    ncpu = len(host.numa_cpus)
    for c in range(ncpu):
        d = base / str(c)
        d.mkdir(parents=True, exist_ok=True)
        (d / "gpu_id").write_text("0\n")
        (d / "properties").write_text("cpu_cores_count 48\nsimd_count 0\nlocation_id 0\ndomain 0\n")
    for i, gpu in enumerate(host.gpus):
        node = ncpu + i
        d = base / str(node)
        (d / "io_links").mkdir(parents=True, exist_ok=True)
        (d / "gpu_id").write_text(f"{40000 + i * 1111}\n")
        bus, rest = gpu.bus_id[5:7], gpu.bus_id[8:]
        dev, fn = rest.split(".")
        loc = (int(bus, 16) << 8) | (int(dev, 16) << 3) | int(fn)
        (d / "properties").write_text(
            f"cpu_cores_count 0\nsimd_count {gpu.compute_units * 4}\nlocation_id {loc}\n"
            f"domain {int(gpu.bus_id[:4], 16)}\nunique_id {gpu.unique_id}\n"
        )
        links = [(_KFD_PCIE, gpu.numa_node if gpu.numa_node < ncpu else 0, 20)]
        for j, other in enumerate(host.gpus):
            if j != i and gpu.xgmi_hive_id and other.xgmi_hive_id == gpu.xgmi_hive_id:
                links.append((_KFD_XGMI, ncpu + j, 15))
        for m, (kind, to, weight) in enumerate(links):
            ld = d / "io_links" / str(m)
            ld.mkdir(parents=True, exist_ok=True)
            (ld / "properties").write_text(
                f"type {kind}\nversion_major 0\nversion_minor 0\nnode_from {node}\nnode_to {to}\n"
                f"weight {weight}\nmin_latency 0\nmax_latency 0\nmin_bandwidth 0\nmax_bandwidth 0\n"
            )


def _device_dir(root: Path, bus_id: str) -> Path:
    return (root / "bus" / "pci" / "devices" / bus_id).resolve()


def remove_gpu(host: FakeHost, root: Path, index: int) -> None:
    """GPU ``index`` fell off the bus: its DRM card and render node and its KFD node disappear.

    The PCI function directory stays (what an unresponsive device on a live link looks like
    before a rescan), so an oracle reading ``/sys/bus/pci`` still counts it.
    """
    real = _device_dir(root, host.gpus[index].bus_id)
    link = root / "class" / "drm" / f"card{index}"
    if link.is_symlink():
        link.unlink()
    shutil.rmtree(real / "drm", ignore_errors=True)
    kfd = root / "class" / "kfd" / "kfd" / "topology" / "nodes" / str(len(host.numa_cpus) + index)
    shutil.rmtree(kfd, ignore_errors=True)


def remove_gpu_ras(host: FakeHost, root: Path, index: int) -> None:
    """GPU ``index`` has no RAS support: the driver creates no ``ras/`` directory for it."""
    shutil.rmtree(_device_dir(root, host.gpus[index].bus_id) / "ras", ignore_errors=True)
