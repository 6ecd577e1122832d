"""The Enflame backend: ``efsmi`` table and ``efsmi -q`` detail, merged by bus id.

SR-IOV virtual functions (``GCU Virt`` = ``SRIOV``) of one card share its serial number.
By default each VF is a device (what a runtime schedules, named by its own PCI address) and
the card is kept as the relation between them: ``board_id`` ``sn-<serial>``, a ``pcie_switch``
-free ``other`` domain per card and ``partition_mode`` ``sriov``.  With
``options={"sriov": "card"}`` the card becomes the device (id ``enflame:sn-<serial>``, since a
VM or container sees no physical function to name it by) and each VF a ``sriov_vf``
partition of it; that view has no PCI address or telemetry for the card itself.

RMA flags, double-bit ECC counts and ``Health: False`` of ``-q`` are health conditions.  The
binding is ``TOPS_VISIBLE_DEVICES=<efsmi index>``, torch ``gcu``, collective ``eccl``: what
Enflame's own vLLM platform (EnflameTechnology/vllm-gcu) declares (``docs/frameworks.md``).

Or EFML (``libefml.so``): ``-o read=native|cli|auto`` picks the path
(:class:`~accel.toolkit.DualPathBackend`); both paths hand their readings to the same assembly
(VF/card views, ids, the earned-health rule).  EFML adds ``EfmlGetDevHealth``, ECC counters and
per-device events (``EfmlGetEventV2``), delivered by ``poll_events()``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from accel.errors import AccelError, ConfigError
from accel.model import (
    Capabilities,
    Device,
    DeviceKind,
    Domain,
    DomainKind,
    Health,
    Partition,
    PartitionFamily,
    PartitionProfile,
    PartitionScheme,
    device_id_for,
    validate,
)
from accel.plugin import DeviceEvent
from accel.toolkit import (
    Collection,
    NativeEventsSurface,
    NativeLibrary,
    PartitionsSurface,
    Snapshot,
    UnitReading,
    merge_readings,
)
from accel.tools import Runner

from . import _native
from ._parse import SEARCH_PATH, TOOL, is_vf, parse_query, parse_table

__all__ = ["EnflameBackend"]

_VIEWS = ("vf", "card")


#: Fields EFML can answer NOT_SUPPORTED for: on the device, and in the telemetry sample.
_DEVICE_FIELDS = frozenset({"pci.bus_id", "memory"})
_TELEMETRY_FIELDS = frozenset({"utilization_ratio", "temperature_celsius", "power_watts", "ecc_uncorrected_total"})


class EnflameBackend(PartitionsSurface, NativeEventsSurface):
    """Backend ``enflame``: EFML or ``efsmi`` over a runner (see :mod:`accel.tools`)."""

    backend_name = "enflame"
    tool = TOOL
    search_path = SEARCH_PATH
    kind = DeviceKind.GCU
    #: TopsRuntime's visibility variable, by efsmi's device index: vllm-gcu's platform sets
    #: ``device_control_env_var = "TOPS_VISIBLE_DEVICES"`` and ``device_type = "gcu"``; its
    #: collectives are ECCL (``libeccl.so``).  ``ENFLAME_VISIBLE_DEVICES`` is the container
    #: runtime's variable (gcushare-device-plugin sets it for the toolkit to mount the device),
    #: not the process's; see ``docs/frameworks.md``.
    visible_env = "TOPS_VISIBLE_DEVICES"
    torch_device_type = "gcu"
    collective_backend = "eccl"
    ray_resource = "GPU"
    library = _native.LIBRARY
    native_table = _native.TABLE
    native_errors = _native.ERRORS

    def load_native(self) -> object:
        return _native.load_efml()

    def fake_native(self, runner: Runner) -> object:
        from ._native_fake import fake_of_replay

        return fake_of_replay(runner)

    def _view(self) -> str:
        view = self.config.option("sriov", "vf")
        if view not in _VIEWS:
            raise ConfigError(f"enflame option sriov={view!r}: expected one of {', '.join(_VIEWS)}")
        return str(view)

    def collect_native(self, col: Collection, lib: NativeLibrary) -> Snapshot:
        """The EFML read, assembled as the ``efsmi`` readings are."""
        view = self._view()
        read = _native.read_efml(lib)
        col.api_version = read.driver_version
        col.problems.extend(read.problems)
        col.require(read.readings)
        self._indices = [r.index for r in read.readings if r.index is not None]
        for r in read.readings:  # name each device before its events are read
            with contextlib.suppress(AccelError):
                self._event_ids[r.index or 0] = r.stable_id(self.backend_name)
        self.native_events(0.0)
        for r in read.readings:
            kept = self._event_ids.get(r.index or 0)
            if kept is not None:
                r.conditions.extend(self.event_conditions(kept))
        never = frozenset().union(*read.never.values()) if read.never else frozenset()
        snap = self._assemble(
            col,
            read.readings,
            read.driver_version,
            view,
            unsupported=lambda r: read.never.get(r.index or 0, set()) & _DEVICE_FIELDS,
            telemetry_unsupported=never & _TELEMETRY_FIELDS,
        )
        return snap

    def read_events(self, lib: NativeLibrary, timeout_s: float) -> Sequence[DeviceEvent]:
        """Each device's pending events (``EfmlGetEventV2`` is non-blocking: ``timeout_s`` is
        not waited)."""
        events: list[DeviceEvent] = []
        for index in getattr(self, "_indices", []):
            dev_id = self._event_ids.setdefault(index, self._id_of(index))
            for _ in range(64):  # a bound: a library that never says "no event" stops here
                try:
                    cond = _native.read_event(lib, index)
                except AccelError:
                    break
                if cond is None:
                    break
                events.append(DeviceEvent(device_id=dev_id, timestamp=datetime.now(UTC), condition=cond))
        return events

    @property
    def _event_ids(self) -> dict[int, str]:
        ids: dict[int, str] | None = getattr(self, "_ids_by_index", None)
        if ids is None:
            ids = {}
            self._ids_by_index = ids
        return ids

    def _id_of(self, index: int) -> str:
        return f"{self.backend_name}:index-{index}"  # until a snapshot names the device

    def collect_cli(self, col: Collection) -> Snapshot:
        view = self._view()
        table = col.main(lambda text, cmd: parse_table(text, command=cmd))
        readings: list[UnitReading] = []
        driver = None
        if table is not None:
            col.problems.extend(table.problems)
            readings, driver = table.readings, table.driver_version
        query = col.extra(lambda text, cmd: parse_query(text, command=cmd), "-q")
        if query is not None:
            col.problems.extend(query.problems)
            readings = merge_readings(readings, query.readings)
            driver = driver or query.driver_version
        col.require(readings)
        return self._assemble(col, readings, driver, view)

    def _assemble(
        self,
        col: Collection,
        readings: list[UnitReading],
        driver: str | None,
        view: str,
        *,
        unsupported: Any = None,
        telemetry_unsupported: frozenset[str] = frozenset(),
    ) -> Snapshot:
        """Both paths' readings as devices: each VF a device (``vf``) or each card one (``card``)."""
        modes = _modes if unsupported is None else (lambda r: {**_modes(r), "unsupported": unsupported(r)})
        extra: dict[str, Any] = {"telemetry_unsupported": telemetry_unsupported} if telemetry_unsupported else {}
        cards: dict[str, list[UnitReading]] = {}
        for r in readings:
            if is_vf(r):
                r.board_id = f"sn-{r.serial_number}" if r.serial_number else None
                cards.setdefault(r.serial_number or f"unknown-{r.bus_id}", []).append(r)
        versions = {"driver": driver}
        if view == "vf":
            devices, samples = self.build(col, readings, versions=versions, per_unit=modes, **extra)
            groups: dict[str, list[str]] = {}
            for d in devices:
                if d.board_id is not None:
                    groups.setdefault(d.board_id, []).append(d.id)
            domains = [Domain(id=f"card-{b}", kind=DomainKind.OTHER, members=tuple(m)) for b, m in groups.items()]
            return col.snapshot(devices, samples, domains=domains)
        devices, samples = self.build(
            col, [r for r in readings if not is_vf(r)], versions=versions, per_unit=modes, **extra
        )
        partitions: list[Partition] = []
        profiles: list[PartitionProfile] = []
        for serial, vfs in cards.items():
            vf_devices, _ = self.build(col, vfs, versions=versions, per_unit=modes, **extra)
            card, parts = _card(serial, vfs, vf_devices, driver, col.problems)
            if card is not None:
                devices.append(card)
                partitions.extend(parts)
                profiles.append(
                    PartitionProfile(
                        name="sriov-vf",
                        parent_id=card.id,
                        family=PartitionFamily.SRIOV_VF,
                        memory_bytes=parts[0].memory_bytes,
                        max_instances=len(parts),
                    )
                )
        return col.snapshot(devices, samples, partitions=partitions, profiles=profiles)


def _modes(reading: UnitReading) -> dict[str, Any]:
    """A VF is one SR-IOV function of its card."""
    if not is_vf(reading):
        return {}
    return {
        "capabilities": Capabilities(sriov=True, partitioning=(PartitionScheme.SRIOV,)),
        "partition_mode": {"scheme": PartitionScheme.SRIOV},
    }


def _card(
    serial: str, vfs: list[UnitReading], built: list[Device], driver: str | None, problems: list[AccelError]
) -> tuple[Device | None, list[Partition]]:
    """One SR-IOV card (a device) and its virtual functions (partitions)."""
    card_id = device_id_for("enflame", uuid=f"sn-{serial}")
    if not built:
        return None, []
    try:
        card = validate(
            Device,
            {
                "id": card_id,
                "vendor": "enflame",
                "kind": DeviceKind.GCU,
                "model": vfs[0].model or "unknown",
                "serial_number": None if serial.startswith("unknown-") else serial,
                "versions": {"driver": driver, "firmware": dict(vfs[0].firmware)},
                "capabilities": Capabilities(sriov=True, partitioning=(PartitionScheme.SRIOV,)),
                "partition_mode": {"scheme": PartitionScheme.SRIOV},
                "health": Health(conditions=tuple(c for d in built for c in d.health.conditions)),
                "extras": {"enflame.com/virtualFunctions": len(built)},
            },
            what=f"enflame card {card_id}",
        )
    except AccelError as exc:
        problems.append(exc)
        return None, []
    parts = [
        Partition(
            id=vf.id,
            parent_id=card_id,
            profile="sriov-vf",
            family=PartitionFamily.SRIOV_VF,
            memory_bytes=vf.memory_total_bytes,
            binding=vf.binding,
            health=vf.health,
        )
        for vf in built
    ]
    return card, parts
