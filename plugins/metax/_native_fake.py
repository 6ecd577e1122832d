"""A faithful fake ``libmxsml.so`` rendered from the same device state the ``mx-smi`` replay shows.

The state of a scenario is what its recordings show, read by the CLI path's own parsers
(``mx-smi``, ``mx-smi -L`` when recorded, ``mx-smi topo -m``), plus what only the library sees,
from the scenario's ``native.toml`` (:data:`~accel.toolkit.NATIVE_STATE_FILE`)::

    [[device]]
    gpu = 3                    # the mx-smi GPU index
    ecc = { sram_ce = 0, sram_ue = 0, dram_ce = 12, dram_ue = 2, retired_pages = 1 }
    unavailable = { code = 4, reason = "..." }   # mxSmlGetDeviceUnavailableReason
    uuid = "GPU-..."           # mxSmlGetDeviceInfo's uuid

:class:`FakeMxsml` answers with MXSML's conventions: device indices, ``mxSmlReturn_t`` codes,
caller buffers with an in/out size (too small: ``INSUFFICIENT_SIZE`` and the size needed),
the two-call board power read, KiB, hundredths of a degree and mW.  A value the state does
not hold (``mx-smi`` 2.1 prints no power cap, no replay recorded ``topo -m``) is
``MXSML_ERROR_OPERATION_NOT_SUPPORT``.  Where ``native.toml`` says nothing, a card has no ECC
errors and no unavailable reason (what the library answers for a card ``mx-smi`` shows as
``Available``).
"""

from __future__ import annotations

import ctypes
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from accel.errors import ConfigError, ToolError
from accel.toolkit import FakeLibrary, ParseContext, deref, parse_listing, read_matrix, read_native_state, set_out
from accel.tools import Runner

from . import _native as n
from ._parse import TOOL, MxSmi, parse_mx_smi

__all__ = ["FakeMxsml", "GpuState", "MxsmlState", "fake_of_replay", "state_from_mx_smi"]

SUCCESS, NOT_SUPPORTED, INVALID_DEVICE_ID, INVALID_INPUT, INSUFFICIENT_SIZE = 0, 3, 6, 9, 10
UNINITIALIZED = 1  # MXSML has no "uninitialized" code; its calls fail with FAILURE before init
_LEVELS = {code: level for level, code in n.TOPOLOGY_CODES.items()}
_KIB = 1024


@dataclass
class GpuState:
    """One GPU as MXSML would report it (``None``: not held, NOT_SUPPORTED)."""

    index: int
    name: str | None = None
    bus_id: str | None = None
    uuid: str | None = None
    util_percent: int | None = None
    temperature_c: float | None = None
    power_w: float | None = None
    power_cap_w: float | None = None
    memory_total_mib: int | None = None
    memory_used_mib: int | None = None
    gpu_state: str | None = None
    ecc: dict[str, int] = field(default_factory=dict)
    unavailable: tuple[int, str] | None = None


@dataclass
class MxsmlState:
    gpus: list[GpuState]
    driver: str | None = None
    maca: str | None = None
    bios: str | None = None
    #: ``(a, b) -> mx-smi topo code`` (``MX``, ``SYS``...); ``None``: no topology recorded.
    topology: dict[tuple[int, int], str] | None = None


def _mib(value: int | None) -> int | None:
    return None if value is None else value // 2**20


def state_from_mx_smi(
    smi: MxSmi,
    *,
    uuids: Mapping[int, str] | None = None,
    topology: dict[tuple[int, int], str] | None = None,
    native: Mapping[str, Any] | None = None,
) -> MxsmlState:
    """The device state behind an ``mx-smi`` output, with the scenario's native-only extras."""
    gpus: list[GpuState] = []
    for r in smi.readings:
        if r.index is None:
            continue
        state = r.extras.get("metax-tech.com/gpuState")
        gpus.append(
            GpuState(
                index=r.index,
                name=r.model,
                bus_id=r.bus_id,
                uuid=(uuids or {}).get(r.index),
                util_percent=None if r.utilization_ratio is None else round(r.utilization_ratio * 100),
                temperature_c=r.temperature_celsius,
                power_w=r.power_watts,
                power_cap_w=r.power_limit_watts,
                memory_total_mib=_mib(r.memory_total_bytes),
                memory_used_mib=_mib(r.memory_used_bytes),
                gpu_state=state if isinstance(state, str) else None,
            )
        )
    by_index = {g.index: g for g in gpus}
    for entry in (native or {}).get("device", []):
        try:
            gpu = by_index[int(entry["gpu"])]
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"native state: a [[device]] names no GPU of the scenario: {entry!r}") from exc
        if "uuid" in entry:
            gpu.uuid = str(entry["uuid"])
        gpu.ecc.update({str(k): int(v) for k, v in dict(entry.get("ecc", {})).items()})
        if "unavailable" in entry:
            why = entry["unavailable"]
            gpu.unavailable = (int(why["code"]), str(why.get("reason", "")))
    return MxsmlState(gpus, smi.driver_version, smi.maca_version, smi.bios_version, topology)


_TOPO_CODES = re.compile("X|PIX|PXB|PHB|NODE|SYS|MX")


def _recorded(runner: Runner, *args: str) -> str | None:
    try:
        return runner.run([TOOL, *args]).stdout
    except ToolError:
        return None


def fake_of_replay(runner: Runner) -> FakeMxsml:
    """The fake of the host a replay ``runner`` answers from: its ``mx-smi`` recordings parsed
    by the CLI path's parsers, plus the scenario's ``native.toml``."""
    smi = parse_mx_smi(runner.run([TOOL]).stdout)
    uuids: dict[int, str] = {}
    listing = _recorded(runner, "-L")
    if listing is not None:
        for x in parse_listing(listing, words=("GPU",), ctx=ParseContext(TOOL, f"{TOOL} -L")):
            if x.index is not None and x.uuid:
                uuids[x.index] = x.uuid
    topology: dict[tuple[int, int], str] | None = None
    text = _recorded(runner, "topo", "-m")
    if text is not None:
        matrix = read_matrix(
            text, ParseContext(TOOL, f"{TOOL} topo -m"), header=r"^\s+GPU0(\s|$)", valid_code=_TOPO_CODES
        )
        topology = {}
        for (row, col), code in matrix.codes.items():
            a, b = matrix.label_index(row), matrix.label_index(col)
            if a is not None and b is not None:
                topology[(a, b)] = code
    return FakeMxsml(state_from_mx_smi(smi, uuids=uuids, topology=topology, native=read_native_state(runner)))


def _put_string(buf: Any, size: Any, text: str | None) -> int:
    """MXSML's caller-buffer convention: the text and its NUL must fit in ``*size`` bytes."""
    if text is None:
        return NOT_SUPPORTED
    raw = text.encode()
    cap = deref(size)
    if cap.value < len(raw) + 1:
        cap.value = len(raw) + 1
        return INSUFFICIENT_SIZE
    ctypes.memmove(buf, raw + b"\0", len(raw) + 1)
    return SUCCESS


def _power_ways(watts: float) -> list[tuple[int, int, int]]:
    """A board's power as two ways (12 V main, 3.3 V aux: mV, mA, mW) that sum to ``watts``."""
    total_mw = round(watts * 1000)
    aux = total_mw // 20
    main = total_mw - aux
    return [(12000, main * 1000 // 12000, main), (3300, aux * 1000 // 3300, aux)]


class FakeMxsml(FakeLibrary):
    """``libmxsml.so`` answering from an :class:`MxsmlState`."""

    TABLE = n.TABLE

    def __init__(self, state: MxsmlState) -> None:
        super().__init__()
        self.state = state
        self.inited = False

    def _gpu(self, device_id: int) -> GpuState | None:
        if not self.inited or not 0 <= device_id < len(self.state.gpus):
            return None
        return self.state.gpus[device_id]

    def mxSmlInit(self) -> int:
        self.inited = True
        return SUCCESS

    def mxSmlGetMacaVersion(self, buf: Any, size: Any) -> int:
        return _put_string(buf, size, self.state.maca) if self.inited else UNINITIALIZED

    def mxSmlGetDeviceCount(self) -> int:
        return len(self.state.gpus) if self.inited else 0

    def mxSmlGetDeviceInfo(self, device_id: int, info: Any) -> int:
        gpu = self._gpu(device_id)
        if gpu is None:
            return INVALID_DEVICE_ID
        out = deref(info)
        out.deviceId, out.gpuId, out.nodeId = device_id, device_id, 0
        out.bdfId = (gpu.bus_id or "").encode()
        out.uuid = (gpu.uuid or "").encode()
        out.brand = 2  # MXSML_BRAND_C: the C500/C550/C600 line
        out.mode = 0  # bare metal
        out.deviceName = (gpu.name or "").encode()
        return SUCCESS

    def mxSmlGetDeviceVersion(self, device_id: int, unit: int, buf: Any, size: Any) -> int:
        if self._gpu(device_id) is None:
            return INVALID_DEVICE_ID
        text = {n.VERSION_DRIVER: self.state.driver, n.VERSION_BIOS: self.state.bios}.get(unit)
        return _put_string(buf, size, text)

    def mxSmlGetMemoryInfo(self, device_id: int, info: Any) -> int:
        gpu = self._gpu(device_id)
        if gpu is None:
            return INVALID_DEVICE_ID
        if gpu.memory_total_mib is None or gpu.memory_used_mib is None:
            return NOT_SUPPORTED
        mem = deref(info)
        mem.vramTotal, mem.vramUse = gpu.memory_total_mib * _KIB, gpu.memory_used_mib * _KIB
        mem.visVramTotal, mem.visVramUse = mem.vramTotal, mem.vramUse
        mem.xttTotal, mem.xttUse = 0, 0
        return SUCCESS

    def mxSmlGetDeviceIpUsage(self, device_id: int, ip: int, usage: Any) -> int:
        gpu = self._gpu(device_id)
        if gpu is None:
            return INVALID_DEVICE_ID
        if ip != n.USAGE_XCORE or gpu.util_percent is None:  # DLA/G2D are N-class only
            return NOT_SUPPORTED
        set_out(usage, gpu.util_percent)
        return SUCCESS

    def mxSmlGetTemperatureInfo(self, device_id: int, sensor: int, value: Any) -> int:
        gpu = self._gpu(device_id)
        if gpu is None:
            return INVALID_DEVICE_ID
        if sensor != n.TEMPERATURE_HOTSPOT or gpu.temperature_c is None:
            return NOT_SUPPORTED
        set_out(value, round(gpu.temperature_c * 100))
        return SUCCESS

    def mxSmlGetBoardPowerInfo(self, device_id: int, size: Any, ways: Any) -> int:
        gpu = self._gpu(device_id)
        if gpu is None:
            return INVALID_DEVICE_ID
        if gpu.power_w is None:
            return NOT_SUPPORTED
        rows = _power_ways(gpu.power_w)
        cap = deref(size)
        if cap.value < len(rows):
            cap.value = len(rows)
            return INSUFFICIENT_SIZE
        out = deref(ways)
        for i, (mv, ma, mw) in enumerate(rows):
            out[i].voltage, out[i].current, out[i].power = mv, ma, mw
        cap.value = len(rows)
        return SUCCESS

    def mxSmlGetBoardPowerLimit(self, device_id: int, limit: Any) -> int:
        gpu = self._gpu(device_id)
        if gpu is None:
            return INVALID_DEVICE_ID
        if gpu.power_cap_w is None:
            return NOT_SUPPORTED
        set_out(limit, round(gpu.power_cap_w * 1000))
        return SUCCESS

    def mxSmlGetEccState(self, device_id: int, state: Any) -> int:
        if self._gpu(device_id) is None:
            return INVALID_DEVICE_ID
        set_out(state, 1)
        return SUCCESS

    def mxSmlGetTotalEccErrors(self, device_id: int, counts: Any) -> int:
        gpu = self._gpu(device_id)
        if gpu is None:
            return INVALID_DEVICE_ID
        out = deref(counts)
        e = gpu.ecc
        out.sramCE, out.sramUE = e.get("sram_ce", 0), e.get("sram_ue", 0)
        out.dramCE, out.dramUE = e.get("dram_ce", 0), e.get("dram_ue", 0)
        out.retiredPage = e.get("retired_pages", 0)
        return SUCCESS

    def mxSmlGetDeviceUnavailableReason(self, device_id: int, reason: Any) -> int:
        gpu = self._gpu(device_id)
        if gpu is None:
            return INVALID_DEVICE_ID
        out = deref(reason)
        if gpu.unavailable is not None:
            out.unavailableCode, text = gpu.unavailable
        elif gpu.gpu_state is not None and gpu.gpu_state.lower() != "available":
            out.unavailableCode, text = 1, gpu.gpu_state
        else:
            out.unavailableCode, text = 0, ""
        out.unavailableReason = text.encode()[: n.REASON_SIZE - 1]
        return SUCCESS

    def mxSmlGetDeviceTopology(self, src: int, dst: int, level: Any) -> int:
        if self._gpu(src) is None or self._gpu(dst) is None:
            return INVALID_DEVICE_ID
        if self.state.topology is None:
            return NOT_SUPPORTED
        code = "X" if src == dst else self.state.topology.get((src, dst))
        set_out(level, _LEVELS.get(code or "", 7))  # 7: MXSML_TOPOLOGY_UNDEFINED
        return SUCCESS
