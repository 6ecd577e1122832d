"""nvidia-smi's option spellings on ``accel ls`` and ``accel ps``, for every vendor.

``accel ls -L`` / ``--list-gpus`` prints nvidia-smi's ``-L`` lines::

    GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-7b1e0c00-1d2a-4c3b-9e4f-000000000000)
      MIG 3g.40gb     Device  0: (UUID: MIG-5c3a1f00-0000-5a0b-9c1d-000000000002)

(the number is the device's position in ``accel ls``; a device with no UUID shows ``UUID: N/A``;
a partition line names its scheme, ``MIG`` on NVIDIA).  ``-l SECONDS`` / ``--loop`` repeats
``ls`` (the table or the ``--query`` rows, the CSV header once) until interrupted or ``--count``
reads.  ``--query-gpu`` is ``--query``; ``accel ps --query-compute-apps=pid,process_name,
used_memory`` (or ``--query``) prints nvidia-smi's process CSV.  The line formats follow real
``nvidia-smi -L`` output (``GPU 0: NVIDIA GeForce RTX 3060 Ti (UUID: GPU-1d8b...)`` in
LeStefduSud/myscripts ``mining/nvidia-commands.sh``; ``  MIG 1g.10gb     Device  0: (UUID:
MIG-...)`` under its GPU line in public MIG set-up notes, among them a k8s-dra-driver demo
README; found with the ``search`` tool).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ._options import number, text

if TYPE_CHECKING:  # the parser loads this module: the model is imported only to render
    from ..model import HostInventory, PartitionScheme

__all__ = ["add_ls_options", "add_ps_options", "list_gpus"]

#: Seconds: the longest ``--loop`` interval (one day, like ``watch --interval``).
MAX_LOOP_SECONDS = 86400.0

_LOOP = number(unit="seconds", minimum=0, min_inclusive=False, maximum=MAX_LOOP_SECONDS)
_COUNT = number(integer=True, unit="reads", minimum=0, maximum=10**9, note="0: until interrupted")


def add_ls_options(p: argparse.ArgumentParser) -> None:
    """``-L``/``--list-gpus``, ``-l``/``--loop`` and ``--count`` of ``accel ls``."""
    p.add_argument("-L", "--list-gpus", action="store_true",
                   help="one line per device as nvidia-smi -L prints it: GPU N: MODEL (UUID: ...), partitions indented")
    p.add_argument("-l", "--loop", type=_LOOP, metavar="SECONDS",
                   help=f"repeat every SECONDS (> 0, <= {MAX_LOOP_SECONDS:g}) until interrupted, as nvidia-smi -l; "
                        "with --query the CSV header is printed once")
    p.add_argument("--count", type=_COUNT, default=0, metavar="N",
                   help="with --loop: stop after N reads (0, the default: until interrupted)")


def add_ps_options(p: argparse.ArgumentParser) -> None:
    """``--query``/``--query-compute-apps`` and ``--format`` of ``accel ps``."""
    p.add_argument("--query", "--query-compute-apps", dest="query", metavar="FIELD[,FIELD...]",
                   type=text("a field list"),
                   help="print these process fields as CSV: nvidia-smi's (pid, process_name, used_memory, gpu_uuid, "
                        "gpu_bus_id, gpu_name) in nvidia-smi's units, or the model's (pid, name, memory_bytes, "
                        "device_id, ...) in SI base units; [N/A] when not read")
    p.add_argument("--format", dest="query_format", metavar="csv[,noheader][,nounits]", default="csv",
                   type=text("a format"), help="the --query output format (default csv)")


def _scheme_label(scheme: PartitionScheme) -> str:
    return "MIG" if scheme.value == "mig" else scheme.value.upper()


def list_gpus(inv: HostInventory, positions: Mapping[str, int]) -> str:
    """nvidia-smi's ``-L`` lines for ``inv`` (``positions``: each device's place in ``accel ls``)."""
    lines = []
    for n, dev in enumerate(inv.devices):
        lines.append(f"GPU {positions.get(dev.id, n)}: {dev.model} (UUID: {dev.uuid or 'N/A'})")
        label = _scheme_label(dev.partition_mode.scheme)
        parts = [p for p in inv.partitions if p.parent_id == dev.id]
        for i, part in enumerate(parts):
            lines.append(f"  {label} {part.profile:<11} Device {i:>2}: (UUID: {part.uuid or part.id})")
    return "\n".join(lines)
