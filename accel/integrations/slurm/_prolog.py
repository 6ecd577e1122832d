"""The TaskProlog: what Slurm allocated, as each vendor's own visibility variable.

Slurm gives a task ``SLURM_STEP_GPUS`` (a step; ``SLURM_JOB_GPUS`` for the job's prolog):
positions in the node's list of ``gpu`` records, in the order :func:`generate` writes them
(measured on Slurm 22.05: ``0,1`` for the first two ``File=`` entries).  Each position maps to
one record, and so to one device and its ``binding``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from ...errors import ConfigError
from ._gres import GresConf, GresRecord

__all__ = ["SLURM_SET", "allocated", "task_prolog_lines"]

#: The variables Slurm's gpu plugin sets (by ``Flags=``); any that is not a present vendor's own
#: visibility variable would mislead that stack and is unset.
SLURM_SET = ("CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "ZE_AFFINITY_MASK", "GPU_DEVICE_ORDINAL")

_POSITIONS = re.compile(r"^[0-9]+(,[0-9]+)*$")


def allocated(env: Mapping[str, str], conf: GresConf, *, if_absent: str = "error") -> list[GresRecord] | None:
    """The records Slurm gave this task (``SLURM_STEP_GPUS``, else ``SLURM_JOB_GPUS``).

    A value that is not a comma list of positions, or names a position past the node's records,
    is a :class:`ConfigError`.  With neither variable set: ``if_absent="error"`` raises,
    ``"hide"`` returns ``[]`` (the job asked for no device: hide them all), ``"keep"`` returns
    ``None`` (change nothing).
    """
    name = next((n for n in ("SLURM_STEP_GPUS", "SLURM_JOB_GPUS") if n in env), None)
    if name is None:
        if if_absent == "hide":
            return []
        if if_absent == "keep":
            return None
        raise ConfigError("neither SLURM_STEP_GPUS nor SLURM_JOB_GPUS is set: is this a Slurm task with --gres=gpu?")
    value = env[name].strip()
    if not _POSITIONS.match(value):
        raise ConfigError(f"{name}={env[name]!r} is not a comma list of GPU positions")
    out: list[GresRecord] = []
    for pos in (int(v) for v in value.split(",")):
        if pos >= len(conf.records):
            raise ConfigError(f"{name}={value}: position {pos}, but this node has {len(conf.records)} gpu records")
        out.append(conf.records[pos])
    return out


def task_prolog_lines(records: list[GresRecord] | None, conf: GresConf) -> list[str]:
    """``export NAME=value`` per vendor variable on the node (only that vendor's devices, in
    Slurm's order; empty when none of its devices was allocated) and ``unset NAME`` for each of
    Slurm's variables no present vendor reads."""
    if records is None:
        return []
    envs: dict[str, list[str]] = {}
    for r in conf.records:
        if r.visible_env:
            envs.setdefault(r.visible_env, [])
    for r in records:
        if r.visible_env and r.visible_id is not None:
            envs[r.visible_env].append(r.visible_id)
    lines = [f"export {name}={','.join(ids)}" for name, ids in envs.items()]
    lines += [f"unset {name}" for name in SLURM_SET if name not in envs]
    return lines
