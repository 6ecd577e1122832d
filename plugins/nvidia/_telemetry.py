"""One GPU's :class:`Telemetry`: utilisation, memory, power, temperatures, clocks, PCIe, errors.

A reading group the caller did not ask for (``BackendConfig.readings``) is not read: its values
stay ``None`` and it is not "unsupported" either.  A lost GPU answers nothing until it is reset:
:func:`lost_sample` lists every reading as unavailable.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ...model import LinkCounters, MemoryKind, MemoryRegion, Telemetry
from ...plugin import Reading
from ._handles import Handles, NvmlPart, Read
from ._health import throttle_names
from ._memory import MemoryReader
from ._nvml import C
from ._samples import Sample, Sampler
from ._static import Static

__all__ = ["TelemetryReader", "lost_sample"]


def lost_sample(device_id: str, at: datetime) -> Telemetry:
    """A lost GPU answers nothing until it is reset: every reading is listed as unavailable."""
    empty = {name for name, info in Telemetry.model_fields.items()
             if name not in ("device_id", "timestamp", "unsupported") and not info.is_required()}
    return Telemetry(device_id=device_id, timestamp=at, unsupported=frozenset(empty))


class TelemetryReader(NvmlPart):
    """Reads telemetry from a sample (taken here, or lent by the inventory that just took it)."""

    def __init__(self, handles: Handles, sampler: Sampler, memory: MemoryReader,
                 readings: frozenset[Reading] | None) -> None:
        super().__init__(handles)
        self._sampler = sampler
        self._memory = memory
        self._readings = readings
        self._link_last: dict[tuple[str, int], tuple[tuple[int | None, ...], LinkCounters]] = {}

    def _wants(self, reading: Reading) -> bool:
        return self._readings is None or reading in self._readings

    def read(self, st: Static, loan: tuple[Sample, MemoryRegion] | None, at: datetime) -> Telemetry:
        """GPU ``st``'s telemetry; ``loan``: the sample and memory an inventory just read."""
        h = self._handle(st.index)
        s = loan[0] if loan is not None else self._sampler.sample(st.index)
        r = s.read
        f = s.fields
        unsupported: set[str] = set()

        def get(name: str, fn: str, *args: Any, fallback: str | None = None) -> Any:
            value = self._get(r, name, fn, *args, fallback=fallback)
            if name in r.unsupported:
                unsupported.add(name)
            return value

        wants = self._wants
        errors = wants(Reading.ERRORS)
        util = get("utilization_ratio", "nvmlDeviceGetUtilizationRates", h) if wants(Reading.UTILIZATION) else None
        if util is None:
            unsupported.discard("utilization_ratio")
            if "utilization_ratio" in r.unsupported:
                unsupported |= {"utilization_ratio", "memory_utilization_ratio"}
        mem: MemoryRegion | None = None
        if wants(Reading.MEMORY):
            mem = loan[1] if loan is not None else self._memory.read(r, h, MemoryKind.UNKNOWN, None)
        temp = get("temperature_celsius", "nvmlDeviceGetTemperatureV", h, C.TEMPERATURE_GPU,
                   fallback="nvmlDeviceGetTemperature") if wants(Reading.TEMPERATURE) else None
        fan = None
        if wants(Reading.FAN) and st.fanless:
            unsupported.add("fan_ratio")
        elif wants(Reading.FAN):
            fan = get("fan_ratio", "nvmlDeviceGetFanSpeed", h)
            st.fanless = "fan_ratio" in unsupported
        clocks = self._clocks(r, h) if wants(Reading.CLOCKS) else {}
        throttle = self._get(r, None, "nvmlDeviceGetCurrentClocksEventReasons", h,
                             fallback="nvmlDeviceGetCurrentClocksThrottleReasons") if wants(Reading.THROTTLE) else None
        tx, rx = self._pcie(r, h) if wants(Reading.PCIE) else (None, None)
        power = f.get(C.FI_POWER_INSTANT)
        energy = f.get(C.FI_TOTAL_ENERGY)
        mem_temp = f.get(C.FI_MEMORY_TEMP)
        temps = {"gpu": float(temp)} if temp is not None else {}
        if mem_temp is not None:
            temps["memory"] = float(mem_temp)

        def total(*fids: int) -> int | None:
            vals = [f.get(x) for x in fids]
            return sum(int(v) for v in vals if v is not None) if any(v is not None for v in vals) else None

        link_counters = tuple(self._link_counters(st, lk.index, s) for lk in st.nvlinks) if wants(Reading.LINKS) \
            else ()
        return Telemetry(
            device_id=st.device_id, timestamp=at,
            utilization_ratio=int(util.gpu) / 100 if util is not None else None,
            memory_utilization_ratio=int(util.memory) / 100 if util is not None else None,
            memory_used_bytes=mem.used_bytes if mem is not None else None,
            memory_total_bytes=mem.total_bytes if mem is not None else None,
            memory_free_bytes=mem.free_bytes if mem is not None else None,
            power_watts=float(power) / 1000 if power is not None else None,
            energy_joules=float(energy) / 1000 if energy is not None else None,
            temperature_celsius=float(temp) if temp is not None else None, temperatures_celsius=temps,
            clocks_hertz=clocks, fan_ratio=int(fan) / 100 if fan is not None else None,
            throttle_reasons=throttle_names(int(throttle)) if throttle is not None else (),
            pcie_tx_bytes_per_s=int(tx) * 1024 if tx is not None else None,
            pcie_rx_bytes_per_s=int(rx) * 1024 if rx is not None else None,
            pcie_replay_total=total(C.FI_PCIE_REPLAY_COUNTER) if errors else None,
            ecc_corrected_total=total(C.FI_ECC_SBE_VOL_TOTAL) if errors else None,
            ecc_uncorrected_total=total(C.FI_ECC_DBE_VOL_TOTAL) if errors else None,
            retired_pages_total=total(C.FI_RETIRED_SBE, C.FI_RETIRED_DBE) if errors else None,
            links=link_counters, unsupported=frozenset(unsupported),
        )

    def _clocks(self, r: Read, h: Any) -> dict[str, int]:
        clocks: dict[str, int] = {}
        for label, ctype in (("graphics", C.CLOCK_GRAPHICS), ("sm", C.CLOCK_SM), ("memory", C.CLOCK_MEM),
                             ("video", C.CLOCK_VIDEO)):
            mhz = self._get(r, None, "nvmlDeviceGetClockInfo", h, ctype)
            if mhz is not None:
                clocks[label] = int(mhz) * 1_000_000
        return clocks

    def _pcie(self, r: Read, h: Any) -> tuple[Any, Any]:
        # NVML reports PCIe throughput in KB/s; nvitop and nvidia-smi treat it as KiB/s.
        tx = self._get(r, None, "nvmlDeviceGetPcieThroughput", h, C.PCIE_UTIL_TX_BYTES)
        rx = self._get(r, None, "nvmlDeviceGetPcieThroughput", h, C.PCIE_UTIL_RX_BYTES)
        return tx, rx

    def _link_counters(self, st: Static, link: int, s: Sample) -> LinkCounters:
        """One link's counters; the previous (frozen, validated) object when they did not move,
        which is almost always (error counters of 18 links per GPU, every scrape)."""
        values = (s.link_fields.get((C.FI_NVLINK_ERROR_DL_REPLAY, link)),
                  s.link_fields.get((C.FI_NVLINK_ERROR_DL_RECOVERY, link)),
                  s.link_fields.get((C.FI_NVLINK_ERROR_DL_CRC, link)))
        key = (st.device_id, link)
        last = self._link_last.get(key)
        if last is not None and last[0] == values:
            return last[1]
        counters = LinkCounters(link=f"nvlink{link}", replay_errors_total=values[0],
                                recovery_errors_total=values[1], crc_errors_total=values[2])
        self._link_last[key] = (values, counters)
        return counters
