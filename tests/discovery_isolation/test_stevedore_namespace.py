"""The plugin interface is stevedore's: its manager over the namespace sees every backend.

Discovery loads each entry point itself, one at a time under a deadline (stevedore's manager
imports them all in one go and lets ``SystemExit`` through, docs/isolation.md), but a plugin
author's package is the same: an entry point in the ``accel.backends`` namespace.
"""

from __future__ import annotations

import stevedore

from accel.discovery import ENTRY_POINT_GROUP, discover


def test_stevedore_lists_the_backends_discovery_considers() -> None:
    manager = stevedore.ExtensionManager(namespace=ENTRY_POINT_GROUP, invoke_on_load=False)
    seen_by_stevedore = set(manager.names())
    report = discover(include_entry_points=True)
    seen_by_discovery = {e.name for e in report.entries if e.origin == "entry-point"}
    assert seen_by_stevedore == seen_by_discovery
    assert {"sim", "nvidia", "amd", "ascend"} <= seen_by_stevedore
