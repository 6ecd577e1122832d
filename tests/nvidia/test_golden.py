"""The NVIDIA backend's outputs on every fake-NVML scenario equal the committed golden files.

They were recorded on the code before the backend was split into collaborators (issue 34); see
``tests/nvidia/_golden.py`` for what is recorded and masked, and how to re-record on purpose.
"""

from __future__ import annotations

import difflib

import pytest

from tests.nvidia._golden import expected, record, scenarios


@pytest.mark.parametrize("scenario", scenarios())
def test_outputs_equal_the_golden_files(scenario: str) -> None:
    want = expected(scenario)
    assert want is not None, f"no golden file for {scenario!r}: python tests/nvidia/_golden.py --write {scenario}"
    got = record(scenario)
    if got != want:
        diff = "".join(list(difflib.unified_diff(want.splitlines(True), got.splitlines(True), "golden", "now"))[:80])
        pytest.fail(f"{scenario}: the outputs changed (re-record only on purpose):\n{diff}")
