"""Kunlunxin backend (``kunlunxin``): R200/R300 ("XPU-R") and P800 ("XPU-P") through ``xpu_smi``.

Reads the default view (4.x and 5.x layouts), ``-L`` and ``topo -m`` through
:mod:`accel.tools` only.  Binding: ``XPU_VISIBLE_DEVICES=<index>``, collective ``bkcl``.
Replay scenarios for tests live in ``scenarios/`` (``--option scenario=<name>``).
"""

from ._plugin import KunlunxinPlugin

__all__ = ["PLUGIN", "KunlunxinPlugin"]

PLUGIN = KunlunxinPlugin()
