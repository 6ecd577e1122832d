"""Slurm from the device model: ``gres.conf``, a TaskProlog, a HealthCheckProgram.

- :func:`generate` writes the node's ``gres.conf`` (one ``Name=gpu`` record per device, with
  ``Type``, ``File``, ``Cores``, ``Links`` and per-vendor ``Flags``) and the ``Gres=`` of its
  ``NodeName`` line; :func:`check` names every difference between an existing file and it.
- :func:`allocated` / :func:`task_prolog_lines` turn ``SLURM_STEP_GPUS`` into each vendor's own
  visibility variable (``ASCEND_RT_VISIBLE_DEVICES``, ``MLU_VISIBLE_DEVICES``...).
- :func:`decide_and_act` drains a node with a lost or unhealthy device (``scontrol``).

The command line is ``accel slurm gres-conf | task-prolog | healthcheck``; see docs/slurm.md.
Names load on first use, so ``accel --help`` does not pay for the model.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "Decision",
    "Difference",
    "GresConf",
    "GresRecord",
    "allocated",
    "bad_devices",
    "check",
    "decide_and_act",
    "generate",
    "parse_gres_conf",
    "slurm_type",
    "task_prolog_lines",
]

_WHERE = {
    "Difference": "_gres",
    "GresConf": "_gres",
    "GresRecord": "_gres",
    "check": "_gres",
    "generate": "_gres",
    "parse_gres_conf": "_gres",
    "slurm_type": "_gres",
    "allocated": "_prolog",
    "task_prolog_lines": "_prolog",
    "Decision": "_health",
    "bad_devices": "_health",
    "decide_and_act": "_health",
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
