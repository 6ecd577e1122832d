"""benchmarks/philly/deep_plan.py: the engine's default depth against every job ahead exact."""

from __future__ import annotations

import csv
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from accel.scheduler.queueing import _walk

ROOT = Path(__file__).resolve().parents[2]
TRACES = Path(os.environ.get("ACCEL_PHILLY_TRACES", str(ROOT.parent / "shared" / "traces" / "philly")))


@pytest.fixture(scope="module")
def deep_plan() -> Any:
    sys.path.insert(0, str(ROOT / "benchmarks" / "philly"))
    try:
        import deep_plan as mod
    finally:
        sys.path.pop(0)
    return mod


@pytest.mark.skipif(not TRACES.is_dir(), reason="shared traces absent")
def test_default_depth_is_exact_on_a_philly_prefix_and_counts_the_case(deep_plan: Any, tmp_path: Path) -> None:
    tiers = tmp_path / "tiers.csv"
    tiers.write_text("vc,tier_s\n2869ce,230400.0\n")
    out = tmp_path / "rows.csv"
    plan = _walk._fast_plan
    argv = ["--vcs", "2869ce", "--limit", "150", "--depths", "default,0", "--traces", str(TRACES),
            "--tiers-from", str(tiers), "--out", str(out)]
    assert deep_plan.main(argv) == 0
    assert _walk._fast_plan is plan  # the counting wrapper is taken off again
    with out.open(newline="") as fh:
        rows = {r["depth"]: r for r in csv.DictReader(fh)}
    assert set(rows) == {"default", "all"}
    d, a = rows["default"], rows["all"]
    assert d["status"] == a["status"] == "complete"
    assert int(d["waiters"]) > 0  # the prefix queues jobs, so the estimates are exercised
    # the tiered Philly policy is inside the kept plan's case: the default plans every job exactly
    assert d["outside_exact_case"] == a["outside_exact_case"] == "0"
    for k in ("waiters", "est_err_median", "est_err_mean", "within_10pct", "avg_jct_h"):
        assert d[k] == a[k], k
    assert float(d["est_err_mean"]) == 0.0  # true durations, every job ahead exact
