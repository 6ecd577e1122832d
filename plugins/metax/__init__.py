"""MetaX backend (``metax``): C500/C550/C600 and N260 GPUs through ``mx-smi``.

Reads ``mx-smi``, ``mx-smi -L`` and ``mx-smi topo -m`` through :mod:`accel.tools` only.
Binding: the CUDA-compatible MACA stack, ``CUDA_VISIBLE_DEVICES=<index>``, torch device type
``cuda``.  Replay scenarios for tests live in ``scenarios/`` (``--option scenario=<name>``).
"""

from ._plugin import MetaxPlugin

__all__ = ["PLUGIN", "MetaxPlugin"]

PLUGIN = MetaxPlugin()
