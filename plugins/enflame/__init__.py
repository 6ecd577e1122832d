"""Enflame backend (``enflame``): T20/T21, S60/S60G and L300 GCUs through ``efsmi``.

Reads ``efsmi`` and ``efsmi -q`` through :mod:`accel.tools` only.  SR-IOV virtual functions
are partitions of their card.  Binding: ``TOPS_VISIBLE_DEVICES=<index>``, torch ``gcu``, collective
``eccl``, Ray ``GPU``, as Enflame's vllm-gcu platform declares them (``docs/frameworks.md``).
Replay scenarios for tests live in ``scenarios/`` (``--option scenario=<name>``).
"""

from ._plugin import EnflamePlugin

__all__ = ["PLUGIN", "EnflamePlugin"]

PLUGIN = EnflamePlugin()
