"""Golden runs: the engine's full behaviour on fixed workloads is what it was (bit for bit).

The stored digests (``fixtures/golden.json``) come from ``python -m tests.scheduler_queueing._golden
--write``; a refactor must keep every one of them.  A failure names the first journal event,
bill row or estimate that differs.  See ``_golden.py`` for the workloads.
"""

from __future__ import annotations

import json

import pytest

from . import _golden

STORED = json.loads(_golden.STORE.read_text())
NAMES = list(_golden.workloads())


def test_every_workload_has_a_stored_digest() -> None:
    assert sorted(STORED) == sorted(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_golden_run_is_unchanged(name: str) -> None:
    if name == "philly-quick" and _golden.TRACES is None:
        pytest.skip("the Philly traces (shared/traces/philly) are not in this checkout")
    entries = _golden.workloads()[name]()
    got = _golden.record(entries)
    if got["sha256"] != STORED[name]["sha256"]:
        pytest.fail(_golden.first_difference(name, entries, STORED[name]))
