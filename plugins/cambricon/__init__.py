"""Cambricon MLUs through ``cnmon`` (backend ``cambricon``).

Light entry-point module: importing it loads no vendor library and runs nothing.  The probe
looks for PCI vendor id ``cabc`` in sysfs, then ``/dev/cambricon_dev*``, then ``cnmon`` in
``/usr/bin``, ``/usr/local/neuware/bin`` or ``PATH``.

Devices are chips (``MLU_VISIBLE_DEVICES``, torch ``mlu``, collectives ``cncl``); memory is
MiB as printed; the ``Ecc-Error`` column becomes a ``cambricon.mlu:ecc-error`` condition.

Test facility: ``options["scenario"]`` (``accel ls --backend cambricon --option
scenario=mlu370-x8``) replays a shipped scenario instead of running ``cnmon``.
"""

from ._plugin import CambriconPlugin

__all__ = ["PLUGIN", "CambriconPlugin"]

PLUGIN = CambriconPlugin()
