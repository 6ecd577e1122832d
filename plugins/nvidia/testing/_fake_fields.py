"""The fake's counters: ECC, page retirement, row remapping and ``nvmlDeviceGetFieldValues``.

A field the scenario's driver does not know (above ``max_field_id``) answers INVALID_ARGUMENT in
its ``nvmlReturn``; per-field failures never raise, as in the real binding.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._fake_core import FakeCore
from ._profiles import GpuSpec, MigSlot

__all__ = ["CounterCalls"]

_FIELD_UINT = 1
_FIELD_ULL = 3


class CounterCalls(FakeCore):
    """ECC and retirement counters, and the field-values batch over all of them."""

    def nvmlDeviceGetEccMode(self, handle: Any) -> list[int]:
        gpu = self._gpu("nvmlDeviceGetEccMode", handle)
        if gpu.ecc_mode is None:
            raise self._err(3)
        return list(gpu.ecc_mode)

    def _ecc(self, gpu: GpuSpec, err_type: int, counter: int) -> int:
        key = ("sbe" if err_type == 0 else "dbe") + ("_vol" if counter == 0 else "_agg")
        return gpu.ecc_counts.get(key, 0)

    def nvmlDeviceGetTotalEccErrors(self, handle: Any, errorType: int, counterType: int) -> int:
        gpu = self._gpu("nvmlDeviceGetTotalEccErrors", handle)
        if gpu.ecc_mode is None or gpu.ecc_mode[0] == 0:
            raise self._err(3)
        return self._ecc(gpu, errorType, counterType)

    def nvmlDeviceGetRetiredPages(self, device: Any, sourceFilter: int) -> list[int]:
        gpu = self._gpu("nvmlDeviceGetRetiredPages", device)
        return list(gpu.retired_sbe if sourceFilter == 0 else gpu.retired_dbe)

    def nvmlDeviceGetRetiredPagesPendingStatus(self, device: Any) -> int:
        return self._gpu("nvmlDeviceGetRetiredPagesPendingStatus", device).retired_pending

    def nvmlDeviceGetRemappedRows(self, device: Any) -> tuple[int, int, int, int]:
        gpu = self._gpu("nvmlDeviceGetRemappedRows", device)
        if gpu.mig_mode and gpu.mig_mode[0] == 1:
            raise self._err(3)
        return gpu.remapped

    def _field(self, gpu: GpuSpec, mig: MigSlot | None, fid: int, scope: int) -> tuple[int, int, float | int]:
        """(nvmlReturn, valueType, value) for one field."""
        if fid > self.scenario.max_field_id:
            return 2, 0, 0
        if f"field:{fid}" in gpu.errors:
            return gpu.errors[f"field:{fid}"], 0, 0
        ecc_on = gpu.ecc_mode is not None and gpu.ecc_mode[0] == 1
        links = gpu.nvlinks if "nvmlDeviceGetNvLinkState" not in gpu.not_supported else []
        retire_ok = "nvmlDeviceGetRetiredPages" not in gpu.not_supported
        remap_ok = "nvmlDeviceGetRemappedRows" not in gpu.not_supported and not (
            gpu.mig_mode and gpu.mig_mode[0] == 1)
        ns = (3, 0, 0)
        table: dict[int, Callable[[], tuple[int, int, float | int]]] = {
            3: lambda: (0, _FIELD_ULL, self._ecc(gpu, 0, 0)) if ecc_on else ns,
            4: lambda: (0, _FIELD_ULL, self._ecc(gpu, 1, 0)) if ecc_on else ns,
            5: lambda: (0, _FIELD_ULL, self._ecc(gpu, 0, 1)) if ecc_on else ns,
            6: lambda: (0, _FIELD_ULL, self._ecc(gpu, 1, 1)) if ecc_on else ns,
            29: lambda: (0, _FIELD_ULL, len(gpu.retired_sbe)) if retire_ok else ns,
            30: lambda: (0, _FIELD_ULL, len(gpu.retired_dbe)) if retire_ok else ns,
            31: lambda: (0, _FIELD_ULL, gpu.retired_pending) if retire_ok else ns,
            38: lambda: (0, _FIELD_ULL, sum(lk.crc for lk in links)) if links else ns,
            45: lambda: (0, _FIELD_ULL, 0) if links else ns,
            52: lambda: (0, _FIELD_ULL, sum(lk.replay for lk in links)) if links else ns,
            59: lambda: (0, _FIELD_ULL, sum(lk.recovery for lk in links)) if links else ns,
            82: lambda: (0, _FIELD_UINT, gpu.memory_temperature_c) if gpu.memory_temperature_c is not None else ns,
            83: lambda: (0, _FIELD_ULL, gpu.energy_mj),
            91: lambda: (0, _FIELD_UINT, len(links)) if links else ns,
            94: lambda: (0, _FIELD_UINT, gpu.pcie_replay),
            142: lambda: (0, _FIELD_UINT, gpu.remapped[0]) if remap_ok else ns,
            143: lambda: (0, _FIELD_UINT, gpu.remapped[1]) if remap_ok else ns,
            144: lambda: (0, _FIELD_UINT, gpu.remapped[2]) if remap_ok else ns,
            145: lambda: (0, _FIELD_UINT, gpu.remapped[3]) if remap_ok else ns,
            186: lambda: (0, _FIELD_UINT, gpu.power_usage_mw),
            230: lambda: (0, _FIELD_UINT, 0),
        }
        if fid in (161, 162, 163, 165):
            if not links:
                return ns
            if scope >= len(links):
                return 2, 0, 0
            lk = links[scope]
            return 0, _FIELD_UINT if fid == 165 else _FIELD_ULL, {
                161: lk.replay, 162: lk.recovery, 163: lk.crc, 165: int(lk.active)}[fid]
        getter = table.get(fid)
        return getter() if getter is not None else ns

    def nvmlDeviceGetFieldValues(self, handle: Any, fieldIds: list[Any]) -> Any:
        gpu, mig, _ = self._enter("nvmlDeviceGetFieldValues", handle)
        assert gpu is not None
        values = (self.pynvml.c_nvmlFieldValue_t * len(fieldIds))()
        self._clock_us += 1000
        for i, item in enumerate(fieldIds):
            fid, scope = item if isinstance(item, tuple) else (item, 0)
            ret, vtype, value = self._field(gpu, mig, fid, scope)
            v = values[i]
            v.fieldId, v.scopeId, v.timestamp, v.latencyUsec = fid, scope, self._clock_us, 0
            v.nvmlReturn, v.valueType = ret, vtype
            if ret == 0:
                if vtype == _FIELD_UINT:
                    v.value.uiVal = int(value)
                else:
                    v.value.ullVal = int(value)
        return values

