"""``accel partition``: list the profiles a device can be cut into, create and destroy partitions.

Sub-commands: ``profiles`` (each device's profiles with memory, compute share, most instances,
how many more fit now, and placements), ``list`` (live partitions), ``create DEVICE PROFILE``,
``destroy PARTITION...`` and ``clear [DEVICE...]`` (destroy every partition of the devices; all
devices when none is named).  The backend must declare partition actuation (the simulator does;
see docs/guides/partitions.md).

A refusal is one ``accel: error:`` line naming the cause and its stable code, e.g.
``... [partition.no-placement]``: exit 2 when the command line names something that is not
there (a profile the product does not offer, a partition or device that does not exist), 1 for
every other refusal (no placement left, mode off, processes running, busy, failed half-way).
``clear`` goes on past a refusal and exits 1 if any partition stayed.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from ._options import number, text
from .commands import Command, CommandContext

if TYPE_CHECKING:
    from ..discovery import Session
    from ..model import HostInventory, Partition, PartitionProfile
    from ..plugin import SupportsPartitionActuation

__all__ = ["PARTITION"]


def _arguments(parser: argparse.ArgumentParser, context: CommandContext) -> None:
    sub = parser.add_subparsers(dest="partition_command", metavar="SUBCOMMAND", parser_class=type(parser))
    sub.required = True
    prof = sub.add_parser("profiles", help="the profiles each device can be cut into",
                          description="each device's partition profiles: memory, compute share, the most instances, "
                          "how many more fit now, and placements")
    prof.add_argument("--id", "-i", dest="ids", metavar="DEVICE[,DEVICE...]", type=text("a device list"),
                      help="only these devices (ids, UUIDs, PCI bus ids or list positions)")
    context.add_selection_arguments(prof)
    lst = sub.add_parser("list", help="live partitions", description="live partitions of every device")
    context.add_selection_arguments(lst)
    create = sub.add_parser("create", help="create one partition of a profile on a device",
                            description="create one partition of PROFILE on DEVICE and print it")
    create.add_argument("device", type=text("a device"), help="device id, UUID, PCI bus id or list position")
    create.add_argument("profile", type=text("a profile name"), help="a profile `accel partition profiles` lists")
    create.add_argument("--start", type=number(integer=True, unit="slot", minimum=0, maximum=1024), metavar="SLOT",
                        help="place it at this slot (MIG: a start `profiles` lists; default: the backend chooses)")
    context.add_selection_arguments(create)
    destroy = sub.add_parser("destroy", help="destroy partitions by id", description="destroy partitions by id")
    destroy.add_argument("partitions", nargs="+", type=text("a partition id"), metavar="PARTITION",
                         help="a partition id (`accel partition list`)")
    context.add_selection_arguments(destroy)
    clear = sub.add_parser("clear", help="destroy every partition of devices",
                           description="destroy every partition of the devices named (all devices when none)")
    clear.add_argument("devices", nargs="*", type=text("a device"), metavar="DEVICE",
                       help="device id, UUID, PCI bus id or list position")
    context.add_selection_arguments(clear)


def _actuators(session: Session) -> dict[str, tuple[SupportsPartitionActuation, HostInventory]]:
    """Each open backend that declares partition actuation, with its inventory."""
    from ..plugin import Capability, SupportsPartitionActuation

    out: dict[str, tuple[SupportsPartitionActuation, HostInventory]] = {}
    for name, inv in session.inventories().items():
        backend = session.backends.get(name)
        plugin = session.report.plugins.get(name)
        if backend is None or plugin is None or Capability.PARTITION_ACTUATION not in plugin.info.capabilities:
            continue
        if isinstance(backend, SupportsPartitionActuation):
            out[name] = (backend, inv)
    if not out:
        from ..errors import NotSupportedError

        raise NotSupportedError("no open backend can create or destroy partitions (see `accel plugins`)")
    return out


def _owner(acts: dict[str, tuple[SupportsPartitionActuation, HostInventory]],
           key: str) -> tuple[SupportsPartitionActuation, str, HostInventory]:
    """The actuator owning device ``key`` (an id, UUID, bus id, or position in the merged list)."""
    from ..errors import DeviceError
    from ._commands import _find

    for backend, inv in acts.values():
        try:
            return backend, _find(inv, key).id, inv
        except DeviceError:
            continue
    raise DeviceError(f"no device {key[:200]!r} on a backend that can partition; `accel ls` lists the ids",
                      device_id=key[:200])


def _free(prof: PartitionProfile, live: list[Partition]) -> int | None:
    """How many more instances of ``prof`` its placements allow now (``None``: no placements)."""
    if not prof.placements:
        return None
    taken = [p.placement for p in live if p.placement is not None]
    room = [pl for pl in prof.placements if not any(pl.overlaps(t) for t in taken)]
    count = 0
    used: list[Any] = []
    for pl in room:
        if not any(pl.overlaps(u) for u in used):
            used.append(pl)
            count += 1
    most = prof.max_instances
    if most is not None:
        count = min(count, most - sum(1 for p in live if p.profile == prof.name))
    return max(count, 0)


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def _profiles(args: argparse.Namespace, session: Session) -> int:
    from . import dump
    from ._render import bytes_h, table

    acts = _actuators(session)
    wanted: set[str] | None = None
    if args.ids:
        wanted = set()
        for key in args.ids.split(","):
            wanted.add(_owner(acts, key.strip())[1])
    profiles = [p for _b, inv in acts.values() for p in inv.partition_profiles
                if wanted is None or p.parent_id in wanted]
    parts = [p for _b, inv in acts.values() for p in inv.partitions]
    if args.json:
        print(dump([p.model_dump(mode="json") for p in profiles]))
        return 0
    rows = []
    for p in profiles:
        live = [q for q in parts if q.parent_id == p.parent_id]
        free = _free(p, live)
        places = ",".join(f"{pl.start}:{pl.size}" for pl in p.placements) or "-"
        rows.append([p.parent_id, p.name, bytes_h(p.memory_bytes), _ratio(p.compute_ratio),
                     str(p.compute_units) if p.compute_units is not None else "-",
                     str(p.max_instances) if p.max_instances is not None else "-",
                     "-" if free is None else str(free), places])
    if not rows:
        print("no device offers partition profiles", file=sys.stderr)
    else:
        print(table(["DEVICE", "PROFILE", "MEMORY", "COMPUTE", "UNITS", "MAX", "FREE", "PLACEMENTS"], rows))
    return 0


def _part_rows(parts: list[Partition]) -> str:
    from ._render import bytes_h, table

    return table(
        ["PARTITION", "DEVICE", "PROFILE", "PLACEMENT", "MEMORY", "COMPUTE"],
        [[p.id, p.parent_id, p.profile, f"{p.placement.start}:{p.placement.size}" if p.placement else "-",
          bytes_h(p.memory_bytes), _ratio(p.compute_ratio)] for p in parts],
    )


def _list(args: argparse.Namespace, session: Session) -> int:
    from . import dump

    parts = [p for _b, inv in _actuators(session).values() for p in inv.partitions]
    if args.json:
        print(dump([p.model_dump(mode="json") for p in parts]))
    elif parts:
        print(_part_rows(parts))
    else:
        print("no partitions", file=sys.stderr)
    return 0


def _create(args: argparse.Namespace, session: Session) -> int:
    from . import dump

    backend, device_id, _inv = _owner(_actuators(session), args.device)
    part = backend.create_partition(device_id, args.profile, placement_start=args.start)
    print(dump(part.model_dump(mode="json")) if args.json else _part_rows([part]))
    return 0


def _partition_owner(acts: dict[str, tuple[SupportsPartitionActuation, HostInventory]],
                     pid: str) -> SupportsPartitionActuation:
    from ..errors import PartitionNotFoundError

    for backend, inv in acts.values():
        if any(p.id == pid for p in inv.partitions):
            return backend
    raise PartitionNotFoundError(f"no partition {pid[:200]!r}; `accel partition list` lists them",
                                 partition_id=pid[:200])


def _destroy(args: argparse.Namespace, session: Session) -> int:
    from . import dump

    acts = _actuators(session)
    done = []
    for pid in args.partitions:
        _partition_owner(acts, pid).destroy_partition(pid)
        done.append(pid)
        if not args.json:
            print(f"destroyed {pid}")
    if args.json:
        print(dump({"destroyed": done}))
    return 0


def _clear(args: argparse.Namespace, session: Session) -> int:
    from ..errors import PartitionError, PartitionNotFoundError
    from . import dump

    acts = _actuators(session)
    targets: list[tuple[SupportsPartitionActuation, str]] = []
    wanted = {_owner(acts, key)[1] for key in args.devices} if args.devices else None
    for backend, inv in acts.values():
        targets += [(backend, p.id) for p in inv.partitions if wanted is None or p.parent_id in wanted]
    done: list[str] = []
    refused: list[dict[str, str]] = []
    for backend, pid in targets:
        try:
            backend.destroy_partition(pid)
        except PartitionNotFoundError:
            continue  # went with a sibling (an AMD mode), or someone else destroyed it: gone either way
        except PartitionError as exc:
            refused.append({"partition": pid, "code": exc.code, "message": str(exc)})
            print(f"accel: error: {exc} [{exc.code}]", file=sys.stderr)
            continue
        done.append(pid)
        if not args.json:
            print(f"destroyed {pid}")
    if args.json:
        print(dump({"destroyed": done, "refused": refused}))
    elif not targets:
        print("no partitions to clear", file=sys.stderr)
    return 1 if refused else 0


_RUN = {"profiles": _profiles, "list": _list, "create": _create, "destroy": _destroy, "clear": _clear}


def _run(args: argparse.Namespace) -> int:
    from ..errors import PartitionNotFoundError, PartitionProfileNotSupportedError
    from .commands import open_session

    try:
        with open_session(args) as session:
            return _RUN[args.partition_command](args, session)
    except (PartitionProfileNotSupportedError, PartitionNotFoundError) as exc:
        print(f"accel: error: {exc} [{exc.code}]", file=sys.stderr)
        return 2


PARTITION = Command(
    help="partition profiles; create, destroy and clear partitions (MIG, AMD modes, vNPU)",
    description="list the partition profiles of each device, and create, destroy or clear partitions "
    "(MIG instances, AMD compute / memory modes, Ascend vNPUs) on a backend that declares partition actuation",
    add_arguments=_arguments,
    run=_run,
)
