"""Huawei Ascend NPUs through ``npu-smi`` (backend ``ascend``).

Light entry-point module: importing it loads no vendor library and runs nothing.  The probe
looks, in order, for PCI functions with vendor id ``19e5`` and the processing-accelerator
class ``12xxxx`` (a Huawei iBMC VGA function, class ``0300``, shares the vendor id and is
ignored), then ``/dev/davinci*`` nodes, then ``npu-smi`` in ``/usr/local/bin``,
``/usr/local/sbin``, ``/usr/sbin`` or ``PATH``.

Devices are chips as the runtime schedules them (chip logic id, the number
``ASCEND_RT_VISIBLE_DEVICES`` takes; torch device type ``npu``; collectives ``hccl``), with
the NPU id kept in ``board_id``.  Ids are the PCI address, or the VDie ID with
``options["board"] = true``.  Memory keeps HBM and DDR apart (``MB`` is MiB).  Topology from
``npu-smi info -t topo`` gives HCCS / SIO / HCCS_SW links, HCCS groups and die pairs.

vNPUs (310P, 910, 910B): with ``options["vnpu"]`` true the inventory lists each chip's templates
as partition profiles and its vNPUs as partitions, and ``create_partition`` /
``destroy_partition`` run ``npu-smi set -t create-vnpu`` / ``destroy-vnpu`` (docs/guides/partitions.md).

Test facility: ``options["scenario"]`` (``accel ls --backend ascend --option
scenario=910b-8``) replays a shipped scenario instead of running ``npu-smi``; see
:data:`SCENARIOS`.
"""

from __future__ import annotations

from accel.toolkit import scenario_names

from ._plugin import AscendPlugin

__all__ = ["PLUGIN", "SCENARIOS", "AscendPlugin"]

#: Shipped replay scenarios (a test facility), by name.
SCENARIOS: tuple[str, ...] = scenario_names(__name__)

PLUGIN = AscendPlugin()
