"""Moore Threads backend (``mthreads``): MTT S80/S3000/S4000/S5000 through ``mthreads-gmi``.

Reads the default table, ``-q -j`` and ``mtlink -s`` through :mod:`accel.tools` only.
Binding: ``MUSA_VISIBLE_DEVICES=<index>``, torch device type ``musa``, collective ``mccl``.
Replay scenarios for tests live in ``scenarios/`` (``--option scenario=<name>``).
"""

from ._plugin import MthreadsPlugin

__all__ = ["PLUGIN", "MthreadsPlugin"]

PLUGIN = MthreadsPlugin()
