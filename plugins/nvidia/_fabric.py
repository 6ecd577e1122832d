"""NVLink cliques from the fabric manager's registration (``nvmlDeviceGetGpuFabricInfoV``).

NOT_SUPPORTED (no fabric: PCIe, consumer boards, single-GPU hosts, non-MNNVL H100) and a driver
without the call are facts and say nothing.  Any other failure, a registration that has not
completed, or a completed one whose probe failed is a typed :class:`Problem` in the inventory:
the clique domain is missing and the scheduler must be able to tell.
"""

from __future__ import annotations

import ctypes
from typing import Any

from ...errors import AccelError, DeviceLostError
from ...model import Device, Domain, DomainKind, Problem, ProblemKind
from ._handles import NvmlPart
from ._nvml import C, nvml_code_of

__all__ = ["Fabric"]


class Fabric(NvmlPart):
    """Reads each GPU's fabric registration and groups the GPUs into cliques."""

    def info(self, h: Any) -> Any:
        """The GPU's fabric registration (``nvmlGpuFabricInfo_v2`` layout), or ``None``: no fabric API.

        NVML's C signature is ``nvmlDeviceGetGpuFabricInfoV(nvmlDevice_t, nvmlGpuFabricInfoV_t *)``
        and the nvidia-ml-py wrapper forwards its second argument to C unchanged: the caller passes
        ``byref(struct)`` with ``struct.version`` set (a struct passed by value reaches C as a
        garbage pointer).  Drivers or bindings without the versioned call fall back to the
        unversioned ``nvmlDeviceGetGpuFabricInfo`` (R530+, deprecated in 13.x) with its own struct.
        """
        lib = self._nv.library
        missing = self._handles.missing
        if (self._nv.has("nvmlDeviceGetGpuFabricInfoV") and "nvmlDeviceGetGpuFabricInfoV" not in missing
                and hasattr(lib, "c_nvmlGpuFabricInfo_v2_t")):
            data = self._nv.new("c_nvmlGpuFabricInfo_v2_t")
            data.version = C.GPU_FABRIC_INFO_V2
            try:
                self._nv.call("nvmlDeviceGetGpuFabricInfoV", h, ctypes.byref(data))
                return data
            except AccelError as err:
                if nvml_code_of(err) != C.ERROR_FUNCTION_NOT_FOUND:
                    raise
                missing.add("nvmlDeviceGetGpuFabricInfoV")
        if self._nv.has("nvmlDeviceGetGpuFabricInfo") and hasattr(lib, "c_nvmlGpuFabricInfo_t"):
            legacy = self._nv.new("c_nvmlGpuFabricInfo_t")
            self._nv.call("nvmlDeviceGetGpuFabricInfo", h, ctypes.byref(legacy))
            return legacy
        return None

    def cliques(self, devices: list[Device], idx: dict[str, int]) -> tuple[list[Domain], list[Problem]]:
        """NVLink cliques (cluster UUID + clique id), and a problem per GPU whose clique is unknown."""
        groups: dict[str, list[str]] = {}
        problems: list[Problem] = []
        fn = "nvmlDeviceGetGpuFabricInfoV"

        def problem(dev: Device, message: str, code: str) -> None:
            problems.append(Problem(kind=ProblemKind.FIELD, backend="nvidia", message=message, code=code,
                                    command=fn, device_id=dev.id))

        for dev in devices:
            if idx[dev.id] in self._lost:
                continue
            try:
                data = self.info(self._handle(idx[dev.id]))
            except DeviceLostError:
                continue
            except AccelError as err:
                if nvml_code_of(err) in (C.ERROR_NOT_SUPPORTED, C.ERROR_FUNCTION_NOT_FOUND):
                    continue
                problem(dev, f"fabric (NVLink clique) not read: {err.message}", err.code)
                continue
            if data is None:
                continue
            state, status = int(data.state), int(data.status)
            if state == C.GPU_FABRIC_STATE_NOT_SUPPORTED:
                continue
            if state != C.GPU_FABRIC_STATE_COMPLETED:
                problem(dev, f"fabric registration not complete (state {state}): NVLink clique unknown",
                        "device.fabric-not-ready")
                continue
            if status != C.SUCCESS:
                problem(dev, f"fabric registration failed (NVML error {status}): NVLink clique unknown",
                        "device.fabric-failed")
                continue
            cluster = bytes(data.clusterUuid)
            if not any(cluster):
                continue  # non-MNNVL hosts may report COMPLETED with an all-zero cluster UUID
            hexid = cluster.hex()
            key = f"{hexid[:8]}-{hexid[8:12]}-{hexid[12:16]}-{hexid[16:20]}-{hexid[20:]}/{int(data.cliqueId)}"
            groups.setdefault(key, []).append(dev.id)
        domains = [Domain(id=f"nvidia:clique-{k}", kind=DomainKind.NVLINK_CLIQUE, members=tuple(m))
                   for k, m in groups.items()]
        return domains, problems
