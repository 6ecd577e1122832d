"""The moving counters of one GPU: one ``nvmlDeviceGetFieldValues`` call per sample.

Which field ids a sample reads follows what the caller asked for (``BackendConfig.readings``);
a driver that does not know a field id (older drivers, no field API) is answered by direct
calls instead (:meth:`Sampler._fallback_fields`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...errors import DeviceLostError
from ...plugin import Reading
from ._handles import Handles, NvmlPart, Read
from ._nvml import C, field_answers
from ._static import StaticReader

__all__ = ["FI_NVLINK_STATE", "Sample", "Sampler", "batch"]

#: The per-device field batch read every snapshot (one nvmlDeviceGetFieldValues call).
_FIELDS = (C.FI_ECC_SBE_VOL_TOTAL, C.FI_ECC_DBE_VOL_TOTAL, C.FI_ECC_SBE_AGG_TOTAL, C.FI_ECC_DBE_AGG_TOTAL,
           C.FI_RETIRED_SBE, C.FI_RETIRED_DBE, C.FI_RETIRED_PENDING, C.FI_NVLINK_CRC_FLIT_TOTAL,
           C.FI_NVLINK_REPLAY_TOTAL, C.FI_NVLINK_RECOVERY_TOTAL, C.FI_MEMORY_TEMP, C.FI_TOTAL_ENERGY,
           C.FI_PCIE_REPLAY_COUNTER, C.FI_REMAPPED_COR, C.FI_REMAPPED_UNC, C.FI_REMAPPED_PENDING,
           C.FI_REMAPPED_FAILURE, C.FI_POWER_INSTANT, C.FI_GPU_RECOVERY_ACTION)
FI_NVLINK_STATE = 165
#: The per-link field ids: error counters (Reading.LINKS) and the link state (down links, for
#: health and topology).
_LINK_COUNTER_FIELDS = (C.FI_NVLINK_ERROR_DL_REPLAY, C.FI_NVLINK_ERROR_DL_RECOVERY, C.FI_NVLINK_ERROR_DL_CRC)
#: Which field ids of the batch each reading group needs when a caller narrows the read
#: (BackendConfig.readings); HEALTH needs them all (counter conditions, recovery action).
_GROUP_FIELDS: dict[Reading, tuple[int, ...]] = {
    Reading.POWER: (C.FI_POWER_INSTANT,),
    Reading.ENERGY: (C.FI_TOTAL_ENERGY,),
    Reading.TEMPERATURE: (C.FI_MEMORY_TEMP,),
    Reading.ERRORS: (C.FI_ECC_SBE_VOL_TOTAL, C.FI_ECC_DBE_VOL_TOTAL, C.FI_RETIRED_SBE, C.FI_RETIRED_DBE,
                     C.FI_PCIE_REPLAY_COUNTER),
}


def batch(readings: frozenset[Reading] | None) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The scalar and per-link field ids a sample reads for ``readings`` (``None``: all)."""
    if readings is None or Reading.HEALTH in readings:
        return _FIELDS, (*_LINK_COUNTER_FIELDS, FI_NVLINK_STATE)
    scalar = {fid for group in readings for fid in _GROUP_FIELDS.get(group, ())}
    per_link = (*(_LINK_COUNTER_FIELDS if Reading.LINKS in readings else ()),
                *((FI_NVLINK_STATE,) if Reading.TOPOLOGY in readings else ()))
    return tuple(f for f in _FIELDS if f in scalar), per_link


@dataclass
class Sample:
    """The moving values of one device in one snapshot."""

    fields: dict[int, int | float | None]
    link_fields: dict[tuple[int, int], int | None]
    read: Read
    lost: bool = False

    def down_links(self, links: list[int]) -> tuple[int, ...]:
        """The links of ``links`` this sample found down (state field 0)."""
        return tuple(lk for lk in links if self.link_fields.get((FI_NVLINK_STATE, lk)) == 0)


class Sampler(NvmlPart):
    """Takes :class:`Sample` s of the field ids the configured readings need."""

    def __init__(self, handles: Handles, statics: StaticReader, readings: frozenset[Reading] | None) -> None:
        super().__init__(handles)
        self._statics = statics
        self._fields, self._link_fields = batch(readings)

    def sample(self, index: int, *, full: bool = False) -> Sample:
        """The moving counters of GPU ``index`` in one ``nvmlDeviceGetFieldValues`` call.

        Reads the ids the configured readings need (every id with ``full``, as ``health()``
        does); a sample that needs none makes no call.
        """
        st = self._statics.static(index)
        h = self._handle(index)
        r = Read()
        scalar, per_link = (_FIELDS, (*_LINK_COUNTER_FIELDS, FI_NVLINK_STATE)) if full else (
            self._fields, self._link_fields)
        link_ids = [(fid, lk.index) for lk in st.nvlinks for fid in per_link]
        fields: dict[int, int | float | None] = {}
        link_fields: dict[tuple[int, int], int | None] = {}
        if not scalar and not link_ids:
            return Sample(fields=fields, link_fields=link_fields, read=r)
        requested: list[Any] = [*scalar, *link_ids]
        values = self._get(r, None, "nvmlDeviceGetFieldValues", h, requested)
        invalid: set[int] = set()
        if values is not None:
            # The binding fills the array in the order of the request (field and scope ids are
            # inputs), so each answer is matched to its request without reading its ids back:
            # every attribute of a binding struct is a Python-level __getattribute__ call.
            n = len(scalar)
            for pos, (ret, value) in enumerate(field_answers(values)):
                if ret == C.ERROR_INVALID_ARGUMENT:
                    if pos < n:
                        invalid.add(scalar[pos])  # a field id this driver does not know: fall back below
                elif ret == C.ERROR_GPU_IS_LOST:
                    raise DeviceLostError("GPU is lost (field values)", device_id=st.device_id)
                if pos < n:
                    fields[scalar[pos]] = value
                else:
                    link_fields[link_ids[pos - n]] = int(value) if value is not None else None
        else:
            invalid = set(scalar)
        self._fallback_fields(r, h, fields, invalid)
        return Sample(fields=fields, link_fields=link_fields, read=r)

    def _fallback_fields(self, r: Read, h: Any, f: dict[int, int | float | None], invalid: set[int]) -> None:
        """Direct calls for counters the field API did not answer (older drivers, no field API)."""
        if invalid & {C.FI_ECC_DBE_VOL_TOTAL, C.FI_ECC_SBE_VOL_TOTAL}:
            f[C.FI_ECC_SBE_VOL_TOTAL] = self._get(r, None, "nvmlDeviceGetTotalEccErrors", h, 0, 0)
            f[C.FI_ECC_DBE_VOL_TOTAL] = self._get(r, None, "nvmlDeviceGetTotalEccErrors", h, 1, 0)
            f[C.FI_ECC_SBE_AGG_TOTAL] = self._get(r, None, "nvmlDeviceGetTotalEccErrors", h, 0, 1)
            f[C.FI_ECC_DBE_AGG_TOTAL] = self._get(r, None, "nvmlDeviceGetTotalEccErrors", h, 1, 1)
        if invalid & {C.FI_RETIRED_SBE, C.FI_RETIRED_DBE, C.FI_RETIRED_PENDING}:
            sbe = self._get(r, None, "nvmlDeviceGetRetiredPages", h, 0)
            dbe = self._get(r, None, "nvmlDeviceGetRetiredPages", h, 1)
            f[C.FI_RETIRED_SBE] = len(sbe) if sbe is not None else None
            f[C.FI_RETIRED_DBE] = len(dbe) if dbe is not None else None
            f[C.FI_RETIRED_PENDING] = self._get(r, None, "nvmlDeviceGetRetiredPagesPendingStatus", h)
        if invalid & {C.FI_REMAPPED_PENDING, C.FI_REMAPPED_FAILURE}:
            rows = self._get(r, None, "nvmlDeviceGetRemappedRows", h)
            for fid, pos in ((C.FI_REMAPPED_COR, 0), (C.FI_REMAPPED_UNC, 1), (C.FI_REMAPPED_PENDING, 2),
                             (C.FI_REMAPPED_FAILURE, 3)):
                f[fid] = rows[pos] if rows is not None else None
        if C.FI_POWER_INSTANT in invalid:
            f[C.FI_POWER_INSTANT] = self._get(r, None, "nvmlDeviceGetPowerUsage", h)
        if C.FI_TOTAL_ENERGY in invalid:
            f[C.FI_TOTAL_ENERGY] = self._get(r, None, "nvmlDeviceGetTotalEnergyConsumption", h)
        if C.FI_PCIE_REPLAY_COUNTER in invalid:
            f[C.FI_PCIE_REPLAY_COUNTER] = self._get(r, None, "nvmlDeviceGetPcieReplayCounter", h)
