"""Iluvatar CoreX backend (``iluvatar``): MR-V50/MR-V100, BI-V100, BI-V150 through ``ixsmi``.

Reads the ``ixsmi`` table, ``ixsmi -L`` and ``ixsmi topo -m`` through :mod:`accel.tools` only.
Binding: the CUDA-compatible stack, ``CUDA_VISIBLE_DEVICES=<index>``, torch device type
``cuda``.  Replay scenarios for tests live in ``scenarios/`` (``--option scenario=<name>``).
"""

from ._plugin import IluvatarPlugin

__all__ = ["PLUGIN", "IluvatarPlugin"]

PLUGIN = IluvatarPlugin()
