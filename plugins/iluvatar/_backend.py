"""The Iluvatar CoreX backend: ``ixsmi`` table, ``ixsmi -L`` UUIDs and ``ixsmi topo -m``.

BI-V150 boards carry two GPUs: both get the board's ``board_id`` (and a ``die_pair`` domain),
and the board power printed on one chip stays on that chip only.  Hung-card sentinels
become a critical ``DeviceWedged`` condition instead of readings.
"""

from __future__ import annotations

from accel.model import (
    Action,
    Capabilities,
    Device,
    DeviceKind,
    Domain,
    DomainKind,
    HealthCondition,
    Severity,
    Subsystem,
)
from accel.toolkit import (
    Collection,
    DualPathBackend,
    NativeLibrary,
    ProcessesSurface,
    Snapshot,
    condition,
    processes_of,
    topo_links,
)
from accel.tools import Runner

from . import _native
from ._parse import SEARCH_PATH, TOOL, pair_boards, parse_table

__all__ = ["IluvatarBackend"]


class IluvatarBackend(ProcessesSurface, DualPathBackend):
    """Backend ``iluvatar``: IXML (``libixml.so``) or ``ixsmi`` over a runner (see
    :mod:`accel.tools`); ``-o read=native|cli|auto`` picks (:class:`~accel.toolkit.DualPathBackend`)."""

    backend_name = "iluvatar"
    tool = TOOL
    search_path = SEARCH_PATH
    kind = DeviceKind.GPU
    visible_env = "CUDA_VISIBLE_DEVICES"
    torch_device_type = "cuda"
    library = _native.LIBRARY
    native_table = _native.TABLE
    native_errors = _native.ERRORS

    def load_native(self) -> object:
        return _native.load_ixml()

    def fake_native(self, runner: Runner) -> object:
        from ._native_fake import fake_of_replay

        return fake_of_replay(runner)

    def collect_native(self, col: Collection, lib: NativeLibrary) -> Snapshot:
        """The IXML read: the same units, boards, ids and sentinel rule as the ``ixsmi`` path."""
        read = _native.read_ixml(lib)
        col.api_version = read.driver_version
        col.problems.extend(read.problems)
        col.require(read.readings)
        pair_boards(read.readings)
        versions = {"driver": read.driver_version}
        devices, samples = self.build(
            col, read.readings, versions=versions, capabilities=Capabilities(time_slicing=True)
        )
        return col.snapshot(devices, samples, domains=_board_domains(devices))

    def collect_cli(self, col: Collection) -> Snapshot:
        table = col.required(lambda text, cmd: parse_table(text, command=cmd))
        readings, _listed = col.uuids(table.readings, ("GPU",))
        pair_boards(readings)
        for r in readings:
            if r.bus_id is not None and r.bus_id in table.resets:
                r.conditions.append(_reset_note())
        versions = {"driver": table.driver_version, "runtime_name": "cuda", "runtime": table.cuda_version}
        devices, samples = self.build(col, readings, versions=versions, capabilities=Capabilities(time_slicing=True))
        domains = _board_domains(devices)
        links, _ = topo_links(col, devices, label="GPU", fast={})
        return col.snapshot(
            devices, samples, links=links, domains=domains, processes=processes_of(table.processes, devices)
        )


def _board_domains(devices: list[Device]) -> list[Domain]:
    """The two GPUs of a BI-V150 board as a die pair."""
    boards: dict[str, list[str]] = {}
    for d in devices:
        if d.board_id is not None:
            boards.setdefault(d.board_id, []).append(d.id)
    return [Domain(id=b, kind=DomainKind.DIE_PAIR, members=tuple(m)) for b, m in boards.items() if len(m) > 1]


def _reset_note() -> HealthCondition:
    message = "ixsmi -r reported this GPU as successfully reset after the table was printed"
    return condition(Subsystem.DEVICE, "DeviceReset", Severity.INFO, Action.NONE, message)
