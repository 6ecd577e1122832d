"""Enflame backend (``enflame``): T20/T21, S60/S60G and L300 GCUs through ``efsmi``.

Reads ``efsmi`` and ``efsmi -q`` through :mod:`accel.tools` only.  SR-IOV virtual functions
are partitions of their card.  No visibility variable is bound (none is documented).
Replay scenarios for tests live in ``scenarios/`` (``--option scenario=<name>``).
"""

from ._plugin import EnflamePlugin

__all__ = ["PLUGIN", "EnflamePlugin"]

PLUGIN = EnflamePlugin()
