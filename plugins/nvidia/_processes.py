"""The processes on a GPU (compute and graphics), attributed to their MIG instance.

NVML reports host-namespace PIDs even inside containers (the driver is not pid-namespace aware):
a pid missing from our ``/proc`` is another namespace's, named ``None``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...model import Partition, ProcessUsage
from ._events import NOT_ATTRIBUTED
from ._handles import Handles, NvmlPart, Read
from ._nvml import C
from ._static import Static

__all__ = ["Processes"]


class Processes(NvmlPart):
    """Reads one GPU's processes; names come from ``proc_root`` (``/proc`` unless configured)."""

    def __init__(self, handles: Handles, proc_root: Path) -> None:
        super().__init__(handles)
        self._proc_root = proc_root

    def read(self, st: Static, h: Any, parts: list[Partition]) -> list[ProcessUsage]:
        out: list[ProcessUsage] = []
        r = Read()
        by_gi = {(p.gi_id, p.ci_id): p.id for p in parts}
        for fn, legacy in (("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetComputeRunningProcesses_v2"),
                           ("nvmlDeviceGetGraphicsRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses_v2")):
            procs = self._get(r, None, fn, h, fallback=legacy)
            for p in procs or ():
                pid = int(p.pid)
                used = getattr(p, "usedGpuMemory", None)
                if used is not None and int(used) >= C.VALUE_NOT_AVAILABLE_ULL:
                    used = None
                gi = getattr(p, "gpuInstanceId", NOT_ATTRIBUTED)
                ci = getattr(p, "computeInstanceId", NOT_ATTRIBUTED)
                partition = by_gi.get((gi, ci)) or by_gi.get((gi, 0)) if gi != NOT_ATTRIBUTED else None
                present = (self._proc_root / str(pid)).is_dir()
                out.append(ProcessUsage(pid=pid, device_id=st.device_id, partition_id=partition,
                                        memory_bytes=int(used) if used is not None else None,
                                        name=self._name(pid) if present else None, pid_in_namespace=present))
        return out

    def _name(self, pid: int) -> str | None:
        try:
            return (self._proc_root / str(pid) / "comm").read_text().strip() or None
        except OSError:
            return None
