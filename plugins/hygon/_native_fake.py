"""A faithful fake of DTK's ``librocm_smi64.so`` rendered from the same state the replay shows.

The state of a scenario is what its ``hy-smi`` / DTK ``rocm-smi`` recordings show: the
``--json`` query and the concise table, parsed and merged per index with the CLI path's own
parsers and merge (sysfs is layered by the backend on both paths; of ``rocminfo`` the fake
keeps the marketing name, which is what ``rsmi_dev_name_get`` answers), plus what only the
library sees, from the scenario's ``native.toml``
(:data:`~accel.toolkit.NATIVE_STATE_FILE`)::

    [[device]]
    dcu = 0
    ecc = { correctable = 3, uncorrectable = 1 }     # rsmi_dev_ecc_count_get (UMC)
    xgmi = [1]                                       # rsmi_topo_get_link_type peers over xGMI

:class:`FakeRsmi` answers with ROCm SMI's conventions: ``uint32_t dv_ind``, ``rsmi_status_t``
codes, ``char *`` buffers with a length, bytes, milli-degrees C and microwatts.  A value the
recordings do not hold (the concise table prints no memory, ids or serial) is
``RSMI_STATUS_NOT_SUPPORTED``; ECC counts are zero unless ``native.toml`` gives them.
"""

from __future__ import annotations

import ctypes
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from accel.errors import ConfigError, ToolError
from accel.plugins.amd.layers import GpuReading, merge
from accel.toolkit import FakeLibrary, ParseContext, deref, is_masked, read_native_state, set_out
from accel.tools import Runner

from . import _native as n
from ._backend import JSON_ARGS
from ._parse import parse_concise, parse_json, parse_rocminfo

__all__ = ["FakeRsmi", "RsmiState", "fake_of_replay"]

SUCCESS, INVALID_ARGS, NOT_SUPPORTED, INSUFFICIENT_SIZE = 0, 1, 2, 11
_TOOLS = ("hy-smi", "rocm-smi")


@dataclass
class RsmiState:
    dcus: list[GpuReading]
    ecc: dict[int, tuple[int, int]] = field(default_factory=dict)
    xgmi: set[frozenset[int]] = field(default_factory=set)


def _recorded(runner: Runner, argv: list[str]) -> str | None:
    try:
        return runner.run(argv).stdout
    except ToolError:
        return None


def state_of(readings: list[GpuReading], native: Mapping[str, Any] | None = None) -> RsmiState:
    """The state behind the merged readings, with the scenario's native-only extras."""
    state = RsmiState(readings)
    indices = {r.index for r in readings}
    for entry in (native or {}).get("device", []):
        try:
            dcu = int(entry["dcu"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"native state: a [[device]] names no DCU: {entry!r}") from exc
        if dcu not in indices:
            raise ConfigError(f"native state: DCU {dcu} is not in the scenario")
        ecc = dict(entry.get("ecc", {}))
        state.ecc[dcu] = (int(ecc.get("correctable", 0)), int(ecc.get("uncorrectable", 0)))
        state.xgmi.update(frozenset((dcu, int(peer))) for peer in entry.get("xgmi", []))
    return state


def fake_of_replay(runner: Runner) -> FakeRsmi:
    """The fake of the host a replay ``runner`` answers from (``hy-smi`` or DTK ``rocm-smi``)."""
    for tool in _TOOLS:
        json_text = _recorded(runner, [tool, *JSON_ARGS])
        table_text = _recorded(runner, [tool])
        if json_text is not None or table_text is not None:
            break
    else:
        raise ConfigError("the replay recorded neither hy-smi nor rocm-smi")
    layers: dict[int, list[tuple[str, GpuReading]]] = {}
    if json_text is not None:
        readings, _errors, _unit = parse_json(json_text, ParseContext(tool, f"{tool} --json"))
        for r in readings:
            layers.setdefault(r.index or 0, []).append((tool, r))
    if table_text is not None:
        rows, _errors = parse_concise(table_text, ParseContext(tool, tool))
        for row in rows:
            c = GpuReading(
                index=row.index,
                power_watts=row.power_watts,
                power_cap_watts=row.power_cap_watts,
                utilization_ratio=row.utilization_ratio,
            )
            if row.temperature_celsius is not None:
                c.temperatures_celsius["edge"] = row.temperature_celsius
            layers.setdefault(row.index, []).append((f"{tool} (concise)", c))
    # rocminfo's marketing name is the name the library's rsmi_dev_name_get gives (joined on the
    # unique id, or the only agent of a one-DCU host, as the CLI path joins it).
    agents = []
    info = _recorded(runner, ["rocminfo"])
    if info is not None:
        agents = parse_rocminfo(info, ParseContext("rocminfo", "rocminfo"))
    merged = []
    for index in sorted(layers):
        m = merge(layers[index])
        m.index = index
        agent = next((a for a in agents if a.unique_id and a.unique_id == m.unique_id), None)
        if agent is None and len(agents) == 1 and len(layers) == 1:
            agent = agents[0]
        if m.name is None and agent is not None and agent.marketing_name and not is_masked(agent.marketing_name):
            m.name = agent.marketing_name
        merged.append(m)
    return FakeRsmi(state_of(merged, read_native_state(runner)))


def _bdf_int(bus_id: str) -> int:
    dom, bus, rest = bus_id.split(":")
    dev, fn = rest.split(".")
    return (int(dom, 16) << 32) | (int(bus, 16) << 8) | (int(dev, 16) << 3) | int(fn)


class FakeRsmi(FakeLibrary):
    """``librocm_smi64.so`` answering from an :class:`RsmiState`."""

    TABLE = n.TABLE

    def __init__(self, state: RsmiState) -> None:
        super().__init__()
        self.state = state
        self.inits = 0

    def _dcu(self, dv_ind: int) -> GpuReading | None:
        if not self.inits or not 0 <= dv_ind < len(self.state.dcus):
            return None
        return self.state.dcus[dv_ind]

    def rsmi_init(self, flags: int) -> int:
        self.inits += 1
        return SUCCESS

    def rsmi_shut_down(self) -> int:
        self.inits = max(0, self.inits - 1)
        return SUCCESS

    def rsmi_num_monitor_devices(self, count: Any) -> int:
        set_out(count, len(self.state.dcus) if self.inits else 0)
        return SUCCESS

    def _string(self, dv_ind: int, buf: Any, length: int, text: str | None) -> int:
        if self._dcu(dv_ind) is None:
            return INVALID_ARGS
        if text is None:
            return NOT_SUPPORTED
        raw = text.encode()
        if length < len(raw) + 1:
            return INSUFFICIENT_SIZE
        ctypes.memmove(buf, raw + b"\0", len(raw) + 1)
        return SUCCESS

    def rsmi_dev_name_get(self, dv_ind: int, buf: Any, length: int) -> int:
        dcu = self._dcu(dv_ind)
        return self._string(dv_ind, buf, length, None if dcu is None else dcu.name)

    def rsmi_dev_serial_number_get(self, dv_ind: int, buf: Any, length: int) -> int:
        dcu = self._dcu(dv_ind)
        return self._string(dv_ind, buf, length, None if dcu is None else dcu.serial_number)

    def _u64(self, dv_ind: int, out: Any, value: int | float | None) -> int:
        if self._dcu(dv_ind) is None:
            return INVALID_ARGS
        if value is None:
            return NOT_SUPPORTED
        set_out(out, int(value))
        return SUCCESS

    def rsmi_dev_unique_id_get(self, dv_ind: int, uid: Any) -> int:
        dcu = self._dcu(dv_ind)
        value = int(dcu.unique_id, 16) if dcu is not None and dcu.unique_id else None
        return self._u64(dv_ind, uid, value)

    def rsmi_dev_pci_id_get(self, dv_ind: int, bdf: Any) -> int:
        dcu = self._dcu(dv_ind)
        return self._u64(dv_ind, bdf, _bdf_int(dcu.bus_id) if dcu is not None and dcu.bus_id else None)

    def rsmi_dev_memory_total_get(self, dv_ind: int, mem_type: int, total: Any) -> int:
        dcu = self._dcu(dv_ind)
        if mem_type != n.MEM_TYPE_VRAM:
            return NOT_SUPPORTED
        return self._u64(dv_ind, total, None if dcu is None else dcu.memory_total_bytes)

    def rsmi_dev_memory_usage_get(self, dv_ind: int, mem_type: int, used: Any) -> int:
        dcu = self._dcu(dv_ind)
        if mem_type != n.MEM_TYPE_VRAM:
            return NOT_SUPPORTED
        return self._u64(dv_ind, used, None if dcu is None else dcu.memory_used_bytes)

    def rsmi_dev_busy_percent_get(self, dv_ind: int, busy: Any) -> int:
        dcu = self._dcu(dv_ind)
        ratio = None if dcu is None else dcu.utilization_ratio
        return self._u64(dv_ind, busy, None if ratio is None else round(ratio * 100))

    def rsmi_dev_temp_metric_get(self, dv_ind: int, sensor: int, metric: int, temp: Any) -> int:
        dcu = self._dcu(dv_ind)
        if dcu is None:
            return INVALID_ARGS
        label = next((k for k, v in n.TEMP_SENSORS.items() if v == sensor), None)
        value = dcu.temperatures_celsius.get(label or "")
        if metric != n.TEMP_CURRENT or value is None:
            return NOT_SUPPORTED
        set_out(temp, round(value * 1000))
        return SUCCESS

    def rsmi_dev_power_ave_get(self, dv_ind: int, sensor: int, power: Any) -> int:
        dcu = self._dcu(dv_ind)
        watts = None if dcu is None else dcu.power_watts
        return self._u64(dv_ind, power, None if watts is None else round(watts * 1e6))

    def rsmi_dev_power_cap_get(self, dv_ind: int, sensor: int, cap: Any) -> int:
        dcu = self._dcu(dv_ind)
        watts = None if dcu is None else dcu.power_cap_watts
        return self._u64(dv_ind, cap, None if watts is None else round(watts * 1e6))

    def rsmi_dev_ecc_count_get(self, dv_ind: int, block: int, counts: Any) -> int:
        if self._dcu(dv_ind) is None:
            return INVALID_ARGS
        if block != n.GPU_BLOCK_UMC:
            return NOT_SUPPORTED
        out = deref(counts)
        out.correctable_err, out.uncorrectable_err = self.state.ecc.get(dv_ind, (0, 0))
        return SUCCESS

    def rsmi_topo_get_link_type(self, src: int, dst: int, hops: Any, kind: Any) -> int:
        if self._dcu(src) is None or self._dcu(dst) is None:
            return INVALID_ARGS
        xgmi = frozenset((src, dst)) in self.state.xgmi
        set_out(hops, 1 if xgmi else 2)
        set_out(kind, n.IOLINK_XGMI if xgmi else 1)  # 1: RSMI_IOLINK_TYPE_PCIEXPRESS
        return SUCCESS
