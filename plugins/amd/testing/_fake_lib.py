"""A fake ``libamd_smi.so`` at the ctypes boundary, for pyrsmi's ctypes mode.

pyrsmi calls ``rocm_lib.<C symbol>(...)`` with ctypes arguments and reads results back through
``byref`` pointers.  This object provides those symbols as *plain functions stored as instance
attributes* (never bound methods): each returns an ``amdsmi_status_t`` int and writes outputs
through ``byref(x)._obj``.  A symbol that is missing raises ``AttributeError``, as a
``CDLL`` does for a symbol the library lacks (pyrsmi swallows it into ``-1`` for most calls).
"""

from __future__ import annotations

from typing import Any

from ._fake_amdsmi import STATUS
from ._profiles import FakeHost

__all__ = ["FakeAmdSmiLib"]

_HANDLE_BASE = 0x2000


def _bdf_uint(bus_id: str) -> int:
    # amdsmi_bdf_t: function 3 bits, device 5, bus 8, domain 48 (from bit 16).
    dom, bus, rest = bus_id.split(":")
    dev, fn = rest.split(".")
    return (int(dom, 16) << 16) | (int(bus, 16) << 8) | (int(dev, 16) << 3) | int(fn)


class FakeAmdSmiLib:
    """``rocml.rocm_lib`` stand-in driven by a :class:`FakeHost` (SPX handles only)."""

    def __init__(self, host: FakeHost) -> None:
        self.host = host
        self.calls: list[str] = []
        self.inits = 0
        #: GPU indices that fell off the bus: every per-handle call answers NOT_FOUND.
        self.lost: set[int] = set()
        gpus = list(host.gpus)
        ok = STATUS["SUCCESS"]
        calls = self.calls

        def gpu_of(handle: Any) -> Any:
            idx = (handle if isinstance(handle, int) else getattr(handle, "value", None) or 0) - _HANDLE_BASE
            return gpus[idx] if 0 <= idx < len(gpus) else None

        def amdsmi_init(flags: Any) -> int:
            calls.append("amdsmi_init")
            if not host.driver_live:
                return STATUS["DRIVER_NOT_LOADED"]
            self.inits += 1
            return ok

        def amdsmi_shut_down() -> int:
            calls.append("amdsmi_shut_down")
            self.inits = max(self.inits - 1, 0)
            return ok

        def amdsmi_status_code_to_string(code: Any, pstr: Any) -> int:
            pstr._obj.value = f"AMDSMI_STATUS_{code}".encode()
            return ok

        def amdsmi_get_processor_handles_by_type(ptype: Any, handles: Any, pcount: Any) -> int:
            calls.append("amdsmi_get_processor_handles_by_type")
            if self.inits <= 0:
                return STATUS["NOT_INIT"]
            if handles is None:
                pcount._obj.value = len(gpus)
                return ok
            for i in range(min(pcount._obj.value, len(gpus))):
                handles[i] = _HANDLE_BASE + i
            return ok

        def amdsmi_get_gpu_asic_info(handle: Any, pinfo: Any) -> int:
            calls.append("amdsmi_get_gpu_asic_info")
            gpu = gpu_of(handle)
            if gpu is None:
                return STATUS["INVAL"]
            info = pinfo._obj
            info.market_name = gpu.market_name.encode()
            info.vendor_id = 0x1002
            info.device_id = gpu.device_id
            info.rev_id = gpu.rev_id
            info.asic_serial = f"0x{gpu.unique_id:016X}".encode()
            info.num_of_compute_units = gpu.compute_units
            info.subsystem_id = gpu.subsystem_id
            return ok

        def amdsmi_get_gpu_device_bdf(handle: Any, pbdf: Any) -> int:
            calls.append("amdsmi_get_gpu_device_bdf")
            gpu = gpu_of(handle)
            if gpu is None:
                return STATUS["INVAL"]
            pbdf._obj.as_uint = _bdf_uint(gpu.bus_id)
            return ok

        def amdsmi_get_gpu_device_uuid(handle: Any, plen: Any, buf: Any) -> int:
            calls.append("amdsmi_get_gpu_device_uuid")
            gpu = gpu_of(handle)
            if gpu is None or not gpu.uuid:
                return STATUS["NOT_SUPPORTED"]
            buf.value = gpu.uuid.encode()
            return ok

        def amdsmi_get_gpu_activity(handle: Any, pusage: Any) -> int:
            calls.append("amdsmi_get_gpu_activity")
            gpu = gpu_of(handle)
            if gpu is None:
                return STATUS["INVAL"]
            pusage._obj.gfx_activity = gpu.gfx_activity
            pusage._obj.umc_activity = gpu.umc_activity
            pusage._obj.mm_activity = 0xFFFF
            return ok

        def amdsmi_get_gpu_memory_total(handle: Any, mem_type: Any, ptotal: Any) -> int:
            calls.append("amdsmi_get_gpu_memory_total")
            gpu = gpu_of(handle)
            if gpu is None:
                return STATUS["INVAL"]
            ptotal._obj.value = gpu.vram_total if mem_type in (0, 1) else 512 * 2**30
            return ok

        def amdsmi_get_gpu_memory_usage(handle: Any, mem_type: Any, pused: Any) -> int:
            calls.append("amdsmi_get_gpu_memory_usage")
            gpu = gpu_of(handle)
            if gpu is None:
                return STATUS["INVAL"]
            pused._obj.value = gpu.vram_used if mem_type in (0, 1) else 15 * 2**20
            return ok

        def amdsmi_get_power_info(handle: Any, ppower: Any) -> int:
            calls.append("amdsmi_get_power_info")
            gpu = gpu_of(handle)
            if gpu is None:
                return STATUS["INVAL"]
            ppower._obj.socket_power = gpu.power_w
            ppower._obj.current_socket_power = gpu.power_w
            ppower._obj.power_limit = gpu.power_cap_w
            return ok

        def amdsmi_get_pcie_info(handle: Any, pinfo: Any) -> int:
            calls.append("amdsmi_get_pcie_info")
            gpu = gpu_of(handle)
            if gpu is None:
                return STATUS["INVAL"]
            info = pinfo._obj
            info.pcie_static.max_pcie_width = gpu.pcie_width
            info.pcie_static.max_pcie_speed = 32000
            info.pcie_static.pcie_interface_version = gpu.pcie_gen
            info.pcie_metric.pcie_width = gpu.pcie_width
            info.pcie_metric.pcie_speed = 32000
            return ok

        lost = self.lost

        def per_handle(fn: Any) -> Any:
            # A lost GPU keeps its handle (enumerated at init); the library no longer finds it.
            def call(handle: Any, *args: Any) -> int:
                idx = (handle if isinstance(handle, int) else getattr(handle, "value", None) or 0) - _HANDLE_BASE
                if idx in lost:
                    calls.append(fn.__name__)
                    return STATUS["NOT_FOUND"]
                return int(fn(handle, *args))

            call.__name__ = fn.__name__
            return call

        for lib_fn in (amdsmi_init, amdsmi_shut_down, amdsmi_status_code_to_string,
                       amdsmi_get_processor_handles_by_type):
            setattr(self, lib_fn.__name__, lib_fn)
        for fn in (
            amdsmi_get_gpu_asic_info,
            amdsmi_get_gpu_device_bdf,
            amdsmi_get_gpu_device_uuid,
            amdsmi_get_gpu_activity,
            amdsmi_get_gpu_memory_total,
            amdsmi_get_gpu_memory_usage,
            amdsmi_get_power_info,
            amdsmi_get_pcie_info,
        ):
            setattr(self, fn.__name__, per_handle(fn))

    def lose_gpu(self, index: int) -> None:
        """GPU ``index`` falls off the bus: its handle's calls answer ``AMDSMI_STATUS_NOT_FOUND``."""
        if not 0 <= index < len(self.host.gpus):
            raise IndexError(f"no fake GPU {index}")
        self.lost.add(index)
