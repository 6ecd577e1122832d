"""Which devices a job sees: each vendor's visibility variable from the placed devices' ``binding``.

One rule for every way accel runs a job, so that ``accel serve``'s ``local`` executor and accel's
Slurm TaskProlog agree on what a job with the same devices sees: per vendor variable present on
the host, the placed devices' ids in the host's order, and the empty value (nothing visible) for a
vendor of the host that the job was given none of.  The rule itself lives in
:func:`accel.integrations.slurm.task_prolog_lines` over the records
:func:`accel.integrations.slurm.generate` builds from the host's inventory (the same records that
order Slurm's GPUs, with MIG instances as records of their own); this module only turns those
``export`` lines into an environment, and adds the binding of a device ``gres.conf`` cannot list
(one without a device node of its own), so no placed device goes unseen.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from accel.errors import ConfigError
from accel.integrations.slurm._gres import GresConf, GresRecord, generate
from accel.integrations.slurm._prolog import task_prolog_lines
from accel.model import Binding, HostInventory

from .._executor import PlacedDevice

__all__ = ["job_visibility_env", "placed_devices"]


def _bindings(inv: HostInventory) -> dict[str, tuple[Binding, str, str, int]]:
    """Every schedulable unit of ``inv`` (devices and partitions) by id: binding, vendor, model, index."""
    out: dict[str, tuple[Binding, str, str, int]] = {}
    by_id = {d.id: d for d in inv.devices}
    for pos, d in enumerate(inv.devices):
        out[d.id] = (d.binding, d.vendor, d.model, d.index if d.index is not None else pos)
    for p in inv.partitions:
        parent = by_id.get(p.parent_id)
        if parent is not None:
            index = parent.index if parent.index is not None else 0
            out[p.id] = (p.binding, parent.vendor, f"{parent.model} {p.profile}", index)
    return out


def _pairs(binding: Binding) -> tuple[tuple[str, str], ...]:
    if binding.visible_env and binding.visible_id is not None:
        return ((binding.visible_env, binding.visible_id),)
    return ()


def placed_devices(inv: HostInventory, device_ids: Sequence[str]) -> tuple[PlacedDevice, ...]:
    """The :class:`PlacedDevice` of each id in ``device_ids`` (devices or partitions of ``inv``),
    each with its own visibility variable read from its ``binding``.

    An id ``inv`` does not list is a :class:`~accel.errors.ConfigError` naming it and the host.
    """
    units = _bindings(inv)
    out: list[PlacedDevice] = []
    for did in device_ids:
        if did not in units:
            raise ConfigError(f"device {did!r} is not a device or partition of host {inv.host.hostname!r}")
        binding, vendor, model, index = units[did]
        out.append(
            PlacedDevice(
                host=inv.host.hostname,
                device_id=did,
                index=index,
                vendor=vendor,
                model=model,
                visibility_env=_pairs(binding),
            )
        )
    return tuple(out)


def _parse_exports(lines: Iterable[str]) -> dict[str, str]:
    env: dict[str, str] = {}
    for line in lines:
        if line.startswith("export "):
            name, _, value = line[len("export ") :].partition("=")
            env[name] = value
    return env


def job_visibility_env(inv: HostInventory, device_ids: Sequence[str]) -> dict[str, str]:
    """The visibility variables of a job given ``device_ids`` on the host ``inv`` describes.

    Every vendor variable of the host is set: to the placed devices' ids (comma-separated, in
    the host's order) or to ``""`` when the job has none of that vendor's devices (a job given
    no device sees none, rather than all of them).  Slurm's own variables that no vendor of the
    host reads are left out: the executor starts the job from a clean environment.
    """
    units = _bindings(inv)
    unknown = [d for d in device_ids if d not in units]
    if unknown:
        raise ConfigError(f"devices {unknown!r} are not devices or partitions of host {inv.host.hostname!r}")
    conf: GresConf = generate(inv)
    wanted = set(device_ids)
    chosen: list[GresRecord] = [r for r in conf.records if r.device_id in wanted]
    env = _parse_exports(task_prolog_lines(chosen, conf))
    # A unit gres.conf could not list (no device node of its own) still gets its variable.
    listed = {r.device_id for r in conf.records}
    for did in device_ids:
        if did in listed:
            continue
        for name, value in _pairs(units[did][0]):
            env[name] = f"{env[name]},{value}" if env.get(name) else value
    for did, (binding, _vendor, _model, _index) in units.items():
        if did not in listed and binding.visible_env:
            env.setdefault(binding.visible_env, "")
    return env
