"""Build a fake ``/sys`` in a directory, shaped like the real one.

Devices live under ``devices/pci<dom>:<bus>/<root port>/<bridge>.../<bdf>`` and are linked from
``bus/pci/devices/<bdf>``, exactly as the kernel lays them out, so code that resolves the link
to find the bridge path works unchanged.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

__all__ = ["FakeSysfs"]


class FakeSysfs:
    """A writable fake sysfs rooted at ``root`` (pass ``root`` as a backend's ``sysfs_root``)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        (self.root / "bus" / "pci" / "devices").mkdir(parents=True, exist_ok=True)
        (self.root / "devices" / "system" / "node").mkdir(parents=True, exist_ok=True)
        (self.root / "class" / "drm").mkdir(parents=True, exist_ok=True)

    def add_numa_node(self, node: int, cpulist: str, memory_bytes: int | None = None) -> None:
        d = self.root / "devices" / "system" / "node" / f"node{node}"
        d.mkdir(parents=True, exist_ok=True)
        (d / "cpulist").write_text(cpulist + "\n")
        if memory_bytes is not None:
            (d / "meminfo").write_text(f"Node {node} MemTotal:       {memory_bytes // 1024} kB\n")

    def add_device(
        self,
        bus_id: str,
        *,
        vendor: str,
        device: str = "0000",
        class_code: str = "0x030200",
        bridges: Sequence[str] = (),
        pcie_root: str | None = None,
        numa_node: int = -1,
        cpulist: str | None = None,
        subsystem_vendor: str | None = None,
        subsystem_device: str | None = None,
        physfn: str | None = None,
        extra_files: dict[str, str] | None = None,
    ) -> Path:
        """Create a PCI function; ``bridges`` are the bus ids from the root port down.

        ``pcie_root`` defaults to ``pci<domain>:<bus of the first bridge>`` (or of the device).
        Returns the device's real directory (write vendor-specific files into it).
        """
        first = bridges[0] if bridges else bus_id
        root = pcie_root or f"pci{first[:4]}:{first[5:7]}"
        real = self.root / "devices" / root
        for hop in bridges:
            real = real / hop
            real.mkdir(parents=True, exist_ok=True)
            (real / "vendor").write_text("0x8086\n")
            (real / "class").write_text("0x060400\n")
        real = real / bus_id
        real.mkdir(parents=True, exist_ok=True)
        (real / "vendor").write_text(f"0x{vendor}\n")
        (real / "device").write_text(f"0x{device}\n")
        (real / "class").write_text(f"{class_code}\n")
        (real / "numa_node").write_text(f"{numa_node}\n")
        if cpulist is not None:
            (real / "local_cpulist").write_text(cpulist + "\n")
        if subsystem_vendor:
            (real / "subsystem_vendor").write_text(f"0x{subsystem_vendor}\n")
        if subsystem_device:
            (real / "subsystem_device").write_text(f"0x{subsystem_device}\n")
        for name, text in (extra_files or {}).items():
            target = real / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
        link = self.root / "bus" / "pci" / "devices" / bus_id
        if not link.exists():
            os.symlink(os.path.relpath(real, link.parent), link)
        if physfn is not None:
            os.symlink(os.path.relpath(self.root / "bus" / "pci" / "devices" / physfn, real), real / "physfn")
        return real

    def add_device_node(self, dev_root: Path, name: str) -> Path:
        """Create an empty file standing for ``/dev/<name>`` under ``dev_root``."""
        path = Path(dev_root) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
        return path

    def dual_socket_server(
        self,
        vendor: str,
        device: str,
        *,
        gpus_per_switch: int = 2,
        switches_per_socket: int = 2,
        class_code: str = "0x030200",
    ) -> list[str]:
        """A typical 8-GPU, 2-socket layout: 2 sockets x 2 PCIe switches x 2 GPUs.

        Returns the GPU bus ids in order.  Socket 0 is NUMA node 0 (CPUs 0-23,48-71) on root
        complexes ``pci0000:15``/``pci0000:36``; socket 1 is node 1 (24-47,72-95).
        """
        self.add_numa_node(0, "0-23,48-71", 256 * 2**30)
        self.add_numa_node(1, "24-47,72-95", 256 * 2**30)
        roots = [(0, ["15", "36"]), (1, ["97", "b8"])]
        ids: list[str] = []
        for node, buses in roots:
            cpus = "0-23,48-71" if node == 0 else "24-47,72-95"
            for sw, rbus in enumerate(buses[:switches_per_socket]):
                root_port = f"0000:{rbus}:01.0"
                b = int(rbus, 16)
                upstream = f"0000:{b + 1:02x}:00.0"
                for g in range(gpus_per_switch):
                    downstream = f"0000:{b + 2:02x}:{g * 8:02x}.0"
                    gpu = f"0000:{b + 3 + g:02x}:00.0"
                    self.add_device(
                        gpu,
                        vendor=vendor,
                        device=device,
                        class_code=class_code,
                        bridges=[root_port, upstream, downstream],
                        numa_node=node,
                        cpulist=cpus,
                    )
                    ids.append(gpu)
                del sw
        return ids
