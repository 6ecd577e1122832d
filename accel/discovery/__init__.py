"""Find, probe and open backends; merge several vendors into one session.

    >>> report = accel.discover()                 # doctest: +SKIP
    >>> for entry in report.entries: print(entry.name, entry.status, entry.reason)
    >>> with accel.open_session() as session:     # every present backend
    ...     inv = session.inventory()             # one HostInventory, all vendors

Backends come from the ``accel.backends`` entry points (read with :mod:`importlib.metadata`,
nothing imported until a backend is considered) and from :func:`accel.plugin.register`.  Every
failure (an import that raises anything or hangs, a probe that raises or hangs, an incompatible
plugin API, a name declared by two distributions, an open or read that fails, hangs or returns
the wrong type) becomes an entry of the :class:`DiscoveryReport`; it never stops the other
backends.  Every call into plugin code runs under a deadline in a worker thread
(``_call_with_deadline``); what that costs and cannot do is in ``docs/isolation.md``.

The package's modules, one job each: ``_loading`` (entry-point metadata, nothing imported),
``_deadline`` (calls into plugin code under deadlines, on worker threads), ``_report`` (the
report and the selection), ``_discover`` (load, version-check, probe), ``_session`` (open and
read) and ``_merge`` (one inventory from several).
"""

from __future__ import annotations

from ..plugin import ENTRY_POINT_GROUP as ENTRY_POINT_GROUP
from ._deadline import call_deadline
from ._discover import discover
from ._loading import refresh
from ._merge import merge_inventories as merge_inventories
from ._report import (
    CODE_DUPLICATE,
    CODE_INVALID_RETURN,
    CODE_TIMEOUT,
    OWN_DISTRIBUTION,
    BackendEntry,
    DiscoveryReport,
    EntryStatus,
    Stage,
    parse_selection,
)
from ._report import ENV_SELECTION as ENV_SELECTION
from ._report import Selection as Selection
from ._session import Session, open_session

__all__ = [
    "CODE_DUPLICATE",
    "CODE_INVALID_RETURN",
    "CODE_TIMEOUT",
    "OWN_DISTRIBUTION",
    "BackendEntry",
    "DiscoveryReport",
    "EntryStatus",
    "Session",
    "Stage",
    "call_deadline",
    "discover",
    "open_session",
    "parse_selection",
    "refresh",
]
