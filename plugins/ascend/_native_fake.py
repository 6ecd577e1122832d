"""A faithful fake ``libdcmi.so`` rendered from the same device state the CLI replay shows.

The state of a scenario is what its ``npu-smi`` recordings show, parsed by the CLI path's own
parsers (``info``; ``info -m`` and ``info -t topo`` where recorded), plus what only DCMI sees,
from the scenario's ``native.toml`` (:data:`~accel.toolkit.NATIVE_STATE_FILE`)::

    [[chip]]
    npu = 0                    # NPU id (DCMI card id)
    chip = 0                   # chip id (DCMI device id)
    error_codes = [0x80E18401] # dcmi_get_device_errorcode_v2
    ecc_double_bit = 2         # dcmi_get_device_ecc_info: current double-bit errors
    ecc_double_bit_total = 5
    [[chip.event]]             # dcmi_get_device_current_fault_event
    id = 0x80E01801
    severity = 2               # 0 warning, 1 minor, 2 major, 3 critical
    name = "HBM ECC multi-bit error"

:class:`FakeDcmi` answers with DCMI's conventions: ``(card_id, device_id)`` pairs, the logic id
call's out-pointer first, MB / 0.1 W units, ``DCMI_ERR_CODE_*`` returns.  A value the state does
not hold (npu-smi printed ``NA`` or a placeholder) is ``DCMI_ERR_CODE_NOT_SUPPORT``; a chip
the runtime does not see (an MCU row) has no logic id.
"""

from __future__ import annotations

import contextlib
import ctypes
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from accel.errors import ConfigError, ToolError
from accel.toolkit import FakeLibrary, Matrix, deref, is_masked, read_native_state, set_out
from accel.tools import Runner

from . import _native as n
from ._parse import TOOL, ChipMapping, NpuChip, parse_info, parse_mapping, parse_topo

__all__ = ["ChipState", "DcmiState", "FakeDcmi", "fake_of_replay", "state_from_npu_smi"]

OK = 0
INVALID_PARAMETER = -8001
INVALID_DEVICE_ID = -8007
NOT_SUPPORT = -8255
MiB = 2**20
_HEALTH_CODES = {v.lower(): k for k, v in n.HEALTH_NAMES.items()} | {"fault": 3}
_TOPO_ENUM = {v: k for k, v in n.TOPO_CODES.items()}


@dataclass
class FaultEvent:
    event_id: int
    severity: int
    name: str
    serial: int
    assertion: int = 1


@dataclass
class ChipState:
    """One chip as DCMI would report it (``None``: not held, NOT_SUPPORT)."""

    card: int
    device: int
    logic_id: int
    name: str | None = None
    bus_id: str | None = None
    health: int | None = None
    temperature_c: int | None = None
    power_decawatts: int | None = None
    aicore_percent: int | None = None
    hbm_total_mib: int | None = None
    hbm_used_mib: int | None = None
    ddr_total_mib: int | None = None
    ddr_used_mib: int | None = None
    hugepages_total: int = 0
    hugepages_used: int = 0
    cpu_affinity: str | None = None
    error_codes: list[int] = field(default_factory=list)
    ecc_double_bit: int | None = None
    ecc_double_bit_total: int = 0
    events: list[FaultEvent] = field(default_factory=list)


@dataclass
class DcmiState:
    driver_version: str | None
    chips: list[ChipState]
    #: ``((card, dev), (card, dev))`` -> dcmi_topo_type, both orders.
    topo: dict[tuple[tuple[int, int], tuple[int, int]], int] = field(default_factory=dict)

    def chip(self, card: int, dev: int) -> ChipState | None:
        return next((c for c in self.chips if (c.card, c.device) == (card, dev)), None)


def _mib(value: int | None) -> int | None:
    return None if value is None else value // MiB


def _label_chip(label: str, chips: Sequence[ChipState], phy: dict[int, ChipState]) -> ChipState | None:
    """The chip a ``npu-smi info -t topo`` label names, by the CLI path's rule."""
    num = Matrix.label_index(label)
    if num is None:
        return None
    by_logic = next((c for c in chips if c.logic_id == num), None)
    if label.lower().startswith("phy"):
        return phy.get(num) or by_logic
    of_npu = [c for c in chips if c.card == num]
    return of_npu[0] if len(of_npu) == 1 else by_logic


def state_from_npu_smi(
    chips: Sequence[NpuChip],
    mapping: Sequence[ChipMapping],
    topo: Matrix | None,
    driver_version: str | None,
    native: Mapping[str, Any] | None = None,
) -> DcmiState:
    """The device state behind ``npu-smi`` outputs, with the scenario's native-only extras."""
    mapped = {(m.npu_id, m.chip_id): m for m in mapping}
    out: list[ChipState] = []
    phy: dict[int, ChipState] = {}
    for c in chips:
        m = mapped.get((c.npu_id, c.chip_id))
        if m is not None and m.is_mcu:
            continue
        logic = m.logic_id if m is not None and m.logic_id is not None else c.position
        health = None
        if c.health and c.health.strip():
            health = _HEALTH_CODES.get(c.health.strip().lower(), 2)
        st = ChipState(
            card=c.npu_id,
            device=c.chip_id,
            logic_id=logic,
            name=(m.name if m is not None and m.name and (c.name is None or is_masked(c.name)) else c.name),
            bus_id=c.bus_id,
            health=health,
            temperature_c=None if c.temperature_celsius is None else round(c.temperature_celsius),
            power_decawatts=None if c.power_watts is None else round(c.power_watts * 10),
            aicore_percent=None if c.aicore_ratio is None else round(c.aicore_ratio * 100),
            hbm_total_mib=_mib(c.hbm_total_bytes),
            hbm_used_mib=_mib(c.hbm_used_bytes),
            ddr_total_mib=_mib(c.ddr_total_bytes),
            ddr_used_mib=_mib(c.ddr_used_bytes),
            hugepages_total=c.hugepages_total or 0,
            hugepages_used=c.hugepages_used or 0,
        )
        out.append(st)
        if c.phy_id is not None:
            phy[c.phy_id] = st
    state = DcmiState(driver_version, out)
    if topo is not None:
        for (la, lb), code in topo.codes.items():
            a, b = _label_chip(la, out, phy), _label_chip(lb, out, phy)
            if a is None or b is None or a is b or code not in _TOPO_ENUM:
                continue
            state.topo[((a.card, a.device), (b.card, b.device))] = _TOPO_ENUM[code]
        for st in out:
            labels = (f"NPU{st.card}", *(f"Phy-ID{p}" for p, c in phy.items() if c is st), f"NPU{st.logic_id}")
            st.cpu_affinity = next((topo.affinity[lb] for lb in labels if topo.affinity.get(lb)), None)
    _overlay(state, native or {})
    return state


def _overlay(state: DcmiState, native: Mapping[str, Any]) -> None:
    serial = 1
    for entry in native.get("chip", []):
        try:
            st = state.chip(int(entry["npu"]), int(entry.get("chip", 0)))
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"native state: a [[chip]] needs npu (and chip): {entry!r}") from exc
        if st is None:
            raise ConfigError(
                f"native state: no chip npu={entry.get('npu')} chip={entry.get('chip', 0)} in the scenario"
            )
        st.error_codes.extend(int(x) for x in entry.get("error_codes", []))
        if "ecc_double_bit" in entry:
            st.ecc_double_bit = int(entry["ecc_double_bit"])
            st.ecc_double_bit_total = int(entry.get("ecc_double_bit_total", st.ecc_double_bit))
        for ev in entry.get("event", []):
            st.events.append(FaultEvent(int(ev["id"]), int(ev.get("severity", 2)), str(ev.get("name", "")), serial))
            serial += 1


def fake_of_replay(runner: Runner) -> FakeDcmi:
    """The fake of the host a replay ``runner`` answers from: its ``npu-smi`` recordings parsed
    by the CLI path's parsers, plus the scenario's ``native.toml``."""
    info = parse_info(runner.run([TOOL, "info"]).stdout)
    mapping: list[ChipMapping] = []
    topo: Matrix | None = None
    with contextlib.suppress(ToolError):  # a host whose replay never recorded -m
        mapping = parse_mapping(runner.run([TOOL, "info", "-m"]).stdout)
    with contextlib.suppress(ToolError):  # nor -t topo
        topo = parse_topo(runner.run([TOOL, "info", "-t", "topo"]).stdout)
    driver = info.driver_version or info.tool_version
    return FakeDcmi(state_from_npu_smi(info.chips, mapping, topo, driver, read_native_state(runner)))


def _bdf(bus_id: str) -> tuple[int, int, int, int]:
    dom, bus, rest = bus_id.split(":")
    dev, fn = rest.split(".")
    return int(dom, 16), int(bus, 16), int(dev, 16), int(fn, 16)


def _put(buf: Any, text: str, size: int) -> None:
    raw = text.encode()[: size - 1]
    ctypes.memmove(buf, raw, len(raw))


class FakeDcmi(FakeLibrary):
    """``libdcmi.so`` answering from a :class:`DcmiState`."""

    TABLE = n.TABLE

    def __init__(self, state: DcmiState) -> None:
        super().__init__()
        self.state = state
        self.inited = False

    def _chip(self, card: int, dev: int) -> ChipState | None:
        return self.state.chip(card, dev) if self.inited else None

    def dcmi_init(self) -> int:
        self.inited = True
        return OK

    def dcmi_get_driver_version(self, buf: Any, length: int) -> int:
        if self.state.driver_version is None:
            return NOT_SUPPORT
        raw = self.state.driver_version.encode()[: length - 1]
        ctypes.memmove(buf, raw, len(raw))
        return OK

    def dcmi_get_card_list(self, num: Any, cards: Any, length: int) -> int:
        ids = list(dict.fromkeys(c.card for c in self.state.chips))
        if length < len(ids):
            return INVALID_PARAMETER
        set_out(num, len(ids))
        for i, card in enumerate(ids):
            cards[i] = card
        return OK

    def dcmi_get_device_num_in_card(self, card: int, num: Any) -> int:
        devs = [c.device for c in self.state.chips if c.card == card]
        if not devs:
            return INVALID_DEVICE_ID
        set_out(num, max(devs) + 1)
        return OK

    def dcmi_get_device_logic_id(self, out: Any, card: int, dev: int) -> int:
        chip = self._chip(card, dev)
        if chip is None:
            return INVALID_DEVICE_ID
        set_out(out, chip.logic_id)
        return OK

    def dcmi_get_device_chip_info(self, card: int, dev: int, out: Any) -> int:
        chip = self._chip(card, dev)
        if chip is None:
            return INVALID_DEVICE_ID
        if chip.name is None:
            return NOT_SUPPORT
        info = deref(out)
        _put(info.chip_name, chip.name, 32)
        _put(info.chip_type, "Ascend", 32)
        return OK

    def dcmi_get_device_pcie_info_v2(self, card: int, dev: int, out: Any) -> int:
        chip = self._chip(card, dev)
        if chip is None:
            return INVALID_DEVICE_ID
        if chip.bus_id is None:
            return NOT_SUPPORT
        p = deref(out)
        p.domain, p.bdf_busid, p.bdf_deviceid, p.bdf_funcid = _bdf(chip.bus_id)
        p.venderid = 0x19E5
        return OK

    def dcmi_get_device_health(self, card: int, dev: int, out: Any) -> int:
        chip = self._chip(card, dev)
        if chip is None:
            return INVALID_DEVICE_ID
        if chip.health is None:
            return NOT_SUPPORT
        set_out(out, chip.health)
        return OK

    def dcmi_get_device_errorcode_v2(self, card: int, dev: int, count: Any, codes: Any, length: int) -> int:
        chip = self._chip(card, dev)
        if chip is None:
            return INVALID_DEVICE_ID
        shown = chip.error_codes[:length]
        set_out(count, len(shown))
        for i, code in enumerate(shown):
            codes[i] = code
        return OK

    def dcmi_get_device_temperature(self, card: int, dev: int, out: Any) -> int:
        return self._scalar(card, dev, out, "temperature_c")

    def dcmi_get_device_power_info(self, card: int, dev: int, out: Any) -> int:
        return self._scalar(card, dev, out, "power_decawatts")

    def dcmi_get_device_utilization_rate(self, card: int, dev: int, kind: int, out: Any) -> int:
        if kind != n.UTIL_AICORE:
            return NOT_SUPPORT
        return self._scalar(card, dev, out, "aicore_percent")

    def _scalar(self, card: int, dev: int, out: Any, name: str) -> int:
        chip = self._chip(card, dev)
        if chip is None:
            return INVALID_DEVICE_ID
        value = getattr(chip, name)
        if value is None:
            return NOT_SUPPORT
        set_out(out, value)
        return OK

    def dcmi_get_device_hbm_info(self, card: int, dev: int, out: Any) -> int:
        chip = self._chip(card, dev)
        if chip is None:
            return INVALID_DEVICE_ID
        if chip.hbm_total_mib is None:
            return NOT_SUPPORT
        h = deref(out)
        h.memory_size, h.memory_usage = chip.hbm_total_mib, chip.hbm_used_mib or 0
        return OK

    def dcmi_get_device_memory_info_v3(self, card: int, dev: int, out: Any) -> int:
        chip = self._chip(card, dev)
        if chip is None:
            return INVALID_DEVICE_ID
        if chip.ddr_total_mib is None:
            return NOT_SUPPORT
        m = deref(out)
        m.memory_size = chip.ddr_total_mib
        m.memory_available = chip.ddr_total_mib - (chip.ddr_used_mib or 0)
        m.hugepagesize = 2048
        m.hugepages_total, m.hugepages_free = chip.hugepages_total, chip.hugepages_total - chip.hugepages_used
        return OK

    def dcmi_get_device_ecc_info(self, card: int, dev: int, kind: int, out: Any) -> int:
        chip = self._chip(card, dev)
        if chip is None:
            return INVALID_DEVICE_ID
        if chip.ecc_double_bit is None:
            return NOT_SUPPORT
        e = deref(out)
        e.enable_flag = 1
        e.double_bit_error_cnt, e.total_double_bit_error_cnt = chip.ecc_double_bit, chip.ecc_double_bit_total
        return OK

    def dcmi_get_topo_info_by_device_id(self, c1: int, d1: int, c2: int, d2: int, out: Any) -> int:
        if self._chip(c1, d1) is None or self._chip(c2, d2) is None:
            return INVALID_DEVICE_ID
        if (c1, d1) == (c2, d2):
            set_out(out, 0)
            return OK
        kind = self.state.topo.get(((c1, d1), (c2, d2)), self.state.topo.get(((c2, d2), (c1, d1))))
        if kind is None:
            return NOT_SUPPORT
        set_out(out, kind)
        return OK

    def dcmi_get_affinity_cpu_info_by_device_id(self, card: int, dev: int, buf: Any, length: Any) -> int:
        chip = self._chip(card, dev)
        if chip is None:
            return INVALID_DEVICE_ID
        if chip.cpu_affinity is None:
            return NOT_SUPPORT
        size = deref(length).value
        _put(buf, chip.cpu_affinity, size)
        set_out(length, min(len(chip.cpu_affinity), size - 1))
        return OK

    def dcmi_get_device_current_fault_event(self, card: int, dev: int, buf: Any, length: int, count: Any) -> int:
        chip = self._chip(card, dev)
        if chip is None:
            return INVALID_DEVICE_ID
        shown = chip.events[:length]
        for i, ev in enumerate(shown):
            slot = buf[i]
            slot.type = 0
            e = slot.event_t.dms_event
            e.event_id, e.severity, e.assertion, e.event_serial_num = ev.event_id, ev.severity, ev.assertion, ev.serial
            e.deviceid = dev
            e.event_name = ev.name.encode()[:255]
        set_out(count, len(shown))
        return OK
