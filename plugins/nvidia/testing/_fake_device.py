"""The fake's device surface: init and system, handle lookups, identity, memory, power,
thermal, clocks and PCIe, answered from the scenario's :class:`GpuSpec` s."""

from __future__ import annotations

import re
from typing import Any

from ._fake_core import FakeCore

__all__ = ["DeviceCalls"]


class DeviceCalls(FakeCore):
    """``nvmlInit`` ... ``nvmlDeviceGetPcieThroughput``: what one GPU is and what it reads now."""

    # -- init and system ----------------------------------------------------------------------
    def nvmlInitWithFlags(self, flags: int) -> None:
        self.calls["nvmlInitWithFlags"] += 1
        self._init()

    def _init(self) -> None:
        if self._fail is not None:
            raise self._fail()
        code = self.scenario.init_error
        if code is not None:
            raise self._err(code)
        self._loaded = True
        self._refcount += 1

    def nvmlInit(self) -> None:
        self.calls["nvmlInit"] += 1
        self._init()

    def nvmlShutdown(self) -> None:
        self.calls["nvmlShutdown"] += 1
        if self._fail is not None:
            raise self._fail()
        if not self._loaded:
            raise self._err(1)
        # nvml.h: no error when shutdown is called more often than init.
        self._refcount = max(0, self._refcount - 1)

    def nvmlErrorString(self, result: int) -> str:
        names = {v: k for k, v in vars(self.pynvml).items() if k.startswith("NVML_ERROR_") and isinstance(v, int)}
        return names.get(result, "Unknown Error")

    def nvmlSystemGetDriverVersion(self) -> str:
        self._enter("nvmlSystemGetDriverVersion")
        return self.scenario.driver_version

    def nvmlSystemGetNVMLVersion(self) -> str:
        self._enter("nvmlSystemGetNVMLVersion")
        return self.scenario.nvml_version

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        self._enter("nvmlSystemGetCudaDriverVersion")
        return self.scenario.cuda_driver_version

    def nvmlSystemGetCudaDriverVersion_v2(self) -> int:
        self._enter("nvmlSystemGetCudaDriverVersion_v2")
        return self.scenario.cuda_driver_version

    def nvmlDeviceGetCount(self) -> int:
        self._enter("nvmlDeviceGetCount")
        return len(self.scenario.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> Any:
        self._enter("nvmlDeviceGetHandleByIndex")
        if not 0 <= index < len(self.scenario.gpus):
            raise self._err(2)
        gpu = self.scenario.gpus[index]
        if gpu.lost:
            raise self._err(15)
        if "nvmlDeviceGetHandleByIndex" in gpu.errors:
            raise self._err(gpu.errors["nvmlDeviceGetHandleByIndex"])
        return self._handle(index)

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> Any:
        self._enter("nvmlDeviceGetHandleByUUID")
        if any(g.lost for g in self.scenario.gpus):
            # nvml.h: fails with GPU_IS_LOST if *any* GPU is lost.
            raise self._err(15)
        for i, gpu in enumerate(self.scenario.gpus):
            if gpu.uuid == uuid:
                return self._handle(i)
            for slot, mig in gpu.mig_slots.items():
                if mig.uuid == uuid:
                    return self._handle(i, slot)
        raise self._err(6)

    def nvmlDeviceGetHandleByPciBusId(self, pciBusId: str) -> Any:
        self._enter("nvmlDeviceGetHandleByPciBusId")
        m = re.fullmatch(r"(?:([0-9a-fA-F]{1,8}):)?([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})(?:\.([0-7]))?",
                         pciBusId.strip())
        if not m:
            raise self._err(2)
        want = (int(m.group(1) or "0", 16), int(m.group(2), 16), int(m.group(3), 16), int(m.group(4) or "0"))
        for i, gpu in enumerate(self.scenario.gpus):
            d, b, rest = gpu.bus_id.split(":")
            dv, f = rest.split(".")
            if (int(d, 16), int(b, 16), int(dv, 16), int(f)) == want:
                if gpu.lost:
                    raise self._err(15)
                return self._handle(i)
        raise self._err(6)

    # -- identity -----------------------------------------------------------------------------
    def nvmlDeviceGetIndex(self, handle: Any) -> int:
        _gpu, _mig, index = self._enter("nvmlDeviceGetIndex", handle)
        return index

    def nvmlDeviceGetName(self, handle: Any) -> str:
        gpu, mig, _ = self._enter("nvmlDeviceGetName", handle)
        assert gpu is not None
        return f"{gpu.name} MIG {mig.profile}" if mig is not None else gpu.name

    def nvmlDeviceGetUUID(self, handle: Any) -> str:
        gpu, mig, _ = self._enter("nvmlDeviceGetUUID", handle)
        assert gpu is not None
        return mig.uuid if mig is not None else gpu.uuid

    def nvmlDeviceGetSerial(self, handle: Any) -> str:
        gpu = self._gpu("nvmlDeviceGetSerial", handle)
        if gpu.serial is None:
            raise self._err(3)
        return gpu.serial

    def nvmlDeviceGetPciInfo_v3(self, handle: Any) -> Any:
        gpu = self._gpu("nvmlDeviceGetPciInfo_v3", handle)
        return self._pci(gpu.bus_id, gpu.pci_device_id, gpu.pci_subsystem_id)

    def nvmlDeviceGetPciInfo(self, handle: Any) -> Any:
        gpu = self._gpu("nvmlDeviceGetPciInfo", handle)
        return self._pci(gpu.bus_id, gpu.pci_device_id, gpu.pci_subsystem_id)

    def nvmlDeviceGetCudaComputeCapability(self, handle: Any) -> tuple[int, int]:
        return self._gpu("nvmlDeviceGetCudaComputeCapability", handle).cuda_cc

    def nvmlDeviceGetArchitecture(self, device: Any) -> int:
        return self._gpu("nvmlDeviceGetArchitecture", device).architecture

    def nvmlDeviceGetBrand(self, handle: Any) -> int:
        return self._gpu("nvmlDeviceGetBrand", handle).brand

    def nvmlDeviceGetMinorNumber(self, handle: Any) -> int:
        return self._gpu("nvmlDeviceGetMinorNumber", handle).minor

    def nvmlDeviceGetPersistenceMode(self, handle: Any) -> int:
        return self._gpu("nvmlDeviceGetPersistenceMode", handle).persistence

    def nvmlDeviceGetVbiosVersion(self, handle: Any) -> str:
        return self._gpu("nvmlDeviceGetVbiosVersion", handle).vbios

    def nvmlDeviceGetInforomImageVersion(self, handle: Any) -> str:
        gpu = self._gpu("nvmlDeviceGetInforomImageVersion", handle)
        if gpu.inforom is None:
            raise self._err(3)
        return gpu.inforom

    def nvmlDeviceGetNumGpuCores(self, device: Any) -> int:
        gpu = self._gpu("nvmlDeviceGetNumGpuCores", device)
        if gpu.cores is None:
            raise self._err(3)
        return gpu.cores

    # -- memory -------------------------------------------------------------------------------
    def nvmlDeviceGetMemoryInfo(self, handle: Any, version: int | None = None) -> Any:
        gpu, mig, _ = self._enter("nvmlDeviceGetMemoryInfo", handle)
        assert gpu is not None
        if version:
            if "nvmlDeviceGetMemoryInfo_v2" in self.scenario.missing:
                raise self.pynvml.NVMLError_FunctionNotFound()
            if version != self.pynvml.nvmlMemory_v2:
                raise self._err(25)
        if mig is not None:
            prof = next(p for p in gpu.mig_profiles if p.name == mig.profile)
            total, reserved, used = prof.memory_mib * 1024 * 1024, 0, mig.memory_used_bytes
        else:
            if gpu.mig_mode and gpu.mig_mode[0] == 1 and not gpu.mig_privileged:
                raise self._err(4)
            total, reserved, used = gpu.memory_total, gpu.memory_reserved, gpu.memory_used
        if version:
            mem = self.pynvml.c_nvmlMemory_v2_t()
            mem.version, mem.total, mem.reserved = version, total, reserved
            mem.used, mem.free = used, total - reserved - used
            return mem
        mem = self.pynvml.c_nvmlMemory_t()
        # R510+: v1 "used" includes the memory the driver reserves.
        mem.total, mem.used, mem.free = total, used + reserved, total - reserved - used
        return mem

    def nvmlDeviceGetBAR1MemoryInfo(self, handle: Any) -> Any:
        gpu = self._gpu("nvmlDeviceGetBAR1MemoryInfo", handle)
        bar = self.pynvml.c_nvmlBAR1Memory_t()
        bar.bar1Total, bar.bar1Used, bar.bar1Free = gpu.bar1_total, 2 * 1024 * 1024, gpu.bar1_total - 2 * 1024 * 1024
        return bar

    # -- power, thermal, clocks ---------------------------------------------------------------
    def nvmlDeviceGetPowerManagementDefaultLimit(self, handle: Any) -> int:
        return self._gpu("nvmlDeviceGetPowerManagementDefaultLimit", handle).power_default_mw

    def nvmlDeviceGetPowerManagementLimit(self, handle: Any) -> int:
        return self._gpu("nvmlDeviceGetPowerManagementLimit", handle).power_default_mw

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: Any) -> int:
        return self._gpu("nvmlDeviceGetEnforcedPowerLimit", handle).power_default_mw

    def nvmlDeviceGetPowerManagementLimitConstraints(self, handle: Any) -> list[int]:
        gpu = self._gpu("nvmlDeviceGetPowerManagementLimitConstraints", handle)
        return [gpu.power_min_mw, gpu.power_max_mw]

    def nvmlDeviceGetPowerUsage(self, handle: Any) -> int:
        return self._gpu("nvmlDeviceGetPowerUsage", handle).power_usage_mw

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: Any) -> int:
        return self._gpu("nvmlDeviceGetTotalEnergyConsumption", handle).energy_mj

    def nvmlDeviceGetTemperature(self, handle: Any, sensor: int) -> int:
        gpu = self._gpu("nvmlDeviceGetTemperature", handle)
        if sensor != 0:
            raise self._err(2)
        return gpu.temperature_c

    def nvmlDeviceGetTemperatureV(self, handle: Any, sensor: int, version: int | None = None) -> int:
        """``version`` defaults to ``nvmlTemperature_v1``; any other is ARGUMENT_VERSION_MISMATCH (as the wrapper)."""
        if version is not None and version != self.pynvml.nvmlTemperature_v1:
            self.calls["nvmlDeviceGetTemperatureV"] += 1
            raise self._err(25)
        gpu = self._gpu("nvmlDeviceGetTemperatureV", handle)
        if sensor != 0:
            raise self._err(2)
        return gpu.temperature_c

    def nvmlDeviceGetTemperatureThreshold(self, handle: Any, threshold: int) -> int:
        gpu = self._gpu("nvmlDeviceGetTemperatureThreshold", handle)
        if threshold not in gpu.thresholds_c:
            raise self._err(3)
        return gpu.thresholds_c[threshold]

    def nvmlDeviceGetFanSpeed(self, handle: Any) -> int:
        gpu = self._gpu("nvmlDeviceGetFanSpeed", handle)
        if gpu.fan_percent is None:
            raise self._err(3)
        return gpu.fan_percent

    def nvmlDeviceGetClockInfo(self, handle: Any, type: int) -> int:
        gpu = self._gpu("nvmlDeviceGetClockInfo", handle)
        if type not in gpu.clocks_mhz:
            raise self._err(2)
        return gpu.clocks_mhz[type]

    def nvmlDeviceGetMaxClockInfo(self, handle: Any, type: int) -> int:
        gpu = self._gpu("nvmlDeviceGetMaxClockInfo", handle)
        if type not in gpu.max_clocks_mhz:
            raise self._err(2)
        return gpu.max_clocks_mhz[type]

    def nvmlDeviceGetPerformanceState(self, handle: Any) -> int:
        return self._gpu("nvmlDeviceGetPerformanceState", handle).pstate

    def nvmlDeviceGetUtilizationRates(self, handle: Any) -> Any:
        gpu = self._gpu("nvmlDeviceGetUtilizationRates", handle)
        util = self.pynvml.c_nvmlUtilization_t()
        util.gpu, util.memory = gpu.utilization
        return util

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: Any) -> int:
        return self._gpu("nvmlDeviceGetCurrentClocksEventReasons", handle).throttle

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle: Any) -> int:
        return self._gpu("nvmlDeviceGetCurrentClocksThrottleReasons", handle).throttle

    # -- PCIe ---------------------------------------------------------------------------------
    def nvmlDeviceGetCurrPcieLinkGeneration(self, handle: Any) -> int:
        return self._gpu("nvmlDeviceGetCurrPcieLinkGeneration", handle).pcie_gen[1]

    def nvmlDeviceGetMaxPcieLinkGeneration(self, handle: Any) -> int:
        return self._gpu("nvmlDeviceGetMaxPcieLinkGeneration", handle).pcie_gen[0]

    def nvmlDeviceGetCurrPcieLinkWidth(self, handle: Any) -> int:
        return self._gpu("nvmlDeviceGetCurrPcieLinkWidth", handle).pcie_width[1]

    def nvmlDeviceGetMaxPcieLinkWidth(self, handle: Any) -> int:
        return self._gpu("nvmlDeviceGetMaxPcieLinkWidth", handle).pcie_width[0]

    def nvmlDeviceGetPcieThroughput(self, device: Any, counter: int) -> int:
        gpu = self._gpu("nvmlDeviceGetPcieThroughput", device)
        return gpu.pcie_kbps[counter]

    def nvmlDeviceGetPcieReplayCounter(self, handle: Any) -> int:
        return self._gpu("nvmlDeviceGetPcieReplayCounter", handle).pcie_replay

