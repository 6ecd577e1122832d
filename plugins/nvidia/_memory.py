"""A GPU's framebuffer: ``nvmlDeviceGetMemoryInfo`` v2 (reserved apart), v1 on older drivers."""

from __future__ import annotations

from typing import Any

from ...errors import AccelError, DeviceLostError
from ...model import MemoryKind, MemoryRegion
from ._handles import NvmlPart, Read
from ._nvml import C, nvml_code_of

__all__ = ["UNREAD", "MemoryReader"]

#: ECC mode not read (a narrowed read without errors or health): the memory's ECC flags stay unknown.
UNREAD: Any = object()


class MemoryReader(NvmlPart):
    """Reads one GPU's memory region, with the ECC flags of an ``nvmlDeviceGetEccMode`` answer."""

    def read(self, r: Read, h: Any, kind: MemoryKind, ecc: Any) -> MemoryRegion:
        """``ecc``: the ECC mode answer, ``None`` (no ECC) or :data:`UNREAD` (flags unknown)."""
        mem = None
        v2 = False
        try:
            mem = self._nv.call("nvmlDeviceGetMemoryInfo", h, version=C.NVML_MEMORY_V2)
            v2 = True
        except DeviceLostError:
            if not r.tolerate_lost:
                raise
            r.lost = True
        except AccelError as err:
            if nvml_code_of(err) in (C.ERROR_FUNCTION_NOT_FOUND, 25):  # R470: no _v2 symbol
                mem = self._get(r, "memory.total_bytes", "nvmlDeviceGetMemoryInfo", h)
            elif nvml_code_of(err) == C.ERROR_NOT_SUPPORTED:
                r.unsupported.add("memory.total_bytes")
        ecc_kw: dict[str, Any] = {} if ecc is UNREAD else {"ecc_supported": ecc is not None}
        if ecc is not None and ecc is not UNREAD:
            ecc_kw.update(ecc_enabled=bool(ecc[0]), ecc_pending=bool(ecc[1]) != bool(ecc[0]))
        if mem is None:
            return MemoryRegion(kind=kind, **ecc_kw)
        total = int(mem.total)
        if v2:
            reserved = int(mem.reserved)
            return MemoryRegion(kind=kind, total_bytes=total, usable_bytes=total - reserved,
                                used_bytes=int(mem.used), reserved_bytes=reserved, **ecc_kw)
        # v1: on R510+ "used" includes the reserved memory, which v1 cannot separate.
        return MemoryRegion(kind=kind, total_bytes=total, used_bytes=int(mem.used), **ecc_kw)
