"""The Iluvatar CoreX backend: ``ixsmi`` table, ``ixsmi -L`` UUIDs and ``ixsmi topo -m``.

BI-V150 boards carry two GPUs: both get the board's ``board_id`` (and a ``die_pair`` domain),
and the board power printed on one chip stays on that chip only.  Hung-card sentinels
become a critical ``DeviceWedged`` condition instead of readings.
"""

from __future__ import annotations

from accel.model import Action, Capabilities, DeviceKind, Domain, DomainKind, HealthCondition, Severity, Subsystem
from accel.toolkit import (
    Collection,
    ProcessesSurface,
    Snapshot,
    ToolBackend,
    condition,
    processes_of,
    topo_links,
)

from ._parse import SEARCH_PATH, TOOL, pair_boards, parse_table

__all__ = ["IluvatarBackend"]


class IluvatarBackend(ProcessesSurface, ToolBackend):
    """Backend ``iluvatar`` over a runner (see :mod:`accel.tools`)."""

    backend_name = "iluvatar"
    tool = TOOL
    search_path = SEARCH_PATH
    kind = DeviceKind.GPU
    visible_env = "CUDA_VISIBLE_DEVICES"
    torch_device_type = "cuda"

    def collect(self, col: Collection) -> Snapshot:
        table = col.required(lambda text, cmd: parse_table(text, command=cmd))
        readings, _listed = col.uuids(table.readings, ("GPU",))
        pair_boards(readings)
        for r in readings:
            if r.bus_id is not None and r.bus_id in table.resets:
                r.conditions.append(_reset_note())
        versions = {"driver": table.driver_version, "runtime_name": "cuda", "runtime": table.cuda_version}
        devices, samples = self.build(col, readings, versions=versions, capabilities=Capabilities(time_slicing=True))
        boards: dict[str, list[str]] = {}
        for d in devices:
            if d.board_id is not None:
                boards.setdefault(d.board_id, []).append(d.id)
        domains = [Domain(id=b, kind=DomainKind.DIE_PAIR, members=tuple(m)) for b, m in boards.items() if len(m) > 1]
        links, _ = topo_links(col, devices, label="GPU", fast={})
        return col.snapshot(
            devices, samples, links=links, domains=domains, processes=processes_of(table.processes, devices)
        )


def _reset_note() -> HealthCondition:
    message = "ixsmi -r reported this GPU as successfully reset after the table was printed"
    return condition(Subsystem.DEVICE, "DeviceReset", Severity.INFO, Action.NONE, message)
