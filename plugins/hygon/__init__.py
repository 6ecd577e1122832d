"""Hygon DCUs (Z100/Z100L, K100, K100_AI, BW "HCU") through ``hy-smi`` / DTK ``rocm-smi``.

Backend ``hygon``.  Light entry-point module: importing it loads nothing heavy and runs nothing.
The probe looks, in order, for PCI functions with vendor id ``1d94`` in sysfs, then ``/dev/kfd``
with a Hygon (``0x1d94``) node in the KFD topology (or Hygon's ``/dev/mkfd``), then ``hy-smi`` in
``/opt/hyhal/bin`` (or ``PATH``), then the DTK ``rocm-smi`` (``/opt/dtk/bin``).

Devices are DCUs (kind ``dcu``) with the Hygon unique id as the stable id (``hygon:0x<hex>``),
the PCI address otherwise.  Memory comes from the ``--json`` query, whose keys say MiB (AMD's
say bytes).  Binding is ``HIP_VISIBLE_DEVICES`` / torch ``cuda`` / ``rccl``: the DTK stack is a
ROCm fork.  The model builder, health table and sysfs reader are the AMD plugin's
(:mod:`accel.plugins.amd.layers`).

Test facility: ``options["scenario"]`` (``accel ls --backend hygon --option
scenario=k100ai-1dcu``) replays a shipped scenario; ``--replay DIR`` replays any directory.
"""

from __future__ import annotations

from accel.toolkit import scenario_names

from ._plugin import HygonPlugin

__all__ = ["PLUGIN", "SCENARIOS", "HygonPlugin"]

#: Shipped replay scenarios (a test facility), by name.
SCENARIOS: tuple[str, ...] = scenario_names(__name__)

#: The object the ``hygon`` entry point names.
PLUGIN = HygonPlugin()
